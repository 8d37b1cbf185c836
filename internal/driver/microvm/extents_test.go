package microvm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/internal/snapshot"
)

// TestExtents: a sparse file saved as its extents comes back byte for byte, holes included; an
// extent past the end, or a stream cut inside one, is corrupt.
func TestExtents(t *testing.T) {
	const size = 8 << 20
	src := filepath.Join(t.TempDir(), "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 1 << 20, 5<<20 + 4096, size - 4096} {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte(off >> 12)}, 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	var saved bytes.Buffer
	if err := writeExtents(&saved, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if saved.Len() > 1<<20 {
		t.Errorf("8 MiB with 16 KiB of data saved as %d bytes: holes were copied", saved.Len())
	}
	want, _ := os.ReadFile(src)
	extent := func(off, n uint64, data int) []byte {
		b := binary.BigEndian.AppendUint64(nil, off)
		b = binary.BigEndian.AppendUint64(b, n)
		return append(b, make([]byte, data)...)
	}
	cases := []struct {
		name    string
		stream  []byte
		corrupt bool
	}{
		{"saved", saved.Bytes(), false},
		{"past the end", extent(size-10, 20, 20), true},
		{"overflowing", extent(1<<63, 1<<63, 0), true},
		{"cut inside an extent", extent(0, 4096, 100), true},
		{"cut inside a header", extent(0, 0, 0)[:9], true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst, err := os.Create(filepath.Join(t.TempDir(), "dst"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			if err := dst.Truncate(size); err != nil {
				t.Fatal(err)
			}
			err = layExtents(bytes.NewReader(c.stream), dst, size)
			if c.corrupt {
				if !errors.Is(err, snapshot.ErrCorrupt) {
					t.Fatalf("layExtents: %v, want corrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(dst.Name())
			if !bytes.Equal(got, want) {
				t.Fatal("the laid-out file differs from the saved one")
			}
		})
	}
}
