package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestDaemonLifecycle walks one sandbox through docs/daemon.md#lifecycle through the Go SDK: create, execs that
// share state, pause (exec refused, 409 naming the state), resume, metrics, logs, terminate, and
// the recorded transitions; nothing is left on the host.
func TestDaemonLifecycle(t *testing.T) {
	check := leakCheck(t)
	_, c := newDaemon(t)
	ctx := bg()

	sb, err := c.Create(ctx, api.Spec{Name: "life", AgentID: "agent-7", Metadata: map[string]string{"run": "42"},
		Resources: api.Resources{MemoryMB: 256, DiskMB: 64}, Environment: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != api.StatusReady || !strings.HasPrefix(sb.ID, "sbx_") || sb.Resources.MemoryMB != 256 || sb.Endpoints.Exec == "" {
		t.Fatalf("created %+v", sb)
	}
	exec := func(cmd string) api.ExecResult {
		t.Helper()
		r, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell(cmd), Timeout: 30})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return r
	}
	r := exec(`echo "$GREETING"; pwd; id -un; echo data > f.txt; sh -c 'sleep 300 >/dev/null 2>&1 &'`)
	if r.ExitCode != 0 || r.Stdout != "hello\n/workspace\nagent\n" || !strings.HasPrefix(r.ExecutionID, "exec_") {
		t.Fatalf("first exec: %+v", r)
	}
	// Files, background processes and the default workdir persist between execs.
	r = exec(`cat f.txt; pgrep -x sleep >/dev/null && echo sleeping`)
	if r.Stdout != "data\nsleeping\n" {
		t.Fatalf("second exec: %+v", r)
	}
	if got, _ := c.Get(ctx, sb.ID); got.Status != api.StatusRunning {
		t.Fatalf("after exec: status %s", got.Status)
	}
	// stdin, env, workdir and exit status.
	r, err = c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Command{"sh", "-c", `cat; echo "$X" "$(pwd)"; exit 3`},
		Stdin: "in\n", Env: map[string]string{"X": "x"}, Workdir: "/tmp"})
	if err != nil || r.ExitCode != 3 || r.Stdout != "in\nx /tmp\n" {
		t.Fatalf("stdin/env/workdir exec: %+v %v", r, err)
	}
	// An exec timeout is a result, not an error.
	r, err = c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("sleep 1000"), Timeout: 0.5})
	if err != nil || !r.TimedOut || r.ExitCode != 124 {
		t.Fatalf("timeout exec: %+v %v", r, err)
	}

	if _, err := c.Pause(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	m1, err := c.Metrics(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("true")})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || ce.Status != api.StatusPaused {
		t.Fatalf("exec while paused: %+v", ce)
	}
	if _, err := c.Pause(ctx, sb.ID); clientErr(t, err).StatusCode != http.StatusConflict {
		t.Fatalf("pause twice: %v", err)
	}
	if _, err := c.Resume(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if m1.Current.Pids < 2 || m1.Current.MemoryBytes <= 0 || m1.Current.DiskLimitBytes != 64<<20 || m1.Current.MemoryLimit != 256<<20 {
		t.Errorf("metrics: %+v", m1.Current)
	}

	execs, err := c.Execs(ctx, sb.ID)
	if err != nil || len(execs) != 4 { // the one refused while paused was never run
		t.Fatalf("execs: %d %v", len(execs), err)
	}
	var out strings.Builder
	if err := c.Logs(ctx, sb.ID, client.LogOptions{}, func(e api.LogEntry) error {
		if e.Stream == api.StreamStdout {
			out.WriteString(e.Data)
		}
		return nil
	}); err != nil {
		t.Errorf("logs: %v", err)
	}
	if !strings.Contains(out.String(), "hello\n") {
		t.Errorf("logs lack the output: %q", out.String())
	}

	list, err := c.List(ctx, client.ListOptions{AgentID: "agent-7", Metadata: map[string]string{"run": "42"}})
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("list: %v %v", list, err)
	}
	if list, _ := c.List(ctx, client.ListOptions{Metadata: map[string]string{"run": "43"}}); len(list) != 0 {
		t.Fatalf("metadata filter: %v", list)
	}

	end, err := c.Terminate(ctx, sb.ID)
	if err != nil || end.Status != api.StatusTerminated {
		t.Fatalf("terminate: %+v %v", end, err)
	}
	var path []string
	for _, tr := range end.Transitions {
		path = append(path, tr.To)
	}
	want := "provisioning ready running paused running completed terminated"
	if strings.Join(path, " ") != want {
		t.Errorf("transitions %v, want %s", path, want)
	}
	_, err = c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("true")})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || ce.Status != api.StatusTerminated {
		t.Fatalf("exec after terminate: %+v", ce)
	}
	if _, err := c.Terminate(ctx, sb.ID); clientErr(t, err).StatusCode != http.StatusConflict {
		t.Fatalf("terminate twice: %v", err)
	}
	check()
}

// TestDaemonFiles uses the files API, and tries to leave the sandbox through it: "..", absolute
// and relative symlinks planted by the sandbox's own code, and magic links.
func TestDaemonFiles(t *testing.T) {
	check := leakCheck(t)
	_, c := newDaemon(t)
	ctx := bg()
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Terminate(ctx, sb.ID) }() // after a failure; at the end it is terminated already (409)

	if _, err := c.Mkdir(ctx, sb.ID, "/workspace/dir/sub", true); err != nil {
		t.Fatal(err)
	}
	info, err := c.WriteFile(ctx, sb.ID, "dir/a.txt", strings.NewReader("hello files"), 0o600)
	if err != nil || info.Size != 11 || info.Mode != "0600" || info.Path != "/workspace/dir/a.txt" {
		t.Fatalf("upload: %+v %v", info, err)
	}
	// The sandbox's user owns what was uploaded and can change it.
	r, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("stat -c '%U %a' dir/a.txt && echo more >> dir/a.txt && cat dir/a.txt")})
	if err != nil || r.Stdout != "agent 600\nhello filesmore\n" {
		t.Fatalf("uploaded file inside: %+v %v", r, err)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/workspace/dir/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello filesmore\n" {
		t.Fatalf("download: %q", b)
	}
	list, err := c.ListFiles(ctx, sb.ID, "/workspace/dir")
	if err != nil || len(list) != 2 || list[0].Name != "a.txt" || list[1].Type != api.FileDir {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := c.RemoveFile(ctx, sb.ID, "/workspace/dir", false); clientErr(t, err).StatusCode != http.StatusConflict {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	if err := c.RemoveFile(ctx, sb.ID, "/workspace/dir", true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatFile(ctx, sb.ID, "/workspace/dir"); clientErr(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("stat removed: %v", err)
	}

	// Escape attempts. The sandbox plants links to the host's places; the daemon (host root)
	// must resolve every path inside the sandbox.
	hostSecret := "/root/airlock-e2e-secret"
	if err := os.WriteFile(hostSecret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostSecret)
	r, _ = c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell(`ln -s / /workspace/root; ln -s ../../../../../../root /workspace/up; ln -s /proc/1/root /workspace/p1; ln -s /proc/self/root /workspace/self; ln -s /etc /workspace/etc`)})
	if r.ExitCode != 0 {
		t.Fatalf("planting links: %+v", r)
	}
	for _, p := range []string{
		"/../../../root/airlock-e2e-secret", "../../../../root/airlock-e2e-secret", "/workspace/root/root/airlock-e2e-secret",
		"/workspace/up/airlock-e2e-secret", "/workspace/p1/root/airlock-e2e-secret", "/workspace/self/root/airlock-e2e-secret",
		"/proc/1/root/root/airlock-e2e-secret", "/proc/self/root/root/airlock-e2e-secret",
	} {
		rc, err := c.ReadFile(ctx, sb.ID, p)
		if err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			t.Errorf("read %s: got %q, want an error", p, b)
			continue
		}
		if ce := clientErr(t, err); ce.StatusCode != http.StatusNotFound && ce.StatusCode != http.StatusForbidden {
			t.Errorf("read %s: %+v", p, ce)
		}
	}
	// /etc/passwd through the link is the sandbox's generated one, never the host's.
	rc, err = c.ReadFile(ctx, sb.ID, "/workspace/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(rc)
	rc.Close()
	host, _ := os.ReadFile("/etc/passwd")
	if !bytes.Contains(b, []byte("agent:")) || bytes.Equal(b, host) {
		t.Errorf("/workspace/etc/passwd is not the sandbox's: %q", b)
	}
	// Writes through links land inside (here: the read-only /etc → 409), never on the host.
	if _, err := c.WriteFile(ctx, sb.ID, "/workspace/root/etc/airlock-e2e-planted", strings.NewReader("x"), 0); err == nil {
		t.Error("write into the sandbox's read-only root succeeded")
	}
	if _, err := os.Stat("/etc/airlock-e2e-planted"); err == nil {
		os.Remove("/etc/airlock-e2e-planted")
		t.Fatal("a write through a sandbox symlink reached the host's /etc")
	}
	if err := c.RemoveFile(ctx, sb.ID, "/workspace/up/airlock-e2e-secret", false); err == nil {
		t.Error("remove through a symlink to the host succeeded")
	}
	if _, err := os.Stat(hostSecret); err != nil {
		t.Fatalf("the host file was removed: %v", err)
	}
	// Uploads count toward the writable layer: past diskMb the answer is 507, not a partial file.
	_, err = c.WriteFile(ctx, sb.ID, "/workspace/big", io.LimitReader(zeros{}, 300<<20), 0)
	if ce := clientErr(t, err); ce.StatusCode != http.StatusInsufficientStorage {
		t.Errorf("upload past diskMb: %+v", ce)
	}
	if _, err := c.StatFile(ctx, sb.ID, "/workspace/big"); err == nil {
		t.Error("a failed upload left a file")
	}
	terminate(ctx, t, c, sb.ID)
	check()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestDaemonTenants checks that one tenant's key can neither see nor touch another's sandboxes,
// and that requests without a valid key are refused.
func TestDaemonTenants(t *testing.T) {
	dir := t.TempDir() + "/data"
	keyA, keyB := newKey(t, dir, "alpha"), newKey(t, dir, "beta")
	d := startDaemon(t, dir)
	a, b := d.client(keyA), d.client(keyB)
	ctx := bg()
	sb, err := a.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	defer terminate(ctx, t, a, sb.ID)
	for name, call := range map[string]func() error{
		"get":       func() error { _, err := b.Get(ctx, sb.ID); return err },
		"exec":      func() error { _, err := b.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("true")}); return err },
		"pause":     func() error { _, err := b.Pause(ctx, sb.ID); return err },
		"terminate": func() error { _, err := b.Terminate(ctx, sb.ID); return err },
		"files":     func() error { _, err := b.ListFiles(ctx, sb.ID, "/"); return err },
		"metrics":   func() error { _, err := b.Metrics(ctx, sb.ID); return err },
		"execs":     func() error { _, err := b.Execs(ctx, sb.ID); return err },
		"logs":      func() error { return b.Logs(ctx, sb.ID, client.LogOptions{}, func(api.LogEntry) error { return nil }) },
	} {
		if ce := clientErr(t, call()); ce.StatusCode != http.StatusNotFound {
			t.Errorf("tenant beta %s of alpha's sandbox: %+v, want 404", name, ce)
		}
	}
	if list, err := b.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("beta lists %v %v", list, err)
	}
	if got, err := a.Get(ctx, sb.ID); err != nil || got.Status != api.StatusReady {
		t.Errorf("alpha's sandbox after beta's attempts: %+v %v", got, err)
	}
	for name, key := range map[string]string{"no key": "", "unknown key": "alk_nope"} {
		if _, err := d.client(key).List(ctx, client.ListOptions{}); clientErr(t, err).StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %v", name, err)
		}
	}
	if r := runAirlock(t, nil, "keys", "revoke", keyB, "--data-dir", dir); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	// The daemon trusts a key it checked for a second (store.authTTL); a key revoked beside it
	// stops working within that.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := b.List(ctx, client.ListOptions{})
		if err != nil && clientErr(t, err).StatusCode == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("revoked key still works after 3 s: %v", err)
			break
		}
	}
	// Health and the API document need no key.
	if _, err := d.client("").Health(ctx); err != nil {
		t.Errorf("healthz: %v", err)
	}
}

// TestDaemonQuotaAndCompat checks the per-tenant quota (429) and the compatibility surface.
func TestDaemonQuotaAndCompat(t *testing.T) {
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "limits": {"maxSandboxesPerTenant": 2}}`)
	ctx := bg()
	ids := createN(t, c, 2)
	if _, err := c.Create(ctx, smallSpec()); clientErr(t, err).StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third sandbox: %v", err)
	}
	terminate(ctx, t, c, ids[1])

	// Compatibility surface: create, sync and async runs of Python, poll, delete.
	var created api.CompatSandbox
	status, _ := rawJSON(t, d.url, key, "POST", "/api/sandbox/create", `{"agent_id":"a1","config":{"resources":{"cpu":0.5,"memory":"256m","timeout":60},"network":{"block_outbound":true}}}`, &created)
	if status != http.StatusCreated || created.Status != api.StatusReady {
		t.Fatalf("compat create: %d %+v", status, created)
	}
	var run api.CompatRun
	rawJSON(t, d.url, key, "POST", "/api/sandbox/"+created.ID+"/run", `{"code":"print(6*7)"}`, &run)
	if run.Status != api.ExecDone || run.Result == nil || run.Result.Stdout != "42\n" {
		t.Fatalf("compat run: %+v", run)
	}
	status, _ = rawJSON(t, d.url, key, "POST", "/api/sandbox/"+created.ID+"/run", `{"code":"import time; time.sleep(0.5); print('late')","async":true}`, &run)
	if status != http.StatusAccepted || run.Status != api.ExecRunning || run.RunID == "" {
		t.Fatalf("compat async run: %d %+v", status, run)
	}
	deadline := time.Now().Add(20 * time.Second)
	for run.Status == api.ExecRunning && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		rawJSON(t, d.url, key, "GET", "/api/sandbox/"+created.ID+"/run/"+run.RunID, "", &run)
	}
	if run.Status != api.ExecDone || run.Result.Stdout != "late\n" {
		t.Fatalf("compat async result: %+v", run)
	}
	// The quota counts compatibility sandboxes too.
	if _, err := c.Create(ctx, smallSpec()); clientErr(t, err).StatusCode != http.StatusTooManyRequests {
		t.Fatalf("quota with a compat sandbox: %v", err)
	}
	if status, _ := rawJSON(t, d.url, key, "DELETE", "/api/sandbox/"+created.ID, "", nil); status != http.StatusNoContent {
		t.Fatalf("compat delete: %d", status)
	}
	if rawJSON(t, d.url, key, "GET", "/api/sandbox/"+created.ID, "", &created); created.Status != api.CompatStatusDestroyed {
		t.Fatalf("compat get after delete: %+v", created)
	}
	terminate(ctx, t, c, ids[0])
}

// TestDaemonStreams runs an interactive exec with a PTY over the WebSocket and follows the logs
// over SSE until the sandbox ends.
func TestDaemonStreams(t *testing.T) {
	_, c := newDaemon(t)
	ctx := bg()
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	var followed strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	followErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		followErr <- c.Logs(fctx, sb.ID, client.LogOptions{Follow: true}, func(e api.LogEntry) error {
			followed.WriteString(e.Data)
			if e.Event != nil {
				followed.WriteString("[" + e.Event.Type + " " + e.Event.Message + "]")
			}
			return nil
		})
	}()

	stdinR, stdinW := io.Pipe()
	resize := make(chan client.Winsize, 1)
	var out bytes.Buffer
	done := make(chan struct{})
	var res api.ExecResult
	go func() {
		defer close(done)
		res, err = c.ExecInteractive(ctx, sb.ID, api.ExecStart{ExecRequest: api.ExecRequest{Command: api.Command{"/bin/sh"}}, TTY: true, Rows: 30, Cols: 100},
			client.Stdio{Stdin: stdinR, Stdout: &out, Resize: resize})
	}()
	if _, err := io.WriteString(stdinW, "tty; stty size\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	resize <- client.Winsize{Rows: 40, Cols: 120}
	time.Sleep(300 * time.Millisecond)
	if _, err := io.WriteString(stdinW, "stty size; exit 7\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("interactive exec did not end")
	}
	stdinW.Close()
	if err != nil || res.ExitCode != 7 {
		t.Fatalf("interactive exec: %+v %v (output %q)", res, err, out.String())
	}
	mustContain(t, "terminal output", out.String(), "/dev/pts/", "30 100", "40 120")

	if _, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("echo streamed-line")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-followErr; err != nil {
		t.Fatalf("follow: %v", err)
	}
	mustContain(t, "followed logs", followed.String(), "streamed-line", "[exec.exited exit 7]", "[sandbox.status terminated]")
}

// rawJSON sends a request without the SDK and decodes the envelope's data into out; it returns
// the HTTP status and the envelope's error, if any.
func rawJSON(t *testing.T, base, key, method, path, body string, out any) (int, *api.Error) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Close = true // no idle connection outlives the test
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(path, "/api/sandbox/") {
		return compatBody(t, method, path, resp.StatusCode, b, out)
	}
	env := struct {
		OK    bool       `json:"ok"`
		Data  any        `json:"data"`
		Error *api.Error `json:"error"`
	}{Data: out}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
	}
	if env.OK == (env.Error != nil) || (env.OK != (resp.StatusCode < 300)) {
		t.Fatalf("%s %s: %d with a malformed envelope: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, env.Error
}

// compatBody decodes an answer of the compatibility surface: the bare object into out, or
// {"error": {...}}; never the envelope, and a 204 without a body.
func compatBody(t *testing.T, method, path string, status int, b []byte, out any) (int, *api.Error) {
	t.Helper()
	if status == http.StatusNoContent {
		if len(b) != 0 {
			t.Fatalf("%s %s: 204 with a body %q", method, path, b)
		}
		return status, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, path, status, b, err)
	}
	if _, ok := keys["ok"]; ok {
		t.Fatalf("%s %s: %d an envelope on the compatibility surface: %s", method, path, status, b)
	}
	if status >= 300 {
		var e api.CompatError
		if err := json.Unmarshal(b, &e); err != nil || len(keys) != 1 || e.Error.Code == "" {
			t.Fatalf("%s %s: %d a malformed error: %s", method, path, status, b)
		}
		return status, &e.Error
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, status, b, err)
		}
	}
	return status, nil
}

// TestDaemonCLI drives the daemon with the CLI client verbs, as a user would.
func TestDaemonCLI(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	cli := func(stdin io.Reader, args ...string) result { t.Helper(); return d.cli(t, key, stdin, args...) }
	r := cli(nil, "create", "--memory", "256M", "--disk", "64M", "--name", "cli-box")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "sbx_") {
		t.Fatalf("create: %+v", r)
	}
	if r = cli(nil, "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"); r.code != 3 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Errorf("exec: %+v", r)
	}
	if r = cli(strings.NewReader("piped\n"), "exec", id, "--", "cat"); r.code != 0 || r.stdout != "piped\n" {
		t.Errorf("exec with piped stdin: %+v", r)
	}
	if r = cli(nil, "exec", "--timeout", "1s", id, "--", "sleep", "100"); r.code != 124 {
		t.Errorf("exec past its timeout: %+v", r)
	}
	src := t.TempDir() + "/in.txt"
	if err := os.WriteFile(src, []byte("copied in"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r = cli(nil, "cp", src, id+":/workspace/in.txt"); r.code != 0 {
		t.Errorf("cp in: %+v", r)
	}
	if r = cli(nil, "exec", id, "--", "cat", "/workspace/in.txt"); r.stdout != "copied in" {
		t.Errorf("the copied file: %+v", r)
	}
	if r = cli(nil, "ls"); r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "running") {
		t.Errorf("ls: %+v", r)
	}
	if r = cli(nil, "inspect", "--json", id); r.code != 0 || !strings.Contains(r.stdout, `"name": "cli-box"`) {
		t.Errorf("inspect: %+v", r)
	}
	if r = cli(nil, "logs", id); r.code != 0 || !strings.Contains(r.stdout, "out\n") {
		t.Errorf("logs: %+v", r)
	}
	if r = cli(nil, "create", "--memory", "99G"); r.code != 1 || !strings.Contains(r.stderr, "--memory") {
		t.Errorf("create with an out-of-range flag: %+v", r)
	}
	if r = cli(nil, "exec", "sbx_nope", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("exec in an unknown sandbox: %+v", r)
	}
	if r = cli(nil, "rm", id); r.code != 0 {
		t.Errorf("rm: %+v", r)
	}
	check()
}
