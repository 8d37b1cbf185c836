package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
)

// TestWasm drives the wasm level end to end: the one-shot runner (output, timeout, memory bomb),
// the CLI and the SDK against a daemon (both languages, the files API both ways, snapshot and
// restore), the compatibility surface's mode wasm, the 422 for a network, and a kill -9 of the
// daemon: the restarted one adopts the sandbox with its files. Nothing is left on the host.
func TestWasm(t *testing.T) {
	check := leakCheck(t)
	ctx := bg()

	// One-shot, no daemon.
	if r := runAirlock(t, nil, "run", "--isolation", "wasm", "--", "python3", "-c", "print(6*7)"); r.code != 0 || r.stdout != "42\n" {
		t.Fatalf("run python: %+v", r)
	}
	if r := runAirlock(t, nil, "run", "--isolation", "wasm", "--", "node", "-e", "console.log('js', 1 + 1)"); r.code != 0 || r.stdout != "js 2\n" {
		t.Fatalf("run node: %+v", r)
	}
	if r := runAirlock(t, nil, "run", "--isolation", "wasm", "--timeout", "1s", "--", "python3", "-c", "while True: pass"); r.code != 124 {
		t.Fatalf("run endless loop: %+v", r)
	}
	if r := runAirlock(t, nil, "run", "--isolation", "wasm", "--memory", "64M", "--json", "--", "python3", "-c", "bytearray(1 << 30)"); !strings.Contains(r.stdout, "MemoryError") || !strings.Contains(r.stdout, "limit.memory") {
		t.Fatalf("run memory bomb: %+v", r)
	}

	dir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	cli := func(args ...string) result { t.Helper(); return d.cli(t, key, nil, args...) }

	r := cli("create", "--isolation", "wasm", "--memory", "128M", "--disk", "16M", "--env", "GREETING=hi")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "sbx_") {
		t.Fatalf("airlock create --isolation wasm: %+v", r)
	}
	if r := cli("exec", id, "--", "python3", "-c", "import os; print(os.environ['GREETING'], os.getcwd())"); r.code != 0 || r.stdout != "hi /workspace\n" {
		t.Fatalf("airlock exec python3: %+v", r)
	}
	if r := cli("exec", id, "--", "node", "-e", "console.log(process.env.GREETING + '!')"); r.code != 0 || r.stdout != "hi!\n" {
		t.Fatalf("airlock exec node: %+v", r)
	}
	if r := cli("exec", id, "--", "ls"); r.code != 127 || !strings.Contains(r.stderr, "python3 and node") {
		t.Fatalf("airlock exec ls: %+v", r)
	}

	// The files API both ways, and files persisting between execs.
	if _, err := c.WriteFile(ctx, id, "/workspace/in.txt", strings.NewReader("uploaded"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Command{"python3", "-c", "open('out.txt','w').write(open('in.txt').read().upper())"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	rc, err := c.ReadFile(ctx, id, "/workspace/out.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "UPLOADED" {
		t.Fatalf("downloaded %q", b)
	}
	if res, _ := c.Exec(ctx, id, api.ExecRequest{Command: api.Shell("node -e 'console.log(require(\"fs\").readFileSync(\"out.txt\", \"utf8\"))'")}); res.Stdout != "UPLOADED\n" {
		t.Fatalf("node reading python's file: %+v", res)
	}

	// Snapshot, change, restore.
	snap, err := c.Snapshot(ctx, id, api.SnapshotRequest{Name: "s1"})
	if err != nil || snap.Isolation != api.LevelWasm {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	if _, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Command{"python3", "-c", "import os; os.remove('out.txt'); open('new','w')"}}); err != nil {
		t.Fatalf("change: %v", err)
	}
	if _, err := c.Restore(ctx, id, snap.ID); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if res, _ := c.Exec(ctx, id, api.ExecRequest{Command: api.Command{"python3", "-c", "import os; print(open('out.txt').read(), os.path.exists('new'))"}}); res.Stdout != "UPLOADED False\n" {
		t.Fatalf("after restore: %+v", res)
	}

	// A network is refused with 422 naming the level.
	_, err = c.Create(ctx, api.Spec{Isolation: api.LevelWasm, Network: api.Network{AllowedDomains: []string{"example.com"}}})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusUnprocessableEntity || ce.Field != "network.egressPolicy" || !strings.Contains(ce.Message, "wasm") {
		t.Fatalf("wasm with a network: %+v", ce)
	}

	// The compatibility surface's mode wasm.
	var created api.CompatSandbox
	if status, _ := rawJSON(t, d.url, key, "POST", "/api/sandbox/create", `{"agent_id":"a1","mode":"wasm","config":{"resources":{"memory":"128m"}}}`, &created); status != http.StatusCreated || created.Mode != api.LevelWasm {
		t.Fatalf("compat create wasm: %d %+v", status, created)
	}
	var run api.CompatRun
	rawJSON(t, d.url, key, "POST", "/api/sandbox/"+created.ID+"/run", `{"code":"print(sum(range(10)))"}`, &run)
	if run.Result == nil || run.Result.Stdout != "45\n" {
		t.Fatalf("compat run in wasm: %+v", run)
	}

	// kill -9: the next daemon adopts the sandbox, files and all.
	d.kill9()
	d = startDaemon(t, dir)
	c = d.client(key)
	if sb, err := c.Get(ctx, id); err != nil || (sb.Status != api.StatusReady && sb.Status != api.StatusRunning) {
		t.Fatalf("after kill -9: %+v %v", sb, err)
	}
	if res, err := c.Exec(ctx, id, api.ExecRequest{Command: api.Command{"python3", "-c", "print(open('out.txt').read())"}}); err != nil || res.Stdout != "UPLOADED\n" {
		t.Fatalf("adopted sandbox: %+v %v", res, err)
	}
	for _, x := range []string{id, created.ID} {
		if _, err := c.Terminate(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "wasm", "sandboxes")); len(ents) > 0 {
		t.Errorf("stores left: %v", ents)
	}
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}
