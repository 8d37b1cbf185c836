package cgroups

import (
	"os"
	"testing"
	"time"
)

// TestWatchMemory: a process that grows past the watched level, under a limit well above it, is
// reported while it still runs (nobody is OOM-killed), and the watch reports nothing before.
func TestWatchMemory(t *testing.T) {
	l := hostLayout(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	c := newCgroup(t, l, Resources{MemoryBytes: 256 << 20})
	p := startIn(t, c, `exec /usr/bin/python3 -c "import time; b=bytearray(96<<20); time.sleep(30)"`)
	w, err := c.WatchMemory(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.C:
		if w.Over() {
			t.Fatal("over the level before the process allocated")
		}
	case <-time.After(200 * time.Millisecond):
	}
	p.release(t)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-w.C:
		case <-deadline:
			t.Fatal("no notification within 10 s of allocating past the level")
		}
		if w.Over() {
			break
		}
	}
	if s := stats(t, c); s.OOMKills != 0 {
		t.Errorf("OOMKills = %d: the watch is meant to act before the limit", s.OOMKills)
	}
}
