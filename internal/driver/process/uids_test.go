package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// uidsOf returns the host uid range a sandbox's facts record.
func uidsOf(t *testing.T, sb driver.Sandbox) uidalloc.Range {
	t.Helper()
	var f struct{ UIDs *uidalloc.Range }
	if err := json.Unmarshal(sb.(driver.HostFacter).HostFacts(), &f); err != nil || f.UIDs == nil {
		t.Fatalf("no uid range in the host facts: %s", sb.(driver.HostFacter).HostFacts())
	}
	return *f.UIDs
}

// recorded reports whether the host's records hold range r for sandbox id of d.
func recorded(d *process.Driver, id string, r uidalloc.Range) bool {
	o := uidalloc.Owner{Instance: d.Runtime().Instance(), Level: sandbox.LevelProcess, Sandbox: id}
	for _, got := range d.Runtime().UIDs().Owned(o) {
		if got == r {
			return true
		}
	}
	return false
}

func newSmall(t *testing.T, d *process.Driver) *host.Sandbox {
	t.Helper()
	var spec sandbox.Spec
	spec.Resources.MemoryMB, spec.Resources.DiskMB = 128, 16
	sandbox.SetDefaults(&spec)
	sb, err := d.Create(context.Background(), sandbox.NewID("sbx_"), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drivertest.Destroy(context.Background(), t, sb) })
	return sb.(*host.Sandbox)
}

// TestOwnUIDRanges: two live sandboxes map their ids to disjoint host ranges, recorded in the
// host's allocator, so that a file one of them makes is a stranger's to the other; each range is
// freed when its sandbox is destroyed.
func TestOwnUIDRanges(t *testing.T) {
	d := newDriver(t)
	a, b := newSmall(t, d), newSmall(t, d)
	ra, rb := uidsOf(t, a), uidsOf(t, b)
	if ra == rb {
		t.Fatalf("two live sandboxes share the uid range %v", ra)
	}
	for _, c := range []struct {
		sb *host.Sandbox
		r  uidalloc.Range
	}{{a, ra}, {b, rb}} {
		m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", c.sb.InitPid()))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(strings.Fields(string(m)), " "), fmt.Sprint(0, c.r.First(), uidalloc.Size); got != want {
			t.Errorf("sandbox %s: uid_map %q, want %q", c.sb.ID(), got, want)
		}
		if !recorded(d, c.sb.ID(), c.r) {
			t.Errorf("sandbox %s: range %v is not recorded", c.sb.ID(), c.r)
		}
	}
	shell(t, a, "echo mine > /workspace/f")
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/root/workspace/f", a.InitPid()), &st); err != nil {
		t.Fatal(err)
	}
	if want := ra.HostID(sandbox.AgentUID); int(st.Uid) != want {
		t.Errorf("a's file is owned by host uid %d, want %d", st.Uid, want)
	}
	if _, in := rb.SandboxID(int(st.Uid)); in {
		t.Errorf("a's file (host uid %d) is in b's range %v", st.Uid, rb)
	}
	if err := a.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if recorded(d, a.ID(), ra) {
		t.Errorf("range %v still recorded after Destroy", ra)
	}
	if !recorded(d, b.ID(), rb) {
		t.Errorf("b's range %v went with a's Destroy", rb)
	}
}

// TestReclaimFreesUIDRange: a sandbox whose maker is gone (its control socket dropped) is
// reclaimed, and its range freed with it.
func TestReclaimFreesUIDRange(t *testing.T) {
	d := newDriver(t)
	sb := newSmall(t, d)
	r := uidsOf(t, sb)
	sb.Abandon()
	<-exited(sb)
	if !recorded(d, sb.ID(), r) {
		t.Fatalf("range %v freed before the sandbox was reclaimed", r)
	}
	if err := d.Reclaim(context.Background(), sb.ID()); err != nil {
		t.Fatal(err)
	}
	if recorded(d, sb.ID(), r) {
		t.Errorf("range %v still recorded after Reclaim", r)
	}
}
