package process_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/guest/host"
	"github.com/airlockrun/airlock/internal/sandbox"
)

func shell(t *testing.T, sb driver.Sandbox, line string) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"), Command: []string{"sh", "-c", line}, Capture: true})
	if err != nil {
		t.Fatalf("exec %q: %v", line, err)
	}
	return res
}

// TestAdopt plays a daemon that dies and comes back: the sandbox outlives its maker within the
// grace, with its files and background processes, is adopted (also when paused), and a stale or
// forged record is refused; past the grace the sandbox ends by itself.
func TestAdopt(t *testing.T) {
	d := newDriverWith(t, func(c *process.Config) { c.OrphanGrace = 2 * time.Second })
	ctx := context.Background()
	newBox := func() (sandbox.Spec, *host.Sandbox, json.RawMessage) {
		var spec sandbox.Spec
		spec.Resources.MemoryMB, spec.Resources.DiskMB = 128, 16
		sandbox.SetDefaults(&spec)
		sb, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drivertest.Destroy(ctx, t, sb) })
		return spec, sb.(*host.Sandbox), sb.(driver.HostFacter).HostFacts()
	}

	t.Run("within the grace", func(t *testing.T) {
		spec, old, facts := newBox()
		shell(t, old, "echo kept > /workspace/f; sh -c 'sleep 300 >/dev/null 2>&1 &'")
		old.Abandon()
		<-old.Done()
		time.Sleep(300 * time.Millisecond) // init notices, and keeps the sandbox
		sb, err := d.Adopt(ctx, old.ID(), spec, facts)
		if err != nil {
			t.Fatal(err)
		}
		if r := uidsOf(t, sb); r != uidsOf(t, old) || !recorded(d, old.ID(), r) {
			t.Errorf("adopted with range %v, made with %v", r, uidsOf(t, old))
		}
		if r := shell(t, sb, "cat /workspace/f; pgrep -x sleep >/dev/null && echo sleeping"); r.Stdout != "kept\nsleeping\n" {
			t.Fatalf("after adoption: %+v", r)
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(old.InitPid(), 0); err == nil {
			select {
			case <-time.After(5 * time.Second):
				t.Fatal("init survived the adopter's Destroy")
			case <-exited(old):
			}
		}
	})

	t.Run("root user", func(t *testing.T) {
		var spec sandbox.Spec
		spec.User = sandbox.UserRoot
		sandbox.SetDefaults(&spec)
		sb, err := d.Create(ctx, sandbox.NewID("sbx_"), spec)
		if err != nil {
			t.Fatal(err)
		}
		old := sb.(*host.Sandbox)
		t.Cleanup(func() { drivertest.Destroy(ctx, t, old) })
		facts := old.HostFacts()
		old.Abandon()
		adopted, err := d.Adopt(ctx, old.ID(), spec, facts)
		if err != nil {
			t.Fatal(err)
		}
		if r := shell(t, adopted, "id -u"); r.Stdout != "0\n" {
			t.Fatalf("adopted root sandbox: %+v", r)
		}
		drivertest.Destroy(ctx, t, adopted)
	})

	t.Run("paused", func(t *testing.T) {
		spec, old, facts := newBox()
		if err := old.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		old.Abandon()
		sb, err := d.Adopt(ctx, old.ID(), spec, facts)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.(driver.Pauser).Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if r := shell(t, sb, "echo thawed"); r.Stdout != "thawed\n" {
			t.Fatalf("after adopting a paused sandbox: %+v", r)
		}
		drivertest.Destroy(ctx, t, sb)
	})

	t.Run("forged or stale facts", func(t *testing.T) {
		spec, old, facts := newBox()
		var f map[string]any
		if err := json.Unmarshal(facts, &f); err != nil {
			t.Fatal(err)
		}
		f["startTime"] = 1
		forged, _ := json.Marshal(f)
		if _, err := d.Adopt(ctx, old.ID(), spec, forged); err == nil || !strings.Contains(err.Error(), "gone") {
			t.Errorf("adopt with another start time: %v", err)
		}
		if _, err := d.Adopt(ctx, "sbx_other", spec, facts); err == nil {
			t.Error("adopted a sandbox under another sandbox's id")
		}
		var orig map[string]any
		if err := json.Unmarshal(facts, &orig); err != nil {
			t.Fatal(err)
		}
		delete(orig, "uids")
		older, _ := json.Marshal(orig)
		if _, err := d.Adopt(ctx, old.ID(), spec, older); err == nil || !strings.Contains(err.Error(), "uid range") {
			t.Errorf("adopted a sandbox whose facts name no uid range of its own: %v", err)
		}
		// The refusals left the sandbox alone: its maker still runs it.
		if r := shell(t, old, "echo fine"); r.Stdout != "fine\n" {
			t.Errorf("after refused adoptions: %+v", r)
		}
	})

	t.Run("past the grace", func(t *testing.T) {
		spec, old, facts := newBox()
		old.Abandon()
		select {
		case <-exited(old):
		case <-time.After(10 * time.Second):
			t.Fatal("an orphaned sandbox outlived its grace")
		}
		if _, err := d.Adopt(ctx, old.ID(), spec, facts); err == nil {
			t.Fatal("adopted a sandbox that ended")
		}
		if err := d.Reclaim(ctx, old.ID()); err != nil {
			t.Fatal(err)
		}
	})
}

// exited is closed when the sandbox's init is gone.
func exited(s *host.Sandbox) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for syscall.Kill(s.InitPid(), 0) == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return ch
}
