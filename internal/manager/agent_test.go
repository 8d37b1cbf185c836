package manager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/drivertest"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/tenant"
)

// The fake level's "agent" command runs until its stdin says "exit N" (drivertest.Fake).

// agentLog is what sandbox id's log holds of the agent's output.
func agentLog(t *testing.T, m *Manager, ctx context.Context, id string) string {
	t.Helper()
	var out strings.Builder
	err := m.Logs(ctx, id, 0, false, func(e api.LogEntry) error {
		if e.Stream == api.StreamStdout || e.Stream == api.StreamStderr {
			out.WriteString(e.Stream + ":" + e.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestAgentLifecycle: a started agent makes its sandbox running; an exec runs beside it; what is
// written to its stdin reaches it and its output is the sandbox's log; its exit ends the
// sandbox completed (0) or failed with reason agent_exit and the code in the transition's event;
// the sandbox holds nothing after, and a terminate closes its record.
func TestAgentLifecycle(t *testing.T) {
	for _, c := range []struct {
		name   string
		exit   int
		status string
	}{
		{"exit 0", 0, api.StatusCompleted},
		{"exit 3", 3, api.StatusFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openStore(t)
			f := drivertest.NewFake()
			w := watchDestroys(st, f, nil)
			m := testManager(t, st, f)
			ctx := tenant.With(context.Background(), "t1")
			sb, err := m.Create(ctx, sandbox.Spec{Agent: &api.Agent{Command: api.Shell("agent hello")}})
			if err != nil || sb.Status != api.StatusReady {
				t.Fatalf("create: %s %v", sb.Status, err)
			}
			if _, err := m.AgentStdin(ctx, sb.ID, strings.NewReader("x"), false); !errors.Is(err, errdefs.ErrConflict) {
				t.Errorf("stdin before start: %v, want a conflict", err)
			}
			got, err := m.Start(ctx, sb.ID)
			if err != nil || got.Status != api.StatusRunning {
				t.Fatalf("start: %s %v", got.Status, err)
			}
			if _, err := m.Start(ctx, sb.ID); !errors.Is(err, errdefs.ErrConflict) {
				t.Errorf("a second start while it runs: %v, want a conflict", err)
			}
			res, err := m.Exec(ctx, sb.ID, api.ExecRequest{Command: []string{"files"}}, Stream{})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("an exec beside the agent: %+v %v", res, err)
			}
			if _, err := m.AgentStdin(ctx, sb.ID, strings.NewReader("line one\nerr oops\n"), false); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the agent's output in the log", func() bool {
				l := agentLog(t, m, ctx, sb.ID)
				return strings.Contains(l, "stdout:hello\n") && strings.Contains(l, "stdout:line one\n") && strings.Contains(l, "stderr:oops\n")
			})
			if _, err := m.AgentStdin(ctx, sb.ID, strings.NewReader(fmt.Sprintf("exit %d\n", c.exit)), true); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the sandbox ends "+c.status, func() bool {
				s, _ := statusOf(t, m, ctx, sb.ID)
				return s == c.status
			})
			if _, reason := statusOf(t, m, ctx, sb.ID); reason != sandbox.ReasonAgentExit {
				t.Errorf("reason %q, want agent_exit", reason)
			}
			m.events.Flush()
			evs, err := st.Events(ctx, store.EventFilter{Tenant: "t1", SandboxID: sb.ID})
			if err != nil {
				t.Fatal(err)
			}
			var tos []string
			var code any
			for _, e := range evs {
				if e.Type == api.EventSandboxStatus {
					tos = append(tos, e.Data["to"].(string))
					if e.Data["to"] == c.status {
						code = e.Data["exitCode"]
					}
				}
			}
			if want := []string{"provisioning", "ready", "running", c.status}; !slices.Equal(tos, want) {
				t.Errorf("status events %q, want %q", tos, want)
			}
			if fmt.Sprint(code) != fmt.Sprint(c.exit) {
				t.Errorf("exit code in the %s event: %v, want %d", c.status, code, c.exit)
			}
			// The end is recorded just before the manager lets the sandbox go.
			eventually(t, "the manager lets the ended sandbox go", func() bool { return m.Live() == 0 })
			if len(f.Live()) != 0 {
				t.Errorf("after the agent's exit: on the host %v", f.Live())
			}
			if seen, want := w.destroys(), []string{"running intent"}; !slices.Equal(seen, want) {
				t.Errorf("at destroy the store said %q, want %q (the teardown recorded first)", seen, want)
			}
			if !strings.Contains(agentLog(t, m, ctx, sb.ID), "stdout:hello") {
				t.Error("the log of the ended sandbox is gone")
			}
			if got, err := m.Terminate(ctx, sb.ID); err != nil || got.Status != api.StatusTerminated {
				t.Errorf("terminate after the agent's exit: %s %v", got.Status, err)
			}
			m.events.Flush()
			evs, _ = st.Events(ctx, store.EventFilter{Tenant: "t1", SandboxID: sb.ID, TypePrefix: api.EventSandboxStatus})
			if last := evs[len(evs)-1]; last.Data["to"] != api.StatusTerminated || last.Data["from"] != c.status {
				t.Errorf("the last status event: %v, want %s → terminated", last.Data, c.status)
			}
		})
	}
}

// TestAgentKilledByTerminate: a terminate kills a running agent without the agent's exit
// deciding the sandbox's end: it ends terminated (through completed), and the agent's exit is
// an event that says the sandbox ended it.
func TestAgentKilledByTerminate(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{Agent: &api.Agent{Command: []string{"agent"}}, Start: true})
	if err != nil || sb.Status != api.StatusRunning {
		t.Fatalf("create with start: %s %v", sb.Status, err)
	}
	got, err := m.Terminate(ctx, sb.ID)
	if err != nil || got.Status != api.StatusTerminated {
		t.Fatalf("terminate: %s %v", got.Status, err)
	}
	eventually(t, "the agent's exit recorded", func() bool {
		m.events.Flush()
		evs, _ := st.Events(ctx, store.EventFilter{Tenant: "t1", SandboxID: sb.ID, TypePrefix: api.EventAgentExited})
		return len(evs) == 1 && evs[0].Data["endedBy"] == "sandbox"
	})
	if s, reason := statusOf(t, m, ctx, sb.ID); s != api.StatusTerminated || reason != sandbox.ReasonTerminated {
		t.Errorf("after the terminate: %s (%s)", s, reason)
	}
}

// TestAgentRefusals: a create whose agent is invalid names the field; start without an agent
// (and no image) is refused naming agent; a sandbox with an image but neither agent nor
// entrypoint cannot start.
func TestAgentRefusals(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	for _, c := range []struct {
		name  string
		spec  sandbox.Spec
		field string
	}{
		{"empty command", sandbox.Spec{Agent: &api.Agent{Env: map[string]string{"A": "b"}}}, "agent.command"},
		{"relative workdir", sandbox.Spec{Agent: &api.Agent{Command: []string{"a"}, Workdir: "rel"}}, "agent.workdir"},
		{"bad env", sandbox.Spec{Agent: &api.Agent{Command: []string{"a"}, Env: map[string]string{"A=B": "c"}}}, "agent.env"},
		{"start without agent", sandbox.Spec{Start: true}, "start"},
	} {
		_, err := m.Create(ctx, c.spec)
		if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != c.field {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.field)
		}
	}
	sb, err := m.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Start(ctx, sb.ID)
	if fe, ok := errors.AsType[*errdefs.FieldError](err); !ok || fe.Field != "agent" || !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("start without an agent: %v, want a 409 naming agent", err)
	}
	if s, _ := statusOf(t, m, ctx, sb.ID); s != api.StatusReady {
		t.Errorf("after a refused start: %s, want ready", s)
	}
}

// TestAgentOfTheOperator: a create that names an agentId of the operator's agents (granted to
// its tenant) and no agent of its own runs that agent when started (seed 000's create({agentId})
// then start()); for a tenant it is not granted to, the agentId stays a label and start is a 409
// naming agent; an agent given in the create wins.
func TestAgentOfTheOperator(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	g := &tenancy.Grants{Agents: map[string]tenancy.Agent{"scanner": {Agent: api.Agent{Command: api.Shell("agent scanning")}, Tenants: []string{"t1"}}}}
	m := testManagerWith(t, st, f, Config{Grants: g})
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.Create(ctx, sandbox.Spec{AgentID: "scanner"})
	if err != nil || sb.Agent == nil || !slices.Contains(sb.Agent.Command, "agent scanning") {
		t.Fatalf("create: %+v %v", sb.Agent, err)
	}
	if got, err := m.Start(ctx, sb.ID); err != nil || got.Status != api.StatusRunning {
		t.Fatalf("start: %s %v", got.Status, err)
	}
	eventually(t, "the operator's agent's output in the log", func() bool {
		return strings.Contains(agentLog(t, m, ctx, sb.ID), "stdout:scanning\n")
	})

	own, err := m.Create(ctx, sandbox.Spec{AgentID: "scanner", Agent: &api.Agent{Command: []string{"agent", "mine"}}})
	if err != nil || own.Agent == nil || !slices.Equal(own.Agent.Command, []string{"agent", "mine"}) {
		t.Errorf("a create's own agent: %+v %v", own.Agent, err)
	}

	t2 := tenant.With(context.Background(), "t2")
	other, err := m.Create(t2, sandbox.Spec{AgentID: "scanner"})
	if err != nil || other.Agent != nil || other.AgentID != "scanner" {
		t.Fatalf("another tenant's create: %+v %v", other.Agent, err)
	}
	if _, err := m.Start(t2, other.ID); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("start of a sandbox whose agentId is not granted: %v, want a 409", err)
	}
}

// TestAgentStartWaitsForProvisioning: a start sent while the sandbox is provisioning waits for
// it, then starts the agent.
func TestAgentStartWaitsForProvisioning(t *testing.T) {
	st := openStore(t)
	f := drivertest.NewFake()
	hold := holdCreates(f, nil)
	m := testManager(t, st, f)
	ctx := tenant.With(context.Background(), "t1")
	sb, err := m.CreateAsync(ctx, sandbox.Spec{Agent: &api.Agent{Command: []string{"agent"}}})
	if err != nil || sb.Status != api.StatusProvisioning {
		t.Fatalf("create: %s %v", sb.Status, err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := m.Start(ctx, sb.ID)
		started <- err
	}()
	close(hold)
	if err := <-started; err != nil {
		t.Fatalf("start: %v", err)
	}
	if s, _ := statusOf(t, m, ctx, sb.ID); s != api.StatusRunning {
		t.Errorf("after start: %s, want running", s)
	}
}
