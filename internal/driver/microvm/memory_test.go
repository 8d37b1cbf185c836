package microvm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// TestMemorySnapshot: a VM saved with its memory forks into two that both go on counting from
// where it was, each with its own count; and a memory snapshot damaged in any of its files, or
// cut short, is refused as corrupt, with nothing of the restore left behind.
func TestMemorySnapshot(t *testing.T) {
	d := newDriver(t)
	h := &drivertest.Harness{D: d}
	spec := sandbox.Spec{Resources: sandbox.Resources{MemoryMB: 256, DiskMB: 64}}
	sb := h.New(t, spec)
	res := drivertest.Exec(t, sb, 20*time.Second, `sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' >/dev/null 2>&1 &
echo kept > /workspace/f; sleep 0.5`)
	if res.ExitCode != 0 {
		t.Fatalf("start the counter: exit %d %s", res.ExitCode, res.Stderr)
	}
	mem := t.TempDir()
	var layer bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if saved, err := sb.(driver.Snapshotter).Snapshot(ctx, &layer, mem); err != nil || !saved {
		t.Fatalf("snapshot with memory: saved %v, err %v", saved, err)
	}
	count := func(sb driver.Sandbox) int { t.Helper(); return readCount(t, sb) }
	at := count(sb)

	t.Run("fork", func(t *testing.T) {
		var forks []driver.Sandbox
		for i := 0; i < 2; i++ {
			t0 := time.Now()
			f, err := h.Restore(t, spec, bytes.NewReader(layer.Bytes()), mem)
			if err != nil {
				t.Fatalf("restore %d: %v", i, err)
			}
			t.Logf("restored in %v", time.Since(t0))
			forks = append(forks, f)
		}
		for i, f := range forks {
			first := count(f)
			then := countPast(t, func() int { return count(f) }, first)
			if first > at+40 || then <= first {
				t.Fatalf("fork %d: counter %d then %d; it was at %d when saved", i, first, then, at)
			}
			if res := drivertest.Exec(t, f, 10*time.Second, fmt.Sprintf("cat /workspace/f; echo %d > /workspace/g; cat /workspace/g", i)); res.Stdout != fmt.Sprintf("kept\n%d\n", i) {
				t.Fatalf("fork %d: files %q %s (%+v)", i, res.Stdout, res.Stderr, res)
			}
		}
	})

	// Each damage is made on a copy of the snapshot's directory.
	damaged := func(t *testing.T, hurt func(dir string)) string {
		dir := t.TempDir()
		ents, err := os.ReadDir(mem)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(mem, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		hurt(dir)
		return dir
	}
	flip := func(name string, at func(size int64) int64) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[at(int64(len(b)))] ^= 0x40
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	truncate := func(name string) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, name)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}
	}
	middle := func(n int64) int64 { return n / 2 }
	cases := []struct {
		name string
		hurt func(dir string)
		want error
	}{
		{"guest RAM flipped", flip("ram.extents", middle), snapshot.ErrCorrupt},
		{"guest RAM cut short", truncate("ram.extents"), snapshot.ErrCorrupt},
		{"device state flipped", flip("vmstate", func(n int64) int64 { return n - 100 }), snapshot.ErrCorrupt},
		{"device state cut short", truncate("vmstate"), snapshot.ErrCorrupt},
		{"disk flipped", flip("disk.extents", middle), snapshot.ErrCorrupt},
		{"etc image cut short", truncate("etc.erofs"), snapshot.ErrCorrupt},
		{"no manifest", func(dir string) { os.Remove(filepath.Join(dir, "manifest.json")) }, snapshot.ErrCorrupt},
		{"manifest garbled", func(dir string) { _ = os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{"), 0o600) }, snapshot.ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := damaged(t, c.hurt)
			before := d.Leftovers() // the original's
			rs, err := h.Restore(t, spec, bytes.NewReader(layer.Bytes()), dir)
			if err == nil {
				t.Fatalf("restored %s from a damaged snapshot", rs.ID())
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("restore: %v; want %v", err, c.want)
			}
			t.Logf("refused: %v", err)
			if left := d.Leftovers(); !slices.Equal(left, before) {
				t.Fatalf("a refused restore left: %s", strings.Join(left, "; "))
			}
		})
	}
	t.Run("shape", func(t *testing.T) {
		other := spec
		other.Resources.MemoryMB = 512
		if rs, err := h.Restore(t, other, bytes.NewReader(layer.Bytes()), mem); err == nil {
			t.Fatalf("restored %s into a VM of another size", rs.ID())
		} else if !strings.Contains(err.Error(), "MiB of RAM") {
			t.Fatalf("restore into another shape: %v", err)
		}
	})
}
