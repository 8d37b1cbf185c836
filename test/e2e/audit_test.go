package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"

	_ "modernc.org/sqlite"
)

// TestAudit drives the record end to end: the events of one sandbox's life (lifecycle, API
// calls with who and from where, execs with their resource usage, the files each exec changed,
// every limit hit) through the SDK and the CLI, followed live and paged, the replay, tenancy,
// and `airlock audit verify` on the stored log: whole, then after an edit, after a deletion, and
// after a daemon restart on a damaged log.
func TestAudit(t *testing.T) {
	check := leakCheck(t)
	dir := filepath.Join(t.TempDir(), "data")
	key, other := newKey(t, dir, "t1"), newKey(t, dir, "t2")
	d := startDaemon(t, dir)
	c, c2 := d.client(key), d.client(other)
	ctx := bg()

	// Follow the tenant's events from the start, as `airlock events -f` and the SDK do.
	fctx, stopFollow := context.WithCancel(ctx)
	var mu sync.Mutex
	var followed []api.Event
	followDone := make(chan error, 1)
	go func() {
		followDone <- c.FollowEvents(fctx, "", client.EventOptions{}, func(e api.Event) error {
			mu.Lock()
			followed = append(followed, e)
			mu.Unlock()
			return nil
		})
	}()

	sb, err := c.Create(ctx, api.Spec{Resources: api.Resources{MemoryMB: 128, DiskMB: 16, MaxProcesses: 32}})
	if err != nil {
		t.Fatal(err)
	}
	cliFollow := airlockCmd(ctx, "events", "-f", sb.ID)
	cliFollow.Env = append(cliFollow.Env, "AIRLOCK_HOST="+d.url, "AIRLOCK_TOKEN="+key)
	var cliOut strings.Builder
	cliFollow.Stdout = &cliOut
	if err := cliFollow.Start(); err != nil {
		t.Fatal(err)
	}

	run := func(cmd string, timeout float64) api.ExecResult {
		t.Helper()
		res, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell(cmd), Timeout: timeout})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return res
	}
	run("mkdir -p /tmp/w && echo a > /tmp/w/keep && echo b > /tmp/w/gone", 0)
	files := run("echo new > /tmp/w/new; echo more >> /tmp/w/keep; rm /tmp/w/gone; mkdir /tmp/w/dir", 0)
	limits := map[string]api.ExecResult{}
	limits["limit.memory"] = run(`python3 -c 'b = bytearray(1024 * 1024 * 1024)'`, 30)
	limits["limit.pids"] = run(`b() { b | b & }; b; sleep 10`, 4)
	// The bomb's last forks are being killed as its exec returns: the next command waits until
	// the sandbox can fork again, or it would meet the process limit instead of the disk's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res := run("true", 0); res.ExitCode == 0 && len(res.LimitEvents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("10 s after the fork bomb's timeout, the sandbox still cannot fork")
		}
	}
	limits["limit.disk"] = run(`dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null; echo filled`, 30)
	limits["limit.timeout"] = run(`sleep 30`, 1)

	// The files the second exec changed, from the writable layer.
	page, err := c.Events(ctx, sb.ID, client.EventOptions{Type: api.EventExecFiles, ExecutionID: files.ExecutionID})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("exec.files of %s: %+v, %v", files.ExecutionID, page, err)
	}
	fd := page.Events[0].Data
	for k, want := range map[string][]string{"created": {"/tmp/w/dir", "/tmp/w/new"}, "modified": {"/tmp/w/keep"}, "deleted": {"/tmp/w/gone"}} {
		if got := strs(fd[k]); !slices.Equal(got, want) {
			t.Errorf("exec.files %s = %v, want %v (%v)", k, got, want, fd)
		}
	}

	run("rm -f /tmp/fill", 0)
	// A file the files API wrote is no exec's: reported apart, without an execution ID.
	if _, err := c.WriteFile(ctx, sb.ID, "/tmp/w/uploaded", strings.NewReader("hi"), 0); err != nil {
		t.Fatal(err)
	}
	run("true", 0)
	page, err = c.Events(ctx, sb.ID, client.EventOptions{Type: api.EventFilesChanged})
	if err != nil || len(page.Events) != 1 || page.Events[0].ExecutionID != "" || !slices.Equal(strs(page.Events[0].Data["created"]), []string{"/tmp/w/uploaded"}) {
		t.Errorf("files.changed after an upload: %+v, %v", page, err)
	}
	// Every limit hit is an event of its exec.
	for typ, res := range limits {
		page, err := c.Events(ctx, sb.ID, client.EventOptions{Type: typ, ExecutionID: res.ExecutionID})
		if err != nil || len(page.Events) == 0 {
			t.Errorf("no %s event for exec %s (result %+v): %v", typ, res.ExecutionID, res.LimitEvents, err)
		}
	}
	// An exec's end says what it used.
	page, err = c.Events(ctx, sb.ID, client.EventOptions{Type: api.EventExecExited, ExecutionID: limits["limit.memory"].ExecutionID})
	if err != nil || len(page.Events) != 1 || page.Events[0].Data["oomKilled"] != true || page.Events[0].Data["peakMemoryMb"].(float64) < 64 {
		t.Errorf("exec.exited of the memory bomb: %+v, %v", page, err)
	}

	// Who did what, from where.
	page, err = c.Events(ctx, sb.ID, client.EventOptions{Type: api.EventAPIRequest})
	if err != nil || len(page.Events) < 7 {
		t.Fatalf("api.request events: %+v, %v", page, err)
	}
	for _, e := range page.Events {
		if e.Data["keyId"] == "" || !strings.HasPrefix(fmt.Sprint(e.Data["remote"]), "127.0.0.1:") || e.Data["method"] == "GET" {
			t.Errorf("api.request without who or where: %+v", e.Data)
		}
	}
	// A refused call is recorded too, for the tenant.
	if _, err := c.Get(ctx, "sbx_doesnotexist"); err == nil {
		t.Fatal("an unknown sandbox was found")
	}

	if _, err := c.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The CLI's follow ends with the sandbox.
	done := make(chan error, 1)
	go func() { done <- cliFollow.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("airlock events -f: %v", err)
		}
	case <-time.After(15 * time.Second):
		_ = cliFollow.Process.Kill() // one that ended meanwhile: the Fatal says enough
		t.Fatal("airlock events -f did not end after the sandbox was terminated")
	}
	for _, want := range []string{"exec.files", "+/tmp/w/new", "~/tmp/w/keep", "-/tmp/w/gone", "limit.memory", "limit.pids", "limit.disk", "limit.timeout", "status terminated"} {
		if !strings.Contains(cliOut.String(), want) {
			t.Errorf("airlock events -f output lacks %q:\n%s", want, cliOut.String())
		}
	}

	// The whole page of the sandbox, in log order, equals what the tenant's follower saw of it.
	all, err := c.Events(ctx, sb.ID, client.EventOptions{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stopFollow()
	if err := <-followDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("follow events: %v", err)
	}
	mu.Lock()
	var seen []int64
	var last int64
	for _, e := range followed {
		if e.Seq <= last {
			t.Errorf("followed events out of order: %d after %d", e.Seq, last)
		}
		last = e.Seq
		if e.SandboxID == sb.ID {
			seen = append(seen, e.Seq)
		}
	}
	mu.Unlock()
	var stored []int64
	for _, e := range all.Events {
		stored = append(stored, e.Seq)
	}
	if !slices.Equal(seen, stored) {
		t.Errorf("the follower saw %d events of the sandbox, the store has %d:\n%v\n%v", len(seen), len(stored), seen, stored)
	}

	// Another tenant sees none of it.
	if _, err := c2.Events(ctx, sb.ID, client.EventOptions{}); clientErr(t, err).StatusCode != 404 {
		t.Errorf("another tenant's events: %v", err)
	}
	if p, err := c2.TenantEvents(ctx, client.EventOptions{}); err != nil || slices.ContainsFunc(p.Events, func(e api.Event) bool { return e.SandboxID == sb.ID }) {
		t.Errorf("another tenant's tenant-wide events: %d, %v", len(p.Events), err)
	}
	if p, err := c.TenantEvents(ctx, client.EventOptions{Type: api.EventAPIRequest}); err != nil ||
		!slices.ContainsFunc(p.Events, func(e api.Event) bool { return e.Data["code"] == "not_found" }) {
		t.Errorf("the refused call is not among the tenant's events: %v", err)
	}
	if _, err := c.Events(ctx, sb.ID, client.EventOptions{Limit: 20000}); clientErr(t, err).Field != "limit" {
		t.Errorf("limit 20000: %v", err)
	}

	// The replay: every event once, in time order, execs with their output.
	// (The refused page above is one more event of the sandbox.)
	rp, err := c.Replay(ctx, sb.ID)
	if err != nil || len(rp.Entries) != len(all.Events)+1 {
		t.Fatalf("replay: %d entries of %d events, %v", len(rp.Entries), len(all.Events)+1, err)
	}
	for _, e := range all.Events {
		if !slices.ContainsFunc(rp.Entries, func(en api.ReplayEntry) bool { return en.Seq == e.Seq && en.Event.ID == e.ID }) {
			t.Errorf("replay lacks event %d", e.Seq)
		}
	}
	for i := 1; i < len(rp.Entries); i++ {
		if rp.Entries[i].Time.Before(rp.Entries[i-1].Time) || rp.Entries[i].OffsetMs < 0 {
			t.Fatalf("replay out of order at %d", i)
		}
	}
	if i := slices.IndexFunc(rp.Entries, func(e api.ReplayEntry) bool {
		return e.Type == api.EventExecExited && e.ExecutionID == limits["limit.timeout"].ExecutionID
	}); i < 0 || rp.Entries[i].Exec == nil || rp.Entries[i].Exec.Result == nil || !rp.Entries[i].Exec.Result.TimedOut {
		t.Errorf("replay lacks the timed-out exec's record")
	}
	if r := d.cli(t, key, nil, "replay", sb.ID); r.code != 0 || !strings.Contains(r.stdout, "exec.files") || !strings.Contains(r.stdout, "limit.timeout") {
		t.Errorf("airlock replay: %+v", r)
	}

	// The stored log verifies; an edit, a deletion, and a restart over a cut-off log are caught.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	check()
	verify := func() result {
		t.Helper()
		return runAirlock(t, nil, "audit", "verify", "--data-dir", dir)
	}
	if r := verify(); r.code != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
		t.Fatalf("verify of the untouched log: %+v", r)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	target := all.Events[slices.IndexFunc(all.Events, func(e api.Event) bool { return e.Type == api.EventExecExited })]
	var original string
	if err := db.QueryRow(`SELECT body FROM events WHERE seq = ?`, target.Seq).Scan(&original); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET body = replace(body, 'exit', 'EXIT') WHERE seq = ?`, target.Seq); err != nil {
		t.Fatal(err)
	}
	if r := verify(); r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("event %d (%s)", target.Seq, target.ID)) {
		t.Fatalf("verify after an edit: %+v", r)
	}
	tx := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Put the edit back (the content is in the original event), then delete a later event.
	tx(`UPDATE events SET body = ? WHERE seq = ?`, original, target.Seq)
	if r := verify(); r.code != 0 {
		t.Fatalf("verify after undoing the edit: %+v", r)
	}
	gone := all.Events[len(all.Events)-3]
	tx(`DELETE FROM events WHERE seq = ?`, gone.Seq)
	if r := verify(); r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("event %d: it is missing", gone.Seq)) {
		t.Fatalf("verify after a deletion: %+v", r)
	}
	// A daemon started on the damaged log goes on, and the damage stays on record.
	var head int64
	if err := db.QueryRow(`SELECT max(seq) FROM events`).Scan(&head); err != nil {
		t.Fatal(err)
	}
	tx(`DELETE FROM events WHERE seq = ?`, head) // also cut the tail
	d = startDaemon(t, dir)
	if _, err := d.client(key).Create(ctx, smallSpec()); err != nil {
		t.Fatal(err)
	}
	d.kill9()
	if r := verify(); r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("event %d: it is missing", gone.Seq)) {
		t.Fatalf("verify after a restart on the damaged log: %+v", r)
	}
	if r := runAirlock(t, nil, "audit", "verify", "--json", "--data-dir", dir); r.code != 1 || !strings.Contains(r.stdout, `"problem"`) {
		t.Fatalf("verify --json: %+v", r)
	}
	d = startDaemon(t, dir) // reclaims what the kill left
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	check()
}

// strs reads a JSON array of strings.
func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}
