package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestDaemonBadInput sends every class of bad input of docs/security.md#what-never-happens and checks the answer: the right
// status, the error envelope, and the field named where one is to blame.
func TestDaemonBadInput(t *testing.T) {
	d, c := newDaemon(t)
	ctx := bg()
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer terminate(ctx, t, c, sb.ID)
	key := newKey(t, d.dataDir, "t1")
	huge := `{"name":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"malformed JSON", "POST", "/api/v1/sandboxes", `{"resources": {`, 400, api.CodeInvalidArgument, "body"},
		{"not JSON", "POST", "/api/v1/sandboxes", `hello`, 400, api.CodeInvalidArgument, "body"},
		{"empty body", "POST", "/api/v1/sandboxes", ``, 400, api.CodeInvalidArgument, "body"},
		{"trailing data", "POST", "/api/v1/sandboxes", `{} {}`, 400, api.CodeInvalidArgument, "body"},
		{"unknown field", "POST", "/api/v1/sandboxes", `{"resources": {"memoryMB": 5}}`, 400, api.CodeInvalidArgument, "resources.memoryMB"},
		{"wrong type", "POST", "/api/v1/sandboxes", `{"resources": {"cpu": "two"}}`, 400, api.CodeInvalidArgument, "resources.cpu"},
		{"memory above max", "POST", "/api/v1/sandboxes", `{"resources": {"memoryMb": 40000}}`, 400, api.CodeInvalidArgument, "resources.memoryMb"},
		{"cpu above max", "POST", "/api/v1/sandboxes", `{"resources": {"cpu": 9}}`, 400, api.CodeInvalidArgument, "resources.cpu"},
		{"pids above max", "POST", "/api/v1/sandboxes", `{"resources": {"maxProcesses": 513}}`, 400, api.CodeInvalidArgument, "resources.maxProcesses"},
		{"negative disk", "POST", "/api/v1/sandboxes", `{"resources": {"diskMb": -1}}`, 400, api.CodeInvalidArgument, "resources.diskMb"},
		{"bad isolation", "POST", "/api/v1/sandboxes", `{"isolation": "vm"}`, 400, api.CodeInvalidArgument, "isolation"},
		{"level not on this host", "POST", "/api/v1/sandboxes", `{"isolation": "enclave"}`, 422, api.CodeIsolationUnavailable, "isolation"},
		{"relative mount", "POST", "/api/v1/sandboxes", `{"filesystem": {"readOnly": ["etc"]}}`, 400, api.CodeInvalidArgument, "filesystem.readOnly[0]"},
		{"huge body", "POST", "/api/v1/sandboxes", huge, 413, api.CodePayloadTooLarge, ""},
		{"unknown sandbox", "GET", "/api/v1/sandboxes/sbx_nope", ``, 404, api.CodeNotFound, ""},
		{"exec in unknown sandbox", "POST", "/api/v1/sandboxes/sbx_nope/exec", `{"command": "true"}`, 404, api.CodeNotFound, ""},
		{"exec without command", "POST", "/api/v1/sandboxes/" + sb.ID + "/exec", `{}`, 400, api.CodeInvalidArgument, "command"},
		{"exec command wrong type", "POST", "/api/v1/sandboxes/" + sb.ID + "/exec", `{"command": 5}`, 400, api.CodeInvalidArgument, "command"},
		{"exec timeout negative", "POST", "/api/v1/sandboxes/" + sb.ID + "/exec", `{"command": "true", "timeout": -1}`, 400, api.CodeInvalidArgument, "timeout"},
		{"exec relative workdir", "POST", "/api/v1/sandboxes/" + sb.ID + "/exec", `{"command": "true", "workdir": "tmp"}`, 400, api.CodeInvalidArgument, "workdir"},
		{"unknown execution", "GET", "/api/v1/sandboxes/" + sb.ID + "/execs/exec_nope", ``, 404, api.CodeNotFound, ""},
		{"file path missing", "GET", "/api/v1/sandboxes/" + sb.ID + "/files", ``, 400, api.CodeInvalidArgument, "path"},
		{"file not there", "GET", "/api/v1/sandboxes/" + sb.ID + "/files?path=/nope", ``, 404, api.CodeNotFound, ""},
		{"download a directory", "GET", "/api/v1/sandboxes/" + sb.ID + "/files?path=/workspace", ``, 400, api.CodeInvalidArgument, ""},
		{"bad mode", "PUT", "/api/v1/sandboxes/" + sb.ID + "/files?path=/workspace/x&mode=999", `x`, 400, api.CodeInvalidArgument, "mode"},
		{"bad bool", "GET", "/api/v1/sandboxes/" + sb.ID + "/logs?follow=maybe", ``, 400, api.CodeInvalidArgument, "follow"},
		{"remove root", "DELETE", "/api/v1/sandboxes/" + sb.ID + "/files?path=/&recursive=true", ``, 400, api.CodeInvalidArgument, "path"},
		{"upload without parent", "PUT", "/api/v1/sandboxes/" + sb.ID + "/files?path=/workspace/no/such/dir/f", `x`, 404, api.CodeNotFound, ""},
		{"unknown top-level field", "POST", "/api/v1/sandboxes", `{"nmae": "x"}`, 400, api.CodeInvalidArgument, "nmae"},
		{"unknown nested field", "POST", "/api/v1/sandboxes", `{"network": {"egress": "none"}}`, 400, api.CodeInvalidArgument, "network.egress"},
		{"unknown route", "GET", "/api/v1/nothing", ``, 404, api.CodeNotFound, ""},
		{"compat bad memory", "POST", "/api/sandbox/create", `{"config": {"resources": {"memory": "lots"}}}`, 400, api.CodeInvalidArgument, "config.resources.memory"},
		{"compat run without code", "POST", "/api/sandbox/" + sb.ID + "/run", `{}`, 400, api.CodeInvalidArgument, "code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, e := rawJSON(t, d.url, key, tc.method, tc.path, tc.body, nil)
			if status != tc.status || e == nil || e.Code != tc.code || e.Field != tc.field || e.Message == "" {
				t.Errorf("%d %+v, want %d %s field %q", status, e, tc.status, tc.code, tc.field)
			}
		})
	}
	// The sandbox is unharmed by all of it.
	if r, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("echo fine")}); err != nil || r.Stdout != "fine\n" {
		t.Fatalf("after bad input: %+v %v", r, err)
	}
}

// TestDaemonCrashRecovery kills the daemon with SIGKILL while a command runs and starts it again
// on the same data within the orphan grace: every sandbox is adopted with its status, files and
// background processes (a paused one stays paused; a root one survives too), the acknowledged
// exec record is intact, the cut-off one is marked lost, and everything works as before.
func TestDaemonCrashRecovery(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	ctx := bg()
	var ids []string
	for i := range 4 {
		spec := smallSpec()
		if i == 3 {
			spec.User = api.UserRoot
		}
		sb, err := c.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	done, err := c.Exec(ctx, ids[0], api.ExecRequest{Command: api.Shell("echo kept > /workspace/f; sh -c 'sleep 600 >/dev/null 2>&1 &'; echo acknowledged")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	startLong(t, c, ids[1])
	before := rangesOf(dir)
	if len(before) != len(ids) {
		t.Fatalf("%d uid ranges recorded for %d sandboxes: %v", len(before), len(ids), before)
	}
	d.kill9()

	d2 := startDaemon(t, dir)
	c2 := d2.client(key)
	// Every adopted sandbox keeps its range, now held by the new daemon.
	after := rangesOf(dir)
	for id, r := range before {
		if a, ok := after[id]; !ok || a.Range != r.Range || a.Pid != d2.cmd.Process.Pid {
			t.Errorf("sandbox %s: uid range %v held by pid %d after the restart, was %v (new daemon %d)", id, a.Range, a.Pid, r.Range, d2.cmd.Process.Pid)
		}
	}
	for i, want := range []string{api.StatusRunning, api.StatusRunning, api.StatusPaused, api.StatusReady} {
		sb, err := c2.Get(ctx, ids[i])
		if err != nil || sb.Status != want {
			t.Errorf("sandbox %d after restart: %s (%q), want %s: %v", i, sb.Status, sb.Reason, want, err)
		}
	}
	e, err := c2.Execution(ctx, ids[0], done.ExecutionID)
	if err != nil || e.Status != api.ExecDone || e.Result == nil || e.Result.Stdout != "acknowledged\n" {
		t.Errorf("acknowledged exec after restart: %+v %v", e, err)
	}
	execs, err := c2.Execs(ctx, ids[1])
	if err != nil || len(execs) != 1 || execs[0].Status != api.ExecLost {
		t.Errorf("cut-off exec after restart: %+v %v", execs, err)
	}
	r, err := c2.Exec(ctx, ids[0], api.ExecRequest{Command: api.Shell("cat /workspace/f; pgrep -x sleep >/dev/null && echo sleeping")})
	if err != nil || r.Stdout != "kept\nsleeping\n" {
		t.Errorf("adopted sandbox: %+v %v", r, err)
	}
	if _, err := c2.Resume(ctx, ids[2]); err != nil {
		t.Errorf("resume an adopted paused sandbox: %v", err)
	}
	for _, id := range ids[2:] {
		if r, err := c2.Exec(ctx, id, api.ExecRequest{Command: api.Shell("echo alive")}); err != nil || r.Stdout != "alive\n" {
			t.Errorf("adopted sandbox %s: %+v %v", id, r, err)
		}
	}
	if err := d2.stop(); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestDaemonCrashNoReturn kills the daemon and does not restart it within the orphan grace: the
// sandboxes end by themselves, and the next start marks them failed (daemon_restart) and removes
// what is left.
func TestDaemonCrashNoReturn(t *testing.T) {
	check := leakCheck(t)
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "process": {"orphanGraceSeconds": 1}}`)
	ctx := bg()
	ids := createN(t, c, 2)
	done, err := c.Exec(ctx, ids[0], api.ExecRequest{Command: api.Shell("echo acknowledged")})
	if err != nil {
		t.Fatal(err)
	}
	startLong(t, c, ids[1])
	procs := sandboxProcs()
	d.kill9()
	// Within the grace and a little more, every sandbox process is gone without any daemon.
	deadline := time.Now().Add(10 * time.Second)
	for len(sandboxProcs()) > 0 && len(procs) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes outlived the orphan grace: %v", sandboxProcs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	d2 := startDaemon(t, d.dataDir, d.flags...)
	c2 := d2.client(key)
	for _, id := range ids {
		sb, err := c2.Get(ctx, id)
		if err != nil || sb.Status != api.StatusFailed || sb.Reason != "daemon_restart" {
			t.Errorf("sandbox %s after restart: %s %q %v", id, sb.Status, sb.Reason, err)
		}
	}
	if e, err := c2.Execution(ctx, ids[0], done.ExecutionID); err != nil || e.Status != api.ExecDone || e.Result.Stdout != "acknowledged\n" {
		t.Errorf("acknowledged exec after restart: %+v %v", e, err)
	}
	if execs, err := c2.Execs(ctx, ids[1]); err != nil || len(execs) != 1 || execs[0].Status != api.ExecLost {
		t.Errorf("cut-off exec after restart: %+v %v", execs, err)
	}
	if _, err := c2.Exec(ctx, ids[0], api.ExecRequest{Command: api.Shell("true")}); clientErr(t, err).Status != api.StatusFailed {
		t.Errorf("exec in a failed sandbox: %v", err)
	}
	if sb, err := c2.Terminate(ctx, ids[0]); err != nil || sb.Status != api.StatusTerminated {
		t.Errorf("terminate a failed sandbox: %+v %v", sb, err)
	}
	if err := d2.stop(); err != nil {
		t.Fatal(err)
	}
	check()
}

// startLong starts `sleep 600` in sandbox id and returns once its exec is recorded.
func startLong(t *testing.T, c *client.Client, id string) {
	t.Helper()
	go func() { _, _ = c.Exec(bg(), id, api.ExecRequest{Command: api.Shell("sleep 600")}) }() // cut by the test; the loop below sees it start
	deadline := time.Now().Add(10 * time.Second)
	for {
		if execs, _ := c.Execs(bg(), id); len(execs) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the long exec never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDaemonGracefulStop stops the daemon with SIGTERM: every sandbox ends terminated with reason
// daemon_shutdown, the daemon exits 0, nothing leaks.
func TestDaemonGracefulStop(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	ctx := bg()
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("sleep 300 >/dev/null 2>&1 &")}); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	check()
	d2 := startDaemon(t, dir)
	got, err := d2.client(key).Get(ctx, sb.ID)
	if err != nil || got.Status != api.StatusTerminated || got.Reason != "daemon_shutdown" {
		t.Errorf("after a graceful stop: %s %q %v", got.Status, got.Reason, err)
	}
}

// TestDaemonTimeouts checks that the daemon enforces idleTimeoutSeconds and maxDurationSeconds.
func TestDaemonTimeouts(t *testing.T) {
	check := leakCheck(t)
	_, c := newDaemon(t)
	ctx := bg()
	idle := smallSpec()
	idle.Timeout = api.Timeout{IdleTimeoutSeconds: 1}
	busy := smallSpec()
	busy.Timeout = api.Timeout{MaxDurationSeconds: 2}
	a, err := c.Create(ctx, idle)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Create(ctx, busy)
	if err != nil {
		t.Fatal(err)
	}
	// The busy one runs a command past its lifetime: the command dies with the sandbox.
	res, err := c.Exec(ctx, b.ID, api.ExecRequest{Command: api.Shell("sleep 30")})
	if err != nil || res.ExitCode == 0 {
		t.Errorf("command past maxDuration: %+v %v", res, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ga, _ := c.Get(ctx, a.ID)
		gb, _ := c.Get(ctx, b.ID)
		if ga.Status == api.StatusTerminated && gb.Status == api.StatusTerminated {
			if ga.Reason != "idle" || gb.Reason != "timeout" {
				t.Errorf("reasons: idle sandbox %q, long one %q", ga.Reason, gb.Reason)
			}
			if life := gb.UpdatedAt.Sub(gb.CreatedAt); life > 4*time.Second {
				t.Errorf("a 2 s sandbox lived %v", life)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ended: %s (%s), %s (%s)", ga.Status, ga.Reason, gb.Status, gb.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check()
}

// TestDaemonLoad creates 100 sandboxes concurrently and runs a command in each: no failure, and
// nothing left behind after they are terminated.
func TestDaemonLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	check := leakCheck(t)
	_, c := newDaemon(t)
	ctx, cancel := context.WithTimeout(bg(), 5*time.Minute)
	defer cancel()
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	var mu sync.Mutex
	var ids []string
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.Create(ctx, api.Spec{Resources: api.Resources{MemoryMB: 128, DiskMB: 16}})
			if err != nil {
				errs <- fmt.Errorf("create %d: %w", i, err)
				return
			}
			mu.Lock()
			ids = append(ids, sb.ID)
			mu.Unlock()
			r, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Command{"sh", "-c", fmt.Sprintf("echo %d", i)}})
			if err != nil || r.Stdout != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("exec %d: %+v %v", i, r, err) //nolint:errorlint // err may be nil (a wrong stdout)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if list, _ := c.List(ctx, client.ListOptions{Status: []string{api.StatusRunning}}); len(list) != n {
		t.Errorf("%d running sandboxes listed, want %d", len(list), n)
	}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Terminate(ctx, id); err != nil {
				t.Errorf("terminate %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	check()
}

// TestServeRefusesCleartextOnNetwork checks that a non-loopback address needs TLS or --insecure.
func TestServeRefusesCleartextOnNetwork(t *testing.T) {
	r := runAirlock(t, nil, "serve", "--listen", "0.0.0.0:7999", "--data-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "--insecure") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
