package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// t0 has nanoseconds and a non-UTC zone, to check that both survive.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

// seedSandboxes inserts sandboxes a1..a3 of tenant a and b1 of tenant b, one second apart, a1
// oldest.
func seedSandboxes(t *testing.T, s *Store) {
	t.Helper()
	seed := []struct {
		id, tenant, status, agent string
		meta                      map[string]string
	}{
		{"a1", "a", api.StatusRunning, "agent-1", map[string]string{"env": "prod", "team": "x"}},
		{"a2", "a", api.StatusTerminated, "agent-1", map[string]string{"env": "prod"}},
		{"a3", "a", api.StatusPaused, "agent-2", map[string]string{"env": "dev", "a.b\"c": "q'uote"}},
		{"b1", "b", api.StatusReady, "agent-1", map[string]string{"env": "prod", "team": "x"}},
	}
	for i, sd := range seed {
		sb := Sandbox{
			ID: sd.id, Tenant: sd.tenant, Status: sd.status, Reason: "created",
			Spec:      api.Spec{Name: sd.id, AgentID: sd.agent, Metadata: sd.meta, Isolation: api.LevelProcess},
			CreatedAt: t0.Add(time.Duration(i) * time.Second),
		}
		if err := s.InsertSandbox(context.Background(), sb); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(sbs []Sandbox) string {
	var out []string
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	return strings.Join(out, " ")
}

func TestSandboxRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	yes := true
	want := Sandbox{
		ID: "sb_1", Tenant: "acme", Status: api.StatusProvisioning, Reason: "create",
		Spec: api.Spec{
			Name: "n", Isolation: api.LevelProcess, AgentID: "ag",
			Environment: map[string]string{"A": "1"},
			Resources:   api.Resources{CPU: 1.5, MemoryMB: 512},
			Network:     api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"x.com"}, BlockLocalNetwork: &yes},
			Metadata:    map[string]string{"k": "v"},
		},
		CreatedAt: t0,
		Host:      json.RawMessage(`{"pid":42,"cgroup":"/sys/fs/cgroup/airlock/sb_1"}`),
	}
	if err := s.InsertSandbox(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sandbox(ctx, "acme", "sb_1")
	if err != nil {
		t.Fatal(err)
	}
	want.CreatedAt, want.UpdatedAt = t0.UTC(), t0.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sandbox =\n%+v\nwant\n%+v", got, want)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt in %v; want UTC", got.CreatedAt.Location())
	}

	if err := s.InsertSandbox(ctx, want); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate InsertSandbox = %v; want ErrConflict", err)
	}
	for _, bad := range []Sandbox{{Status: "ready"}, {ID: "x"}, {ID: "x", Status: "ready", Host: json.RawMessage("{")}} {
		if err := s.InsertSandbox(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("InsertSandbox(%+v) = %v; want ErrInvalidArgument", bad, err)
		}
	}

	host := json.RawMessage(`{"pid":43}`)
	if err := s.SetHost(ctx, "sb_1", host); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Sandbox(ctx, "", "sb_1"); string(got.Host) != string(host) {
		t.Errorf("Host after SetHost = %s; want %s", got.Host, host)
	}
	if err := s.SetHost(ctx, "nope", host); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("SetHost(unknown) = %v; want ErrNotFound", err)
	}
}

func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	seedSandboxes(t, s)
	tests := []struct {
		tenant, id string
		found      bool
	}{
		{"a", "a1", true},
		{"", "a1", true}, // any tenant
		{"", "b1", true},
		{"b", "b1", true},
		{"b", "a1", false}, // A's sandbox is invisible to B
		{"a", "b1", false},
		{"c", "a1", false},
		{"a", "zz", false},
	}
	for _, tt := range tests {
		_, err := s.Sandbox(ctx, tt.tenant, tt.id)
		if tt.found && err != nil || !tt.found && !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Sandbox(%q, %q) = %v; want found=%v", tt.tenant, tt.id, err, tt.found)
		}
	}
}

func TestSandboxes(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	seedSandboxes(t, s)
	tests := []struct {
		name string
		f    Filter
		want string
	}{
		{"all", Filter{}, "b1 a3 a2 a1"},
		{"tenant", Filter{Tenant: "a"}, "a3 a2 a1"},
		{"other tenant", Filter{Tenant: "b"}, "b1"},
		{"unknown tenant", Filter{Tenant: "c"}, ""},
		{"status", Filter{Status: []string{api.StatusRunning}}, "a1"},
		{"statuses", Filter{Status: []string{api.StatusRunning, api.StatusPaused, api.StatusReady}}, "b1 a3 a1"},
		{"status and tenant", Filter{Tenant: "a", Status: []string{api.StatusReady, api.StatusTerminated}}, "a2"},
		{"agent", Filter{AgentID: "agent-1"}, "b1 a2 a1"},
		{"agent and tenant", Filter{Tenant: "a", AgentID: "agent-2"}, "a3"},
		{"metadata", Filter{Metadata: map[string]string{"env": "prod"}}, "b1 a2 a1"},
		{"metadata pairs", Filter{Metadata: map[string]string{"env": "prod", "team": "x"}}, "b1 a1"},
		{"metadata value differs", Filter{Metadata: map[string]string{"env": "staging"}}, ""},
		{"metadata odd key", Filter{Metadata: map[string]string{"a.b\"c": "q'uote"}}, "a3"},
		{"metadata key absent", Filter{Metadata: map[string]string{"nope": ""}}, ""},
		{"limit", Filter{Limit: 2}, "b1 a3"},
		{"limit after filter", Filter{Metadata: map[string]string{"env": "prod"}, Limit: 2}, "b1 a2"},
		{"everything", Filter{Tenant: "a", Status: []string{api.StatusRunning}, AgentID: "agent-1",
			Metadata: map[string]string{"team": "x"}, Limit: 5}, "a1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Sandboxes(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if ids(got) != tt.want {
				t.Errorf("Sandboxes(%+v) = %q; want %q", tt.f, ids(got), tt.want)
			}
		})
	}
}

func TestTransition(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	if err := s.InsertSandbox(ctx, Sandbox{ID: "sb", Tenant: "a", Status: api.StatusProvisioning, Reason: "create", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		from, to string
		err      error
	}{
		{api.StatusProvisioning, api.StatusReady, nil},
		{api.StatusProvisioning, api.StatusFailed, errdefs.ErrConflict}, // stale: someone moved it
		{api.StatusReady, api.StatusRunning, nil},
		{api.StatusRunning, api.StatusPaused, nil},
		{api.StatusRunning, api.StatusTerminated, errdefs.ErrConflict},
		{api.StatusPaused, api.StatusTerminated, nil},
	}
	want := []api.Transition{{From: "", To: api.StatusProvisioning, Reason: "create", At: t0.UTC()}}
	for i, st := range steps {
		tr := api.Transition{To: st.to, Reason: "step", At: t0.Add(time.Duration(i+1) * time.Minute)}
		err := s.Transition(ctx, "sb", st.from, tr)
		if !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
			t.Fatalf("Transition(%s→%s) = %v; want %v", st.from, st.to, err, st.err)
		}
		if err == nil {
			want = append(want, api.Transition{From: st.from, To: st.to, Reason: "step", At: tr.At.UTC()})
		}
	}
	got, err := s.Transitions(ctx, "sb")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Transitions =\n%v\nwant\n%v", got, want)
	}
	sb, err := s.Sandbox(ctx, "a", "sb")
	if err != nil || sb.Status != api.StatusTerminated || sb.Reason != "step" || !sb.UpdatedAt.Equal(want[len(want)-1].At) {
		t.Errorf("after transitions: %+v, %v", sb, err)
	}
	if err := s.Transition(ctx, "nope", api.StatusReady, api.Transition{To: api.StatusRunning}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Transition(unknown) = %v; want ErrNotFound", err)
	}
}

// TestRetired: a restore records its new instance as one to tear down before it makes it (Retire),
// then the new instance and the retired one in one write; the retired one is listed until
// Reclaimed, the new one no longer; a restore of a sandbox that does not exist records neither.
func TestRetired(t *testing.T) {
	s, _ := openTest(t, Options{})
	ctx := context.Background()
	seedSandboxes(t, s)
	spec := api.Spec{Isolation: api.LevelProcess}
	steps := []struct {
		id, instance, retired string
		wantErr               error
		want                  []string // level ids listed by Retired afterwards
	}{
		{"a1", "a1-r1", "a1", nil, []string{"a1"}},
		{"a1", "a1-r2", "a1-r1", nil, []string{"a1", "a1-r1"}},
		{"nope", "nope-r1", "nope", errdefs.ErrNotFound, []string{"a1", "a1-r1"}},
	}
	for _, st := range steps {
		// The restore records its new instance first; Restored makes it the sandbox's.
		if err := s.Retire(ctx, st.instance, st.id, spec.Isolation); err != nil {
			t.Fatal(err)
		}
		if st.wantErr != nil {
			// What a failed restore does.
			if err := s.Reclaimed(ctx, st.instance); err != nil {
				t.Fatal(err)
			}
		}
		err := s.Restored(ctx, st.id, st.instance, spec, nil, st.retired)
		if !errors.Is(err, st.wantErr) && (err != nil || st.wantErr != nil) {
			t.Fatalf("Restored(%s, %s): %v, want %v", st.id, st.instance, err, st.wantErr)
		}
		got, err := s.Retired(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			if r.SandboxID != strings.SplitN(r.LevelID, "-", 2)[0] || r.Isolation != api.LevelProcess {
				t.Errorf("retired %+v", r)
			}
			ids = append(ids, r.LevelID)
		}
		if !reflect.DeepEqual(ids, st.want) {
			t.Fatalf("after Restored(%s, %s): retired %v, want %v", st.id, st.instance, ids, st.want)
		}
	}
	if sb, err := s.Sandbox(ctx, "a", "a1"); err != nil || sb.LevelID() != "a1-r2" {
		t.Fatalf("a1 runs as %q (%v), want a1-r2", sb.LevelID(), err)
	}
	for _, id := range []string{"a1", "a1-r1", "a1-r1"} { // reclaiming twice is no error
		if err := s.Reclaimed(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Retired(ctx); err != nil || len(got) != 0 {
		t.Fatalf("retired after reclaiming: %+v, %v", got, err)
	}
}
