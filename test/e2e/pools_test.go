package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestPool drives a warm pool of the process level through the CLI and the SDK: made with
// `airlock pool put`, filled, claimed by a create of its shape (with its own environment, in
// force in the claimed sandbox, and a sandbox.claimed event), refilled; a create of another
// shape is cold and not counted; a pool with a claim-time field is refused naming it; removing
// the pool ends its unclaimed sandboxes and nothing is left on the host, also once the daemon
// has stopped.
func TestPool(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key, adminKey := newKey(t, dir, "t1"), newAdminKey(t, dir)
	d := startDaemon(t, dir)
	c, admin := d.client(key), d.client(adminKey)
	ctx := bg()
	cli := func(args ...string) result { t.Helper(); return d.cli(t, key, nil, args...) }
	adminCLI := func(args ...string) result { t.Helper(); return d.cli(t, adminKey, nil, args...) }
	shape := []string{"--memory", "256M", "--disk", "64M", "--pids", "32"}

	// Pools are daemon-wide: a tenant key lists them but may not make one.
	if r := cli(append([]string{"pool", "put", "warm", "--size", "2"}, shape...)...); r.code != 1 || !strings.Contains(r.stderr, "admin key") {
		t.Fatalf("pool put with a tenant key: %+v", r)
	}
	if r := adminCLI(append([]string{"pool", "put", "warm", "--size", "2"}, shape...)...); r.code != 0 || r.stdout != "warm\n" {
		t.Fatalf("pool put: %+v", r)
	}
	p := waitPoolState(t, c, "warm", 30*time.Second, func(p api.PoolStatus) bool { return p.Ready == 2 })
	if p.Source != "api" || p.Spec.Isolation != api.LevelProcess || p.Spec.Resources.MemoryMB != 256 || p.Claims != 0 || p.Failures != 0 {
		t.Fatalf("pool after filling: %+v", p)
	}

	// A create of the pool's shape, through the same flags, claims a warm sandbox.
	t0 := time.Now()
	r := cli(append([]string{"create", "--env", "FOO=bar", "--name", "claimed"}, shape...)...)
	took := time.Since(t0)
	claimed := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(claimed, "sbx_") {
		t.Fatalf("create of the pool's shape: %+v", r)
	}
	t.Logf("create from the pool took %v (the CLI's start included)", took)
	if took > 2*time.Second {
		t.Errorf("create from the pool took %v", took)
	}
	if res, err := c.Exec(ctx, claimed, api.ExecRequest{Command: api.Shell("echo $FOO")}); err != nil || res.Stdout != "bar\n" {
		t.Errorf("exec in the claimed sandbox: %+v, %v", res, err)
	}
	page, err := c.Events(ctx, claimed, client.EventOptions{Type: api.EventSandboxClaimed})
	if err != nil || len(page.Events) != 1 || page.Events[0].Data["pool"] != "warm" {
		t.Errorf("sandbox.claimed events: %+v, %v", page, err)
	}
	if sb, err := c.Get(ctx, claimed); err != nil || sb.Name != "claimed" || sb.Status != api.StatusRunning {
		t.Errorf("the claimed sandbox: %+v, %v", sb, err)
	}
	if p, err := c.Pool(ctx, "warm"); err != nil || p.Claims != 1 || p.Misses != 0 {
		t.Errorf("pool after the claim: %+v, %v", p, err)
	}
	waitPoolState(t, c, "warm", 30*time.Second, func(p api.PoolStatus) bool { return p.Ready == 2 })

	// Another shape is created cold and counted nowhere.
	t0 = time.Now()
	r = cli("create", "--memory", "512M", "--disk", "64M", "--pids", "32")
	cold := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(cold, "sbx_") {
		t.Fatalf("create of another shape: %+v", r)
	}
	t.Logf("cold create took %v", time.Since(t0))
	if page, err := c.Events(ctx, cold, client.EventOptions{Type: api.EventSandboxClaimed}); err != nil || len(page.Events) != 0 {
		t.Errorf("cold sandbox's sandbox.claimed events: %+v, %v", page, err)
	}
	if p, err := c.Pool(ctx, "warm"); err != nil || p.Claims != 1 || p.Misses != 0 {
		t.Errorf("pool after a cold create: %+v, %v", p, err)
	}

	r = cli("pool", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "HIT%") || !strings.Contains(r.stdout, "warm") || !strings.Contains(r.stdout, "100") {
		t.Errorf("pool ls: %+v", r)
	}
	r = cli("pool", "inspect", "warm")
	var inspected api.PoolStatus
	if err := json.Unmarshal([]byte(r.stdout), &inspected); r.code != 0 || err != nil || inspected.Name != "warm" || inspected.Size != 2 {
		t.Errorf("pool inspect: %+v (%v)", r, err)
	}

	// A field the claiming create brings is refused, naming it.
	_, err = admin.PutPool(ctx, api.Pool{Name: "env", Spec: api.Spec{Environment: map[string]string{"A": "1"}}, Size: 1})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusBadRequest || ce.Field != "spec.environment" {
		t.Errorf("pool with an environment: %+v", ce)
	}
	if r = adminCLI("pool", "put", "env", "--size", "1", "--env", "A=1"); r.code != 2 || !strings.Contains(r.stderr, "--env belongs to the create") {
		t.Errorf("pool put --env: %+v", r)
	}
	if _, err := c.Pool(ctx, "env"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("refused pool: %v", err)
	}

	// Removing the pool ends its unclaimed sandboxes; the claimed one is the tenant's.
	if r = cli("pool", "rm", "warm"); r.code != 1 || !strings.Contains(r.stderr, "admin key") {
		t.Fatalf("pool rm with a tenant key: %+v", r)
	}
	if r = adminCLI("pool", "rm", "warm"); r.code != 0 || r.stdout != "warm\n" {
		t.Errorf("pool rm: %+v", r)
	}
	if _, err := c.Pool(ctx, "warm"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("removed pool: %v", err)
	}
	if r = adminCLI("pool", "rm", "warm"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("pool rm twice: %+v", r)
	}
	if res, err := c.Exec(ctx, claimed, api.ExecRequest{Command: api.Shell("echo still")}); err != nil || res.Stdout != "still\n" {
		t.Errorf("exec in the claimed sandbox after its pool's removal: %+v, %v", res, err)
	}
	if list, err := c.List(ctx, client.ListOptions{}); err != nil || len(list) != 2 {
		t.Errorf("the tenant's sandboxes: %d, %v (want the claimed and the cold one)", len(list), err)
	}
	for _, id := range []string{claimed, cold} {
		if _, err := c.Terminate(ctx, id); err != nil {
			t.Error(err)
		}
	}
	check() // the pool's sandboxes ended with it, while the daemon runs
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}
