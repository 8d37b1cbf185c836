package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// TestSnapshots drives snapshots of the process level through the CLI and the SDK: snapshot,
// change, restore (files, environment and metadata come back, the sandbox is ready again, its
// id unchanged); fork 10 sandboxes that share nothing afterwards; create from a snapshot; a
// corrupted snapshot is refused, leaving the sandbox as it was and creating nothing; snapshots
// outlive their sandbox, a clean restart and a kill -9 (a restored sandbox is adopted as the
// instance it now is); deleting the last snapshot that uses a blob removes it. Nothing is left
// on the host.
func TestSnapshots(t *testing.T) {
	check := leakCheck(t)
	dir := t.TempDir() + "/data"
	key := newKey(t, dir, "t1")
	d := startDaemon(t, dir)
	c := d.client(key)
	ctx := bg()
	cli := func(args ...string) result { t.Helper(); return d.cli(t, key, nil, args...) }
	sh := func(c *client.Client, id, script string) string { t.Helper(); return shOK(t, c, id, script) }
	spec := smallSpec()
	spec.Environment = map[string]string{"STAGE": "one"}
	spec.Metadata = map[string]string{"step": "1"}
	a, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	sh(c, a.ID, "echo v1 > /workspace/f; mkdir -p /workspace/d; echo keep > /workspace/d/k; echo home > ~/h")

	r := cli("snapshot", a.ID, "--name", "first", "--description", "before the change")
	snapID := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(snapID, "snap_") {
		t.Fatalf("airlock snapshot: %+v", r)
	}
	snap, err := c.GetSnapshot(ctx, snapID)
	if err != nil || snap.Name != "first" || snap.SandboxID != a.ID || snap.Isolation != api.LevelProcess || snap.Memory ||
		snap.LayerBytes <= 0 || snap.SizeMB <= 0 || !strings.HasPrefix(snap.Digest, "sha256:") {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}

	// Change everything a snapshot holds, then restore.
	sh(c, a.ID, "echo v2 > /workspace/f; rm -r /workspace/d; echo new > /workspace/g")
	if r := cli("restore", a.ID, snapID); r.code != 0 || strings.TrimSpace(r.stdout) != a.ID {
		t.Fatalf("airlock restore: %+v", r)
	}
	if got := sh(c, a.ID, "cat /workspace/f /workspace/d/k ~/h; ls /workspace/g 2>/dev/null || echo no-g; echo $STAGE"); got != "v1\nkeep\nhome\nno-g\none" {
		t.Fatalf("after restore: %q", got)
	}
	if sb, err := c.Get(ctx, a.ID); err != nil || sb.Metadata["step"] != "1" {
		t.Fatalf("sandbox after restore: %+v, %v", sb, err)
	} else if last := sb.Transitions[len(sb.Transitions)-2]; last.To != api.StatusReady || last.Reason != "restored" {
		t.Errorf("transitions after restore: %+v", sb.Transitions)
	}
	if page, err := c.Events(ctx, a.ID, client.EventOptions{Type: api.EventSandboxRestored}); err != nil || len(page.Events) != 1 || page.Events[0].Data["snapshotId"] != snapID {
		t.Errorf("sandbox.restored events: %+v, %v", page, err)
	}

	// Fork 10: each starts with the files, and what each writes is its own.
	fork, err := c.Fork(ctx, a.ID, api.ForkRequest{Count: 10, Name: "kid"})
	if err != nil || len(fork.Sandboxes) != 10 {
		t.Fatalf("fork: %+v, %v", fork, err)
	}
	var wg sync.WaitGroup
	for i, kid := range fork.Sandboxes {
		if kid.Name != fmt.Sprintf("kid-%d", i+1) || kid.Spec.FromSnapshot != fork.Snapshot.ID {
			t.Errorf("fork %d: %+v", i, kid)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Exec(ctx, kid.ID, api.ExecRequest{Command: api.Shell(`cat /workspace/f; echo $STAGE; echo ` + kid.ID + ` > /workspace/me; echo changed > /workspace/f`)})
			if err != nil || res.Stdout != "v1\none\n" {
				t.Errorf("fork %s: %+v, %v", kid.ID, res, err)
			}
		}()
	}
	wg.Wait()
	for _, kid := range fork.Sandboxes {
		if got := sh(c, kid.ID, "cat /workspace/me; ls /workspace | wc -l"); got != kid.ID+"\n3" {
			t.Errorf("fork %s sees %q", kid.ID, got)
		}
	}
	if got := sh(c, a.ID, "cat /workspace/f; ls /workspace/me 2>/dev/null || echo none"); got != "v1\nnone" {
		t.Errorf("the forked sandbox after its forks wrote: %q", got)
	}
	for _, kid := range fork.Sandboxes {
		if _, err := c.Terminate(ctx, kid.ID); err != nil {
			t.Fatal(err)
		}
	}

	// A new sandbox from the snapshot, with an environment of its own over the snapshot's.
	r = cli("create", "--from-snapshot", snapID, "--env", "EXTRA=yes")
	fromSnap := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(fromSnap, "sbx_") {
		t.Fatalf("create --from-snapshot: %+v", r)
	}
	if got := sh(c, fromSnap, "cat /workspace/f; echo $STAGE $EXTRA"); got != "v1\none yes" {
		t.Errorf("sandbox from the snapshot: %q", got)
	}
	if _, err := c.Create(ctx, api.Spec{FromSnapshot: snapID, Resources: api.Resources{MemoryMB: 1024}}); clientErr(t, err).Field != "resources.memoryMb" {
		t.Errorf("create from a snapshot with other resources: %v", err)
	}
	if _, err := c.Create(ctx, api.Spec{FromSnapshot: "snap_nope"}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("create from an unknown snapshot: %v", err)
	}

	// Corrupt the stored layer: a restore and a create are refused and change nothing.
	blob := filepath.Join(dir, "snapshots", "blobs", "sha256", strings.TrimPrefix(snap.Digest, "sha256:"))
	orig, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), orig...)
	bad[len(bad)/2] ^= 0x40
	if err := os.WriteFile(blob, bad, 0o400); err != nil {
		t.Fatal(err)
	}
	sh(c, a.ID, "echo after > /workspace/marker")
	live := len(listLive(t, c))
	_, err = c.Restore(ctx, a.ID, snapID)
	if ce := clientErr(t, err); ce.StatusCode != http.StatusConflict || !strings.Contains(ce.Message, "corrupt") {
		t.Fatalf("restore of a corrupt snapshot: %v", err)
	}
	if got := sh(c, a.ID, "cat /workspace/marker"); got != "after" {
		t.Errorf("sandbox after a refused restore: %q", got)
	}
	if _, err := c.Create(ctx, api.Spec{FromSnapshot: snapID}); clientErr(t, err).StatusCode != http.StatusConflict {
		t.Errorf("create from a corrupt snapshot: %v", err)
	}
	if n := len(listLive(t, c)); n != live {
		t.Errorf("%d live sandboxes after refused restores, had %d", n, live)
	}
	if err := os.WriteFile(blob, orig, 0o400); err != nil {
		t.Fatal(err)
	}

	// A snapshot outlives its sandbox and a clean restart.
	if _, err := c.Terminate(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if r := cli("snapshots", "ls", "--sandbox", a.ID); r.code != 0 || !strings.Contains(r.stdout, snapID) || !strings.Contains(r.stdout, "first") {
		t.Errorf("snapshots ls of a terminated sandbox: %+v", r)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, dir)
	c = d.client(key)
	b, err := c.Create(ctx, api.Spec{FromSnapshot: snapID})
	if err != nil {
		t.Fatalf("create from a snapshot after a restart: %v", err)
	}
	if got := sh(c, b.ID, "cat /workspace/f"); got != "v1" {
		t.Errorf("after a restart: %q", got)
	}

	// A restored sandbox runs as another instance of its level; a kill -9 must not lose it.
	sh(c, b.ID, "echo v3 > /workspace/f")
	second, err := c.Snapshot(ctx, b.ID, api.SnapshotRequest{})
	if err != nil || second.Name != second.ID {
		t.Fatalf("snapshot without a name: %+v, %v", second, err)
	}
	sh(c, b.ID, "echo v4 > /workspace/f")
	if _, err := c.Restore(ctx, b.ID, second.ID); err != nil {
		t.Fatal(err)
	}
	d.kill9()
	d = startDaemon(t, dir)
	c = d.client(key)
	if got := sh(c, b.ID, "cat /workspace/f"); got != "v3" {
		t.Errorf("restored sandbox after kill -9: %q", got)
	}
	if sb, err := c.Get(ctx, b.ID); err != nil || sb.Status != api.StatusRunning {
		t.Errorf("restored sandbox after kill -9: %+v, %v", sb, err)
	}

	// Deleting the snapshots removes their content, once no snapshot uses it.
	all, err := c.Snapshots(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("snapshots: %d, %v", len(all), err)
	}
	args := []string{"snapshots", "rm"}
	for _, sn := range all {
		args = append(args, sn.ID)
	}
	if r := cli(args...); r.code != 0 {
		t.Fatalf("snapshots rm: %+v", r)
	}
	if _, err := c.GetSnapshot(ctx, snapID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleted snapshot: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "snapshots", "blobs", "sha256")); len(ents) != 0 {
		t.Errorf("%d blobs left after every snapshot was deleted", len(ents))
	}
	// (fromSnap ended with the clean restart.)
	if _, err := c.Terminate(ctx, b.ID); err != nil {
		t.Error(err)
	}
	if err := d.stop(); err != nil {
		t.Error(err)
	}
	check()
}

// listLive returns the tenant's live sandboxes.
func listLive(t *testing.T, c *client.Client) []api.Sandbox {
	t.Helper()
	sbs, err := c.List(bg(), client.ListOptions{Status: []string{api.StatusProvisioning, api.StatusReady, api.StatusRunning, api.StatusPaused}})
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}
