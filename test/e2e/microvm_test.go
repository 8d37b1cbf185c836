package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/driver/microvm"
	"github.com/airlockrun/airlock/internal/testutil"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// microvmLeaks lists what the microvm level of the airlock on dataDir left on the host: VM
// directories, VMM cgroups, uid ranges, and QEMU processes of its VMs.
func microvmLeaks(dataDir string) []string {
	var out []string
	instance := uidalloc.InstanceOf(dataDir)
	vms := filepath.Join(microvm.StateDirOf(instance), "vms")
	ents, _ := os.ReadDir(vms)
	for _, e := range ents {
		out = append(out, "VM directory "+e.Name())
	}
	for cg := range instanceCgroups("airlock-microvm", instance) {
		out = append(out, cg)
	}
	for _, r := range uidalloc.Records(uidalloc.DefaultDir, func(r uidalloc.Record) bool {
		return r.Instance == instance && r.Level == api.LevelMicroVM
	}) {
		out = append(out, fmt.Sprintf("uid range %v of %s", r.Range, r.Sandbox))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if c, _ := os.ReadFile(p); strings.HasPrefix(string(c), "qemu-system") && strings.Contains(string(c), vms+"/") {
			out = append(out, "process "+strings.ReplaceAll(string(c), "\x00", " "))
		}
	}
	return out
}

// TestMicroVMLevel drives a microvm sandbox through the daemon: create, exec in its own kernel,
// a snapshot (with memory) restored in place, files uploaded and downloaded, terminate with
// nothing left; then a kill -9 of the daemon with a
// VM live and a command counting in it, and a restart that adopts the VM: still running, the
// counter went on, exec works, and its terminate leaves nothing.
func TestMicroVMLevel(t *testing.T) {
	testutil.RequiresRoot(t, "it makes VMs")
	dataDir := filepath.Join(t.TempDir(), "data")
	key := newKey(t, dataDir, "t1")
	d := startDaemon(t, dataDir)
	c := d.client(key)
	spec := smallSpec()
	spec.Isolation = api.LevelMicroVM
	sb, err := c.Create(bg(), spec)
	var ce *client.Error
	if errors.As(err, &ce) && ce.Code == api.CodeIsolationUnavailable {
		t.Skipf("the microvm level is unavailable here: %s", ce.Message)
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// The guests run airlock-guest, built beside airlock as make build does.
	caps, err := c.Capabilities(bg())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range caps.Levels {
		if l.Level == api.LevelMicroVM && !slices.Contains(l.Features, "guest:airlock-guest") {
			t.Errorf("the microvm guests do not run airlock-guest: features %v", l.Features)
		}
	}
	host, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	res, err := c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("uname -r; echo kept > /workspace/f")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if got := strings.TrimSpace(res.Stdout); got == strings.TrimSpace(string(host)) {
		t.Fatalf("the VM runs the host's kernel %s", got)
	}
	// The files it changed, from the guest agent's scans of the disk.
	expectCreated(t, c, sb.ID, api.EventExecFiles, res.ExecutionID, "/workspace/f")
	snap, err := c.Snapshot(bg(), sb.ID, api.SnapshotRequest{})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	shOK(t, c, sb.ID, "rm /workspace/f")
	if _, err := c.Restore(bg(), sb.ID, snap.ID); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := strings.TrimSpace(shOK(t, c, sb.ID, "cat /workspace/f")); got != "kept" {
		t.Fatalf("restored file: %q", got)
	}
	if !snap.Memory {
		t.Errorf("a microvm sandbox's snapshot saved no memory: %+v", snap)
	}
	// The files API, served by the guest agent.
	if _, err := c.WriteFile(bg(), sb.ID, "/workspace/up.txt", strings.NewReader("uploaded"), 0o644); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if got := shOK(t, c, sb.ID, "cat /workspace/up.txt"); got != "uploaded" {
		t.Fatalf("uploaded file in the VM: %q", got)
	}
	expectCreated(t, c, sb.ID, api.EventFilesChanged, "", "/workspace/up.txt")
	rc, err := c.ReadFile(bg(), sb.ID, "/workspace/f")
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "kept\n" {
		t.Fatalf("download: %q %v", b, err)
	}
	if _, err := c.ReadFile(bg(), sb.ID, "/workspace/nope"); err == nil || !errors.As(err, &ce) || ce.StatusCode != 404 {
		t.Fatalf("download of a missing file: %v, want a 404", err)
	}
	if _, err := c.Terminate(bg(), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitNoMicroVMLeaks(t, dataDir)

	// kill -9 with a VM live and a command counting in it: the VM outlives the daemon, and the
	// restarted one adopts it with its processes.
	sb, err = c.Create(bg(), spec)
	if err != nil {
		t.Fatal(err)
	}
	shOK(t, c, sb.ID, `sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done' >/dev/null 2>&1 &
echo kept > /workspace/f; sleep 0.5`)
	count := func() int {
		t.Helper()
		n, err := strconv.Atoi(shOK(t, c, sb.ID, "cat /tmp/count"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	d.kill9()
	d = startDaemon(t, dataDir)
	c = d.client(key)
	got, err := c.Get(bg(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.StatusRunning {
		t.Fatalf("after restart: status %s (%s), want running (adopted)", got.Status, got.Reason)
	}
	// A loaded host's TCG guest may count slowly: the counter is given 30 s to go on.
	past := func(n int) int {
		v := count()
		for deadline := time.Now().Add(30 * time.Second); v <= n && time.Now().Before(deadline); v = count() {
			time.Sleep(100 * time.Millisecond)
		}
		return v
	}
	first := past(before)
	if then := past(first); first <= before || then <= first {
		t.Fatalf("the counter: %d before the kill, %d then %d after the restart", before, first, then)
	}
	if got := shOK(t, c, sb.ID, "cat /workspace/f"); got != "kept" {
		t.Fatalf("a file after the restart: %q", got)
	}
	// The adopted VM's scans go on.
	res, err = c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("echo new > /workspace/g")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	expectCreated(t, c, sb.ID, api.EventExecFiles, res.ExecutionID, "/workspace/g")
	if _, err := c.Terminate(bg(), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitNoMicroVMLeaks(t, dataDir)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
}

// expectCreated fails t unless sandbox id has an event of type typ (of exec, when not "") that
// lists path as created.
func expectCreated(t *testing.T, c *client.Client, id, typ, exec, path string) {
	t.Helper()
	page, err := c.Events(bg(), id, client.EventOptions{Type: typ, ExecutionID: exec})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if slices.Contains(strs(e.Data["created"]), path) {
			return
		}
	}
	t.Fatalf("no %s event (exec %q) lists %s as created: %+v", typ, exec, path, page.Events)
}

func waitNoMicroVMLeaks(t *testing.T, dataDir string) {
	t.Helper()
	var leaks []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if leaks = microvmLeaks(dataDir); len(leaks) == 0 {
			return
		}
	}
	t.Fatalf("microvm level left behind: %s", strings.Join(leaks, "; "))
}
