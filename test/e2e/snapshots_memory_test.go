package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/testutil"
)

// TestSnapshotsMemory drives snapshots with memory (container level under runsc) through the CLI
// and the SDK: a background counter, which keeps its exec's standard streams, counts on after a
// restore from where it was saved, and in each of two forks on its own; a snapshot while an exec
// runs is refused unless it asks for files only; runc refuses memory by name; a memory snapshot
// outlives a kill -9 of the daemon; deleting it removes its memory image. Nothing is left behind.
func TestSnapshotsMemory(t *testing.T) {
	testutil.RequiresRoot(t, "it makes sandboxes")
	// Checked last: the level's state directory stays mounted until the cleanup below.
	t.Cleanup(leakCheck(t))
	dir := filepath.Join(t.TempDir(), "data")
	removeContainerState(t, dir)
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	ctx := bg()
	cli := func(args ...string) result { t.Helper(); return d.cli(t, key, nil, args...) }
	sh := func(c *client.Client, id, script string) string { t.Helper(); return shOK(t, c, id, script) }
	count := func(c *client.Client, id string) int {
		t.Helper()
		n, err := strconv.Atoi(sh(c, id, "cat /tmp/count"))
		if err != nil {
			t.Fatalf("count in %s: %v", id, err)
		}
		return n
	}
	counting := func(c *client.Client, id string) int {
		t.Helper()
		first := count(c, id)
		time.Sleep(300 * time.Millisecond)
		if then := count(c, id); then <= first {
			t.Fatalf("the counter in %s stopped at %d", id, first)
		}
		return first
	}

	spec := smallSpec()
	spec.Isolation, spec.Runtime = api.LevelContainer, "runsc"
	a, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// The counter keeps the exec's standard streams, which the host made, after the exec ended.
	// It renames each count into place: a save may fall between a truncate and a write.
	sh(c, a.ID, `sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' & sleep 0.3; echo v1 > /workspace/f`)
	counting(c, a.ID)

	// While an exec runs, a snapshot with memory is refused; one of files only is not.
	running := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, a.ID, api.ExecRequest{Command: api.Shell("sleep 2")})
		running <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if r := cli("snapshot", a.ID); r.code == 0 || !strings.Contains(r.stderr, "exec") || !strings.Contains(r.stderr, "memory") {
		t.Errorf("snapshot during an exec: %+v", r)
	}
	files, err := c.Snapshot(ctx, a.ID, api.SnapshotRequest{Memory: ptr(false)})
	if err != nil || files.Memory {
		t.Errorf("snapshot of files during an exec: %+v, %v", files, err)
	}
	if err := <-running; err != nil {
		t.Fatal(err)
	}

	// The count at the save's instant is between what is read just before and just after it.
	preSave := count(c, a.ID)
	r := cli("snapshot", a.ID, "--name", "counting", "--json")
	var snap api.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &snap); r.code != 0 || err != nil || !snap.Memory || snap.Name != "counting" {
		t.Fatalf("airlock snapshot of a runsc sandbox: %+v, %v", r, err)
	}
	saved := count(c, a.ID)
	// A memory snapshot has the container of the sandbox's next restore made ahead (its bundle
	// and runsc's created sandbox); a restore makes the next one.
	prepared := func(gen int) {
		t.Helper()
		pid := filepath.Join(levels.ContainerStateDir(dir), "bundles", a.ID+"-r"+strconv.Itoa(gen), "pid")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(pid); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no container was made ahead for restore %d of %s", gen, a.ID)
			}
		}
	}
	prepared(1)
	sh(c, a.ID, "echo v2 > /workspace/f")
	time.Sleep(time.Second)
	before := count(c, a.ID)

	// Restore: the counter goes on from where it was saved, in the same sandbox.
	if r := cli("restore", a.ID, snap.ID); r.code != 0 {
		t.Fatalf("airlock restore: %+v", r)
	}
	if n := counting(c, a.ID); n >= before || n < preSave {
		t.Errorf("after restore the counter is at %d: saved between %d and %d, at %d before the restore", n, preSave, saved, before)
	}
	if got := sh(c, a.ID, "cat /workspace/f"); got != "v1" {
		t.Errorf("file after restore: %q", got)
	}
	prepared(2)

	// Two forks count on their own, from the fork's instant.
	fork, err := c.Fork(ctx, a.ID, api.ForkRequest{Count: 2})
	if err != nil || len(fork.Sandboxes) != 2 || !fork.Snapshot.Memory {
		t.Fatalf("fork: %+v, %v", fork, err)
	}
	for _, kid := range fork.Sandboxes {
		counting(c, kid.ID)
		sh(c, kid.ID, "echo "+kid.ID+" > /workspace/me")
	}
	for _, kid := range fork.Sandboxes {
		if got := sh(c, kid.ID, "cat /workspace/me"); got != kid.ID {
			t.Errorf("fork %s reads %q", kid.ID, got)
		}
		if _, err := c.Terminate(ctx, kid.ID); err != nil {
			t.Fatal(err)
		}
	}

	// runc's processes are the host's: it saves files only, and says so.
	spec.Runtime = "runc"
	b, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if r := cli("snapshot", b.ID, "--memory"); r.code == 0 || !strings.Contains(r.stderr, "files only") {
		t.Errorf("snapshot --memory of runc: %+v", r)
	}
	if sn, err := c.Snapshot(ctx, b.ID, api.SnapshotRequest{}); err != nil || sn.Memory {
		t.Errorf("snapshot of runc: %+v, %v", sn, err)
	}
	_, err = c.Snapshot(ctx, b.ID, api.SnapshotRequest{Memory: ptr(true)})
	if ce := clientErr(t, err); ce.StatusCode != http.StatusBadRequest || ce.Field != "memory" {
		t.Errorf("snapshot with memory of runc: %v", err)
	}

	// The memory image outlives a kill -9; a new sandbox from it counts on.
	d.kill9()
	d = startDaemon(t, dir)
	c = d.client(key)
	from, err := c.Create(ctx, api.Spec{FromSnapshot: snap.ID})
	if err != nil {
		t.Fatalf("create from a memory snapshot after kill -9: %v", err)
	}
	if n := counting(c, from.ID); n < preSave || n >= before {
		t.Errorf("from the snapshot the counter is at %d: saved between %d and %d", n, preSave, saved)
	}
	if _, err := c.Terminate(ctx, from.ID); err != nil {
		t.Fatal(err)
	}

	all, err := c.Snapshots(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range all {
		if _, err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "snapshots", "blobs", "sha256")); len(ents) != 0 {
		t.Errorf("%d blobs left after every snapshot was deleted", len(ents))
	}
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	waitNoContainerLeaks(t, dir)
}

func ptr[T any](v T) *T { return &v }
