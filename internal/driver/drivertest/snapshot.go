package drivertest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// Restore starts a sandbox from a snapshot's layer (and memory image, when mem is not ""), and
// destroys it when t ends.
func (h *Harness) Restore(t *testing.T, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	t.Helper()
	return h.RestoreAs(t, sandbox.NewID("sbx_"), spec, layer, mem)
}

// RestoreAs is Restore into sandbox id (one a driver.Preparer may have made ready).
func (h *Harness) RestoreAs(t *testing.T, id string, spec sandbox.Spec, layer io.Reader, mem string) (driver.Sandbox, error) {
	t.Helper()
	r, ok := h.D.(driver.Restorer)
	if !ok {
		t.Fatalf("level %s snapshots but cannot restore (no driver.Restorer)", h.D.Name())
	}
	spec.Isolation = h.D.Name()
	sandbox.SetDefaults(&spec)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, err := r.Restore(ctx, id, spec, layer, mem)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		Destroy(ctx, t, sb)
	})
	return sb, nil
}

// snapshotter returns sb as a driver.Snapshotter, or skips the test.
func snapshotter(t *testing.T, h *Harness, sb driver.Sandbox) driver.Snapshotter {
	s, ok := sb.(driver.Snapshotter)
	if !ok || !slices.Contains(h.D.Capabilities().Features, driver.FeatureSnapshotFilesystem) {
		t.Skipf("level %s cannot snapshot (no driver.Snapshotter or feature %s)", h.D.Name(), driver.FeatureSnapshotFilesystem)
	}
	return s
}

// layerFiles makes files of every kind in a sandbox's writable directories and layerState
// prints, as the sandbox sees them, what a restore must bring back.
const (
	layerFiles = `set -e
cd /workspace
printf hello > a.txt
mkdir -p dir/deep && printf b > dir/deep/b && chmod 0750 dir && chmod 0604 dir/deep/b
ln -s a.txt link
ln a.txt hard
mkfifo fifo
head -c 1048576 /dev/urandom > big
printf tmp > /tmp/t
printf rc > "$HOME/.rc"
printf shm > /dev/shm/s
`
	layerState = `cd /workspace
stat -c '%n %F %a %U' a.txt dir dir/deep/b link
readlink link
[ "$(stat -c %i a.txt)" = "$(stat -c %i hard)" ] && echo hard-linked
md5sum big | cut -c1-32
cat a.txt dir/deep/b /tmp/t "$HOME/.rc" /dev/shm/s; echo
`
	// The Python forms leave out /dev/shm, which is the kernel's, and print ids for owners (a
	// level without a shell may have no user names). pyLayerFiles makes the named pipe unless
	// the level skips SnapshotFIFO, and sets modes where there are any.
	pyLayerFiles = pyChmod + `
os.chdir("/workspace")
def put(p, data):
    with open(p, "wb" if isinstance(data, bytes) else "w") as f: f.write(data)
put("a.txt", "hello")
os.makedirs("dir/deep")
put("dir/deep/b", "b")
chmod("dir", 0o750)
chmod("dir/deep/b", 0o604)
os.symlink("a.txt", "link")
os.link("a.txt", "hard")
if FIFO: os.mkfifo("fifo")
put("big", os.urandom(1048576))
put("/tmp/t", "tmp")
put(os.environ["HOME"] + "/.rc", "rc")
`
	pyLayerState = `
import hashlib, os, stat
os.chdir("/workspace")
for n in ("a.txt", "dir", "dir/deep/b", "link"):
    st = os.lstat(n)
    print(n, stat.filemode(st.st_mode), st.st_uid, st.st_gid)
print(os.readlink("link"))
if os.stat("a.txt").st_ino == os.stat("hard").st_ino: print("hard-linked")
print(hashlib.md5(open("big", "rb").read()).hexdigest())
print("".join(open(p).read() for p in ("a.txt", "dir/deep/b", "/tmp/t", os.environ["HOME"] + "/.rc")))
`
)

// testSnapshot saves a sandbox's layer, changes the sandbox, and restores the layer into a new
// sandbox: every file comes back as it was (content, kind, mode, owner, links), the original
// runs on unchanged, and a restore whose snapshot turns out corrupt at its end, or holds paths
// outside a layer, fails and leaves nothing.
func testSnapshot(t *testing.T, h *Harness) {
	sb := h.New(t, sandbox.Spec{})
	snap := snapshotter(t, h, sb)
	whyNoFIFO, noFIFO := h.opts.Skip["SnapshotFIFO"]
	fifo := "FIFO = True"
	if noFIFO {
		fifo = "FIFO = False"
	}
	state := Script{Sh: layerState, Py: pyLayerState}
	expect(t, h.Exec(t, sb, 20*time.Second, Script{Sh: layerFiles, Py: fifo + pyLayerFiles}), 0, "")
	want := h.Exec(t, sb, 10*time.Second, state)
	if want.ExitCode != 0 || !strings.Contains(want.Stdout, "hard-linked") {
		t.Fatalf("state of the original: %+v", want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var layer bytes.Buffer
	if _, err := snap.Snapshot(ctx, &layer, ""); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// The original goes on, and changes.
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "rm /workspace/a.txt; echo changed > /tmp/t; cat /tmp/t",
		Py: `
import os
os.remove("/workspace/a.txt")
with open("/tmp/t", "w") as f: f.write("changed\n")
print(open("/tmp/t").read(), end="")`,
	}), 0, "changed")

	restored, err := h.Restore(t, sandbox.Spec{}, bytes.NewReader(layer.Bytes()), "")
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	got := h.Exec(t, restored, 10*time.Second, state)
	if got.ExitCode != 0 || got.Stdout != want.Stdout {
		t.Fatalf("restored layer:\n%s\nwant:\n%s\nstderr %s", got.Stdout, want.Stdout, got.Stderr)
	}
	if noFIFO {
		t.Logf("named pipes are not checked: %s", whyNoFIFO)
	} else {
		expect(t, h.Exec(t, restored, 10*time.Second, Script{
			Sh: "stat -c %F /workspace/fifo",
			Py: `import os, stat; print("fifo" if stat.S_ISFIFO(os.lstat("/workspace/fifo").st_mode) else "not a fifo")`,
		}), 0, "fifo")
	}
	// The restored sandbox is a sandbox like any other: it writes, and its writes are its own.
	expect(t, h.Exec(t, restored, 10*time.Second, Script{
		Sh: "echo mine > /workspace/a.txt; cat /workspace/a.txt",
		Py: `
with open("/workspace/a.txt", "w") as f: f.write("mine\n")
print(open("/workspace/a.txt").read(), end="")`,
	}), 0, "mine")
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "cat /workspace/a.txt 2>/dev/null || echo gone",
		Py: `
import os
print(open("/workspace/a.txt").read() if os.path.exists("/workspace/a.txt") else "gone", end="")`,
	}), 0, "gone")

	// A paused sandbox can be saved, and stays paused.
	if p, ok := sb.(driver.Pauser); ok {
		if err := p.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := snap.Snapshot(ctx, io.Discard, ""); err != nil {
			t.Errorf("snapshot of a paused sandbox: %v", err)
		}
		if err := p.Resume(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("corrupt", func(t *testing.T) {
		// Every byte arrives, then the digest check fails: the restore must fail all the same.
		r := io.MultiReader(bytes.NewReader(layer.Bytes()), errReader{snapshot.ErrCorrupt})
		if sb, err := h.Restore(t, sandbox.Spec{}, r, ""); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("restore of a corrupt snapshot: %v (sandbox %v), want ErrCorrupt", err, sb)
		}
		// Cut short, mid-file.
		r = io.MultiReader(bytes.NewReader(layer.Bytes()[:layer.Len()/2]), errReader{snapshot.ErrCorrupt})
		if _, err := h.Restore(t, sandbox.Spec{}, r, ""); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("restore of a truncated snapshot: %v, want ErrCorrupt", err)
		}
	})
	t.Run("hostile", func(t *testing.T) {
		marker := filepath.Join(os.TempDir(), "airlock-snapshot-escape")
		os.Remove(marker)
		for _, name := range []string{"../../../../../../" + marker, marker, "oldroot" + marker, "work/x"} {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			tw.Close()
			if _, err := h.Restore(t, sandbox.Spec{}, &b, ""); err == nil {
				t.Errorf("restore of a layer holding %q succeeded", name)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			os.Remove(marker)
			t.Fatalf("a restore wrote %s on the host", marker)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// testSnapshotMemory: on a level that saves processes, a background counter keeps counting in
// the restored sandbox from where it was, and the original keeps its own count.
func testSnapshotMemory(t *testing.T, h *Harness) {
	if !slices.Contains(h.D.Capabilities().Features, driver.FeatureSnapshotMemory) {
		t.Skipf("level %s saves files only (no feature %s)", h.D.Name(), driver.FeatureSnapshotMemory)
	}
	sb := h.New(t, sandbox.Spec{})
	snap := snapshotter(t, h, sb)
	if !snap.SavesMemory() {
		t.Skipf("level %s saves files only with its default runtime", h.D.Name())
	}
	// The count lives in the shell's memory; the file only shows it. The counter keeps its
	// exec's standard streams and writes to them: nothing a command holds may stop a save.
	// Once its exec has ended and its output grace passed, those writes fail with EPIPE, as a
	// pipe's whose reader went away (a SIGPIPE would kill the counter, in the original and in
	// every copy, whenever the save comes later than that on a loaded host): it ignores SIGPIPE.
	expect(t, Exec(t, sb, 10*time.Second, `sh -c 'trap "" PIPE; i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; echo $i >&2; sleep 0.05; done' &
sleep 0.5; echo started`), 0, "started")
	mem := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var layer bytes.Buffer
	t0 := time.Now()
	memory, err := snap.Snapshot(ctx, &layer, mem)
	if err != nil || !memory {
		t.Fatalf("snapshot with memory: saved memory %v, err %v", memory, err)
	}
	t.Logf("saved in %v: layer %d bytes, memory image %d bytes", time.Since(t0), layer.Len(), dirSize(t, mem))
	at := count(t, sb)
	// The original counts on; give it a head start so the two counts differ.
	time.Sleep(time.Second)
	t0 = time.Now()
	restored, err := h.Restore(t, sandbox.Spec{}, &layer, mem)
	if err != nil {
		t.Fatalf("restore with memory: %v", err)
	}
	t.Logf("restored in %v", time.Since(t0))
	first := count(t, restored)
	then := countPast(t, restored, first)
	// The original was frozen for the save, and a loaded host may give it little time since.
	orig := countPast(t, sb, then)
	if first < 1 || first > at+40 || then <= first {
		// What the restored sandbox's processes are doing tells a stalled counter (a product
		// bug) from a starved one (the host).
		ps := Exec(t, restored, 10*time.Second, `for p in /proc/[0-9]*; do echo "$(cat $p/cmdline | tr '\0' ' ') | $(grep -E '^(State|SigPnd|ShdPnd|SigBlk)' $p/status | tr '\n' ' ') | wchan $(cat $p/wchan 2>/dev/null)"; done; ls -l /proc/*/fd/2 2>/dev/null`)
		t.Fatalf("restored counter: %d then %d; it was at %d when saved (the original is at %d); the restored sandbox's processes:\n%s%s", first, then, at, orig, ps.Stdout, ps.Stderr)
	}
	if orig <= then {
		t.Fatalf("original counter %d not ahead of the restored one %d", orig, then)
	}
	// The restored sandbox runs commands like any other.
	expect(t, Exec(t, restored, 10*time.Second, "echo ok"), 0, "ok")
}

// testSnapshotPrepared: on a level that makes restores ready ahead (driver.Preparer), a restore
// into what Prepare made brings back every kind of file of the layer, with owners and modes, and
// the processes, which count on; the restore of a spec of another shape than the prepared one
// still succeeds (the level makes its own sandbox); a corrupt layer is refused; and Discard, like
// every restore, leaves nothing (the case's leak check).
func testSnapshotPrepared(t *testing.T, h *Harness) {
	p, ok := h.D.(driver.Preparer)
	if !ok {
		t.Skipf("level %s makes a restore's sandbox only when asked (no driver.Preparer)", h.D.Name())
	}
	sb := h.New(t, sandbox.Spec{})
	snap := snapshotter(t, h, sb)
	if !snap.SavesMemory() {
		t.Skipf("level %s saves files only with its default runtime", h.D.Name())
	}
	expect(t, Exec(t, sb, 20*time.Second, layerFiles), 0, "")
	want := Exec(t, sb, 10*time.Second, layerState)
	expect(t, Exec(t, sb, 10*time.Second, `sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done' >/dev/null 2>&1 &
sleep 0.3; echo started`), 0, "started")
	mem := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var layer bytes.Buffer
	if saved, err := snap.Snapshot(ctx, &layer, mem); err != nil || !saved {
		t.Fatalf("snapshot with memory: saved %v, err %v", saved, err)
	}
	spec := sandbox.Spec{Isolation: h.D.Name()}
	sandbox.SetDefaults(&spec)
	restoreInto := func(t *testing.T, prepared sandbox.Spec) {
		id := sandbox.NewID("sbx_")
		p.Prepare(id, prepared)
		restored, err := h.RestoreAs(t, id, sandbox.Spec{}, bytes.NewReader(layer.Bytes()), mem)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		if got := Exec(t, restored, 10*time.Second, layerState); got.Stdout != want.Stdout {
			t.Fatalf("restored layer:\n%s\nwant:\n%s\nstderr %s", got.Stdout, want.Stdout, got.Stderr)
		}
		first := count(t, restored)
		if then := countPast(t, restored, first); then <= first {
			t.Fatalf("the restored counter stands at %d", first)
		}
		expect(t, Exec(t, restored, 10*time.Second, "echo mine > /workspace/a.txt; cat /workspace/a.txt"), 0, "mine")
	}
	t.Run("prepared", func(t *testing.T) { restoreInto(t, spec) })
	t.Run("other shape", func(t *testing.T) {
		other := spec
		other.Resources.DiskMB++
		restoreInto(t, other)
	})
	t.Run("corrupt", func(t *testing.T) {
		id := sandbox.NewID("sbx_")
		p.Prepare(id, spec)
		r := io.MultiReader(bytes.NewReader(layer.Bytes()), errReader{snapshot.ErrCorrupt})
		if sb, err := h.RestoreAs(t, id, sandbox.Spec{}, r, mem); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("restore of a corrupt snapshot: %v (sandbox %v), want ErrCorrupt", err, sb)
		}
	})
	t.Run("discard", func(t *testing.T) {
		id := sandbox.NewID("sbx_")
		p.Prepare(id, spec)
		p.Discard(id)
		p.Discard(id) // twice: nothing left to end
	})
}

// count reads the counter the snapshot cases run in sb.
func count(t *testing.T, sb driver.Sandbox) int {
	t.Helper()
	return atoi(t, Exec(t, sb, 10*time.Second, "cat /tmp/count").Stdout)
}

// countPast reads sb's counter until it is past n, for up to 5 s, and returns the last count:
// it counts every 50 ms, but a loaded host may give it little time.
func countPast(t *testing.T, sb driver.Sandbox, n int) int {
	t.Helper()
	c := count(t, sb)
	for deadline := time.Now().Add(5 * time.Second); c <= n && time.Now().Before(deadline); c = count(t, sb) {
		time.Sleep(250 * time.Millisecond)
	}
	return c
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// dirSize is the size of the files in dir.
func dirSize(t *testing.T, dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}
