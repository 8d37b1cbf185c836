package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/metrics/metricstest"
	"github.com/airlockrun/airlock/internal/store"
)

// TestDaemonStoreFull runs airlock serve with its data dir on a 24 MB tmpfs and fills it (a
// filler file written by the test, and an exec's large output): what must be recorded first is
// refused with 507 insufficient_storage, never a 500; a DELETE is either acknowledged and really
// terminated or refused with the sandbox untouched; /healthz says degraded. With the filler gone
// everything works again, the exec whose result could not be recorded is recorded, the audit
// chain verifies, and after a restart no exec is left running.
func TestDaemonStoreFull(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=24m,mode=0700"); err != nil {
		t.Skipf("SKIP: cannot mount a tmpfs for the data dir: %v", err)
	}
	t.Cleanup(func() { // after the daemon's own cleanup (registered later, run first)
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	dir := filepath.Join(mnt, "data")
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	ctx := bg()

	sb1, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	sb2, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	shOK(t, c, sb1.ID, "true") // sb1 is running: its next exec writes no transition
	shOK(t, c, sb2.ID, "true")

	// Fill the tmpfs.
	fill := func(name string) {
		f, err := os.Create(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}
	fill("filler")

	// Writes are refused with 507 and the reason; nothing runs.
	_, err = c.Create(ctx, smallSpec())
	if ce := clientErr(t, err); ce.StatusCode != http.StatusInsufficientStorage || !strings.Contains(ce.Message, "store") {
		t.Errorf("create on a full store: %d %q; want 507 naming the store", ce.StatusCode, ce.Message)
	}
	_, err = c.Exec(ctx, sb1.ID, api.ExecRequest{Command: api.Shell("touch /tmp/ran")})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusInsufficientStorage {
		t.Errorf("exec on a full store: %d %q; want 507", ce.StatusCode, ce.Message)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "degraded" || !strings.Contains(h.Reason, "full") {
		t.Errorf("healthz on a full store: %+v %v; want degraded, saying full", h, err)
	}
	if got, err := c.Get(ctx, sb1.ID); err != nil || got.Status != api.StatusRunning {
		t.Errorf("reads on a full store: %+v %v", got.Status, err)
	}
	if v := metricstest.Scrape(t, d.url+"/metrics").Value("airlock_store_degraded", nil); v != 1 {
		t.Errorf("airlock_store_degraded on a full store: %g", v)
	}
	terminated, err := c.Terminate(ctx, sb2.ID)
	deleted := err == nil
	switch {
	case deleted:
		t.Logf("DELETE on a full store: acknowledged")
		if terminated.Status != api.StatusTerminated {
			t.Errorf("DELETE acknowledged on a full store with status %s", terminated.Status)
		}
	default:
		t.Logf("DELETE on a full store: %v", err)
		if ce := clientErr(t, err); ce.StatusCode != http.StatusInsufficientStorage {
			t.Errorf("DELETE on a full store: %d %q; want 200 terminated or 507", ce.StatusCode, ce.Message)
		}
	}

	// Then 512 KiB of room: an exec's start record fits, its 4 MB of output not. (A write that
	// failed leaves the WAL file grown: later small commits fit in it again, so this comes last.)
	fi, _ := os.Stat(filepath.Join(mnt, "filler"))
	if err := os.Truncate(filepath.Join(mnt, "filler"), fi.Size()-512<<10); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, sb1.ID, api.ExecRequest{Command: api.Shell(`head -c 4000000 /dev/zero | tr '\0' x`), Timeout: 30})
	ce := clientErr(t, err)
	if ce.StatusCode != http.StatusInsufficientStorage || ce.Code != api.CodeInsufficientStorage || !strings.Contains(ce.Message, "ran (exit 0)") {
		t.Fatalf("exec whose output does not fit: %d %s %q; want 507 insufficient_storage saying it ran", ce.StatusCode, ce.Code, ce.Message)
	}
	unrecorded := regexp.MustCompile(`exec_[0-9a-f]+`).FindString(ce.Message)
	if unrecorded == "" {
		t.Fatalf("the 507 does not name the exec: %q", ce.Message)
	}

	// Room again: everything works, the unrecorded result is recorded.
	os.Remove(filepath.Join(mnt, "filler"))
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, err = c.Health(ctx)
		if err == nil && h.Status == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz after freeing the space: %+v %v", h, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Create(ctx, smallSpec()); err != nil {
		t.Fatalf("create after freeing the space: %v", err)
	}
	if out := shOK(t, c, sb1.ID, "test -e /tmp/ran && echo ran || echo not"); out != "not" {
		t.Errorf("the exec refused on a full store ran: %q", out)
	}
	if deleted {
		// Acknowledged: really gone.
		if _, err := c.Exec(ctx, sb2.ID, api.ExecRequest{Command: api.Shell("true")}); err == nil {
			t.Errorf("exec in a sandbox whose DELETE was acknowledged worked")
		}
	} else {
		shOK(t, c, sb2.ID, "true") // refused: untouched
	}
	for {
		e, err := c.Execution(ctx, sb1.ID, unrecorded)
		if err == nil && e.Status == api.ExecDone && e.Result != nil && len(e.Result.Stdout) == 4000000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec whose result could not be recorded: %+v %v", e.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v := metricstest.Scrape(t, d.url+"/metrics").Value("airlock_store_degraded", nil); v != 0 {
		t.Errorf("airlock_store_degraded after freeing the space: %g", v)
	}

	// Stopped and restarted: the chain verifies, no exec is left running.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if r := runAirlock(t, nil, "audit", "verify", "--data-dir", dir); r.code != 0 {
		t.Fatalf("audit verify: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "airlock.db"), store.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.EventRows(ctx, 0, 1<<20)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var storeEvents []string
	for _, r := range rows {
		if r.Type == api.EventDaemonStore {
			storeEvents = append(storeEvents, string(r.Body))
		}
	}
	if len(storeEvents) < 2 || !strings.Contains(storeEvents[0], `"degraded":true`) || !strings.Contains(storeEvents[len(storeEvents)-1], `"degraded":false`) {
		t.Errorf("daemon.store events %v; want degraded, then writable again", storeEvents)
	}
	d = startDaemon(t, dir)
	c = d.client(key)
	all, err := c.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		execs, err := c.Execs(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range execs {
			if e.Status == api.ExecRunning {
				t.Errorf("exec %s of %s still running after a restart", e.ID, sb.ID)
			}
		}
	}
}

// TestDaemonShutdownCutsExec stops a daemon (SIGTERM, server.shutdownGraceSeconds 1) with an
// exec in flight: the client gets no answer (a connection error), the exec is recorded killed
// (137) with endedBy daemon_shutdown, and its api.request event says the connection was closed
// by the daemon's shutdown, not 200.
func TestDaemonShutdownCutsExec(t *testing.T) {
	d, c, key := newDaemonConfig(t, `{`+processDefault+`, "server": {"shutdownGraceSeconds": 1}}`)
	ctx := bg()
	sb, err := c.Create(ctx, smallSpec())
	if err != nil {
		t.Fatal(err)
	}
	execErr := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, sb.ID, api.ExecRequest{Command: api.Shell("sleep 120"), Timeout: 300})
		execErr <- err
	}()
	var execID string
	for deadline := time.Now().Add(20 * time.Second); execID == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the exec did not start")
		}
		if execs, _ := c.Execs(ctx, sb.ID); len(execs) == 1 && execs[0].Status == api.ExecRunning {
			execID = execs[0].ID
		}
	}
	t0 := time.Now()
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 20*time.Second {
		t.Errorf("stop took %s with a grace of 1 s", took)
	}
	err = <-execErr
	var ce *client.Error
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("the client of the cut-off exec got %v; want a connection error", err)
	}

	d = startDaemon(t, d.dataDir)
	c = d.client(key)
	e, err := c.Execution(ctx, sb.ID, execID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Status != api.ExecDone || e.Result == nil || e.Result.EndedBy != api.EndedByDaemonShutdown || e.Result.ExitCode != 137 {
		t.Fatalf("the cut-off exec's record: %s %+v; want done, exit 137, endedBy daemon_shutdown", e.Status, e.Result)
	}
	page, err := c.Events(ctx, sb.ID, client.EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range page.Events {
		if ev.Type == api.EventAPIRequest && strings.HasSuffix(fmt.Sprint(ev.Data["path"]), "/exec") {
			found = true
			if ev.Data["closedBy"] != api.EndedByDaemonShutdown || ev.Data["delivered"] != false || !strings.Contains(ev.Message, "no answer") {
				t.Errorf("the cut-off exec's api.request event: %q %v", ev.Message, ev.Data)
			}
		}
	}
	if !found {
		t.Errorf("no api.request event of the cut-off exec among %d events", len(page.Events))
	}
}
