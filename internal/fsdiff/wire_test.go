package fsdiff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"testing"
)

// TestTreeWire: a scan's tree survives its wire form, field for field and partial or not.
func TestTreeWire(t *testing.T) {
	layer := t.TempDir()
	for _, op := range []fsOp{write("upper/etc/motd", "hi"), mkdir("upper/workspace/d"), write("shm/s", "x"),
		symlink("motd", "upper/etc/link"), write("work/own", "skipped")} {
		op(t, layer)
	}
	scanned, err := Scan(layer, layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []Tree{
		scanned,
		{Entries: map[string]Entry{"/a": {Deleted: true}, "/b": {Mode: 0o40755, Opaque: true, Ino: 1<<63 + 5, Size: -1}}, Partial: true},
		{Entries: map[string]Entry{}},
	} {
		var b bytes.Buffer
		if err := WriteTree(&b, tr); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTree(&b)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Entries, tr.Entries) || got.Partial != tr.Partial {
			t.Fatalf("read back %+v; wrote %+v", got, tr)
		}
	}
}

// TestTreeWireBounded: a tree past MaxTreeBytes is written partial, the paths past the bound
// left out, and read back whole.
func TestTreeWireBounded(t *testing.T) {
	defer func(n int) { maxTreeBytes = n }(maxTreeBytes)
	maxTreeBytes = 4096
	tr := Tree{Entries: map[string]Entry{}}
	for i := range 200 {
		tr.Entries["/"+strings.Repeat("p", 20)+string(rune('a'+i%26))+strings.Repeat("q", i/26)] = Entry{Mode: 0o100644}
	}
	var b bytes.Buffer
	if err := WriteTree(&b, tr); err != nil {
		t.Fatal(err)
	}
	if b.Len() > maxTreeBytes {
		t.Fatalf("wrote %d bytes, past %d", b.Len(), maxTreeBytes)
	}
	got, err := ReadTree(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Partial || len(got.Entries) == 0 || len(got.Entries) >= len(tr.Entries) {
		t.Fatalf("read %d of %d entries, partial %v", len(got.Entries), len(tr.Entries), got.Partial)
	}
}

// wire builds a tree's wire form by hand, for the refusals.
type wire struct{ bytes.Buffer }

func (w *wire) entry(p string, flags byte) *wire {
	w.WriteByte(recEntry)
	w.Write(binary.AppendUvarint(nil, uint64(len(p))))
	w.WriteString(p)
	e := make([]byte, entryBytes)
	e[entryBytes-1] = flags
	w.Write(e)
	return w
}

func (w *wire) end(flags byte, n uint64) *wire {
	w.WriteByte(recEnd)
	w.WriteByte(flags)
	w.Write(binary.AppendUvarint(nil, n))
	return w
}

func header() *wire {
	w := &wire{}
	w.WriteString(treeMagic)
	return w
}

// TestReadTreeRefuses: what a hostile writer sends is refused, with the reason, before it costs
// more than the bounds.
func TestReadTreeRefuses(t *testing.T) {
	defer func(n, m int) { maxTreeBytes, maxEntries = n, m }(maxTreeBytes, maxEntries)
	maxTreeBytes, maxEntries = 1<<20, 50
	many := header()
	for i := range 51 {
		many.entry(fmt.Sprintf("/f%03d", i), 0)
	}
	long := header()
	for i := range 40 { // fewer than maxEntries, 1.2 MiB
		long.entry("/"+strconv.Itoa(10+i)+strings.Repeat("x", 30000), 0)
	}
	for _, c := range []struct {
		name, why string
		in        []byte
	}{
		{"empty", "ends early", nil},
		{"not a tree", "header", []byte("GIF89a and then some bytes of an image")},
		{"no trailer", "ends early", header().entry("/a", 0).Bytes()},
		{"cut in an entry", "ends early", header().entry("/a", 0).Bytes()[:len(treeMagic)+6]},
		{"relative", `path "a"`, header().entry("a", 0).end(0, 1).Bytes()},
		{"dot dot", `path "/a/../../etc"`, header().entry("/a/../../etc", 0).end(0, 1).Bytes()},
		{"root", `path "/"`, header().entry("/", 0).end(0, 1).Bytes()},
		{"trailing slash", `path "/a/"`, header().entry("/a/", 0).end(0, 1).Bytes()},
		{"nul", "path", header().entry("/a\x00b", 0).end(0, 1).Bytes()},
		{"twice", "out of order, or twice", header().entry("/a", 0).entry("/a", 0).end(0, 2).Bytes()},
		{"out of order", "out of order", header().entry("/b", 0).entry("/a", 0).end(0, 2).Bytes()},
		{"unknown flags", "flags", header().entry("/a", 8).end(0, 1).Bytes()},
		{"a path too long", "a path of", append(header().Bytes(), recEntry, 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"empty path", "a path of 0", header().entry("", 0).end(0, 1).Bytes()},
		{"a count that lies", "trailer says 5", header().entry("/a", 0).end(0, 5).Bytes()},
		{"trailer flags", "flags 0x2", header().end(2, 0).Bytes()},
		{"unknown record", "kind", append(header().Bytes(), 'x')},
		{"data after the end", "follows its end", append(header().end(0, 0).Bytes(), 'e')},
		{"too many entries", "more than 50 entries", many.end(0, 51).Bytes()},
		{"too many bytes", "longer than", long.end(0, 40).Bytes()},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTree(bytes.NewReader(c.in))
			if !errors.Is(err, ErrBadTree) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("err %v; want ErrBadTree saying %q", err, c.why)
			}
		})
	}
	// A reader's own error is returned as it is, not as a bad tree.
	boom := errors.New("the link broke")
	_, err := ReadTree(io.MultiReader(bytes.NewReader(header().Bytes()), &failing{boom}))
	if !errors.Is(err, boom) || errors.Is(err, ErrBadTree) {
		t.Fatalf("err %v; want the reader's", err)
	}
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }
