package manager

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
)

// TestRecover: what a killed daemon left, met by the next one's Recover. A live record whose
// instance its level finds by the recorded facts is adopted as it was (a paused one stays
// paused); one whose instance is gone, or that cannot be verified (no facts, still
// provisioning, a warm pool's), is reclaimed and failed with reason daemon_restart; one with a
// teardown recorded is torn down, whatever its instance; an instance a restore replaced is
// reclaimed; an exec that was running is lost.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	st, f := openStore(t), drivertest.NewFake()
	facts := func(instance string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"instance": instance})
		return b
	}
	spec := sandbox.Spec{Isolation: api.LevelProcess, Environment: map[string]string{"K": "v"}}
	sandbox.SetDefaults(&spec)
	cases := []struct {
		id, tenant, status string
		host               json.RawMessage
		onHost             bool
		teardown           bool
		want               string // status and reason after Recover
		adopted            bool
	}{
		{id: "running", status: api.StatusRunning, host: facts("running"), onHost: true, want: "running x", adopted: true},
		{id: "paused", status: api.StatusPaused, host: facts("paused"), onHost: true, want: "paused x", adopted: true},
		{id: "gone", status: api.StatusRunning, host: facts("gone"), want: "failed daemon_restart"},
		{id: "no-facts", status: api.StatusReady, onHost: true, want: "failed daemon_restart"},
		{id: "other-facts", status: api.StatusReady, host: facts("running"), onHost: true, want: "failed daemon_restart"},
		{id: "provisioning", status: api.StatusProvisioning, host: facts("provisioning"), onHost: true, want: "failed daemon_restart"},
		{id: "pooled", tenant: poolTenant("warm"), status: api.StatusReady, host: facts("pooled"), onHost: true, want: "failed daemon_restart"},
		{id: "ending", status: api.StatusRunning, host: facts("ending"), onHost: true, teardown: true, want: "terminated idle"},
	}
	for _, c := range cases {
		ten := c.tenant
		if ten == "" {
			ten = "t1"
		}
		rec := store.Sandbox{ID: c.id, Tenant: ten, Spec: spec, Status: c.status, Reason: "x", Host: c.host}
		if err := st.InsertSandbox(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if c.onHost {
			f.Put(c.id)
		}
		if c.teardown {
			td := store.Teardown{SandboxID: c.id, LevelID: c.id, Isolation: api.LevelProcess, End: api.StatusTerminated, Reason: sandbox.ReasonIdle}
			if err := st.BeginTeardown(ctx, td); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.Put("running-r1")
	if err := st.Retire(ctx, "running-r1", "running", api.LevelProcess); err != nil {
		t.Fatal(err)
	}
	if err := st.StartExec(ctx, api.Execution{ID: "exec_1", SandboxID: "gone", Command: []string{"x"}, Status: api.ExecRunning}); err != nil {
		t.Fatal(err)
	}

	m := testManager(t, st, f)
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	var adopted []string
	for _, c := range cases {
		rec, err := st.Sandbox(ctx, "", c.id)
		if got := rec.Status + " " + rec.Reason; err != nil || got != c.want {
			t.Errorf("%s after Recover: %q %v, want %q", c.id, got, err, c.want)
		}
		if c.adopted {
			adopted = append(adopted, c.id)
		}
	}
	slices.Sort(adopted)
	if live := f.Live(); !slices.Equal(live, adopted) {
		t.Errorf("on the host after Recover: %q, want the adopted %q", live, adopted)
	}
	if m.Live() != len(adopted) {
		t.Errorf("%d sandboxes live in the manager, want %d", m.Live(), len(adopted))
	}
	if !f.Paused("paused") || f.Paused("running") {
		t.Error("an adopted sandbox does not follow its record's pause")
	}
	if tds, err := st.Teardowns(ctx); err != nil || len(tds) != 0 {
		t.Errorf("teardowns left: %+v %v", tds, err)
	}
	if retired, err := st.Retired(ctx); err != nil || len(retired) != 0 {
		t.Errorf("retired instances left: %+v %v", retired, err)
	}
	if e, err := st.Exec(ctx, "gone", "exec_1"); err != nil || e.Status != api.ExecLost {
		t.Errorf("the exec a crash cut off: %s %v, want lost", e.Status, err)
	}

	// The adopted ones serve as they did; their end is this daemon's.
	tctx := tenant.With(ctx, "t1")
	res, err := m.Exec(tctx, "running", api.ExecRequest{Command: []string{"env"}}, Stream{})
	if err != nil || res.Stdout != "K=v\n" {
		t.Errorf("exec in an adopted sandbox: %q %v", res.Stdout, err)
	}
	if sb, err := m.Resume(tctx, "paused"); err != nil || sb.Status != api.StatusRunning || f.Paused("paused") {
		t.Errorf("resume of an adopted paused sandbox: %s %v", sb.Status, err)
	}
	if sb, err := m.Terminate(tctx, "running"); err != nil || sb.Status != api.StatusTerminated {
		t.Errorf("terminate of an adopted sandbox: %s %v", sb.Status, err)
	}
	if live := f.Live(); !slices.Equal(live, []string{"paused"}) {
		t.Errorf("on the host after the terminate: %q", live)
	}
}
