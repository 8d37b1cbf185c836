package process_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver/process"
)

// TestReclaimFrozenOrphan: a paused sandbox whose daemon died is frozen, so its init never sees
// the grace run out; Reclaim ends it all the same (kill, then thaw, so that the kill lands), and
// leaves neither processes, cgroup nor init socket.
func TestReclaimFrozenOrphan(t *testing.T) {
	d := newDriverWith(t, func(c *process.Config) { c.OrphanGrace = 300 * time.Millisecond })
	ctx := context.Background()
	old := newSmall(t, d)
	shell(t, old, "sh -c 'sleep 300 >/dev/null 2>&1 &'")
	if err := old.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	old.Abandon()
	select {
	case <-exited(old):
		t.Fatal("a frozen init ended by itself") // then this test no longer tests anything
	case <-time.After(time.Second):
	}
	if err := d.Reclaim(ctx, old.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited(old):
	case <-time.After(5 * time.Second):
		t.Fatal("a reclaimed frozen sandbox's init lives on")
	}
	if left := d.Leftovers(); len(left) > 0 {
		t.Errorf("after reclaiming a frozen orphan: %v", left)
	}
	if _, err := os.Stat(filepath.Join(d.StateDir(), "run", old.ID())); !os.IsNotExist(err) {
		t.Errorf("its init socket: %v", err)
	}
}

// TestCloseSweepsSockets: at a clean stop the init sockets of sandboxes that are gone are
// removed at once, whatever their age; a live sandbox's stays. A start's sweep leaves a young one
// (it may be a create's in flight).
func TestCloseSweepsSockets(t *testing.T) {
	d := newDriverWith(t, func(c *process.Config) { c.OrphanGrace = time.Minute })
	ctx := context.Background()
	live := newSmall(t, d)
	run := filepath.Join(d.StateDir(), "run")
	stale := filepath.Join(run, "sbx_gone")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: stale, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // as a killed init leaves it
	names := func() []string {
		ents, _ := os.ReadDir(run)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	d.Sweep(ctx)
	if !slices.Contains(names(), "sbx_gone") {
		t.Fatal("a start's sweep removed a young socket")
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{live.ID()}) {
		t.Errorf("sockets after Close: %v, want only the live sandbox's", got)
	}
}
