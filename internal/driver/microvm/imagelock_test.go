package microvm

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/guest/vm"
	"github.com/airlockrun/airlock/internal/snapshot"
)

// TestImageCollection: the cache keeps an image a VM holds (a lock another process holds, as a
// VMM does), the current image of an airlock, one a snapshot refers to, and one used within the
// grace; it removes the rest, the references of snapshots that are gone, and what a build that
// died left; and a user of a collected image finds it gone.
func TestImageCollection(t *testing.T) {
	dir := t.TempDir()
	r := newRootImages(dir, "", "", slog.New(slog.DiscardHandler))
	old := time.Now().Add(-2 * imageGrace)
	mk := func(name string, at time.Time) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o400); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unused := mk("tpl-unused.erofs", old)
	inVM := mk("tpl-vm.erofs", old)
	recent := mk("etc-recent.erofs", time.Now())
	current := mk("tpl-current.erofs", old)
	snapped := mk("root-snapshot.erofs", old)
	deadBuild := mk(".build-tpl-x.erofs", time.Now().Add(-2*imageBuildTimeout))
	liveBuild := mk(".build-tpl-y.erofs", time.Now())

	// A VMM of another process holds its image: a shared flock on its descriptor.
	vmm := exec.Command("flock", "--shared", "--no-fork", inVM, "sleep", "600")
	if err := vmm.Start(); err != nil {
		t.Skipf("flock(1): %v", err)
	}
	defer func() { _ = vmm.Process.Kill(); _ = vmm.Wait() }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f, _ := os.Open(inVM)
		held := lockedByOthers(f)
		f.Close()
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flock(1) did not take its lock")
		}
	}
	r.hold("tpl", current)
	// A memory snapshot on its way into the store refers to its image.
	store := t.TempDir()
	mem := filepath.Join(store, "tmp", "memory-1")
	if err := os.MkdirAll(mem, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mem, fileManifest), []byte(`{"format":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.refer([]Image{{Path: snapped, Serial: vm.SerialRoot}, {Path: recent, Serial: vm.SerialEtc}}, mem); err != nil {
		t.Fatal(err)
	}

	r.collect()
	present := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for p, want := range map[string]bool{unused: false, inVM: true, recent: true, current: true, snapped: true, deadBuild: false, liveBuild: true} {
		if present(p) != want {
			t.Errorf("%s: present %v after a collection, want %v", filepath.Base(p), present(p), want)
		}
	}
	if _, err := lockImage(unused); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("locking a collected image: %v, want it gone", err)
	}

	// The snapshot is stored: its manifest moved into the store, where the reference finds it.
	ents, _ := os.ReadDir(filepath.Join(dir, refsDir, filepath.Base(snapped)))
	if len(ents) != 1 {
		t.Fatalf("%d references to the snapshot's image, want 1", len(ents))
	}
	b, _ := os.ReadFile(filepath.Join(mem, fileManifest))
	stored := snapshot.StoredPath(mem, sha256Hex(b))
	if err := os.MkdirAll(filepath.Dir(stored), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mem, fileManifest), stored); err != nil {
		t.Fatal(err)
	}
	r.collect()
	if !present(snapped) {
		t.Fatal("the image of a stored snapshot was collected")
	}
	// The snapshot is deleted, the VM ends, the airlock moves on: all of it goes.
	os.Remove(stored)
	_ = vmm.Process.Kill()
	_ = vmm.Wait()
	r.release()
	for _, p := range []string{inVM, current} { // their last use (hold touched them), a grace ago
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	r.collect()
	for _, p := range []string{snapped, inVM, current, filepath.Join(dir, refsDir, filepath.Base(snapped))} {
		if present(p) {
			t.Errorf("%s is left after everything that used it is gone", filepath.Base(p))
		}
	}
	if !present(recent) {
		t.Error("an image used within the grace was collected")
	}
}

// lockedByOthers reports whether someone holds a lock on f's file.
func lockedByOthers(f *os.File) bool {
	if f == nil {
		return false
	}
	if err := flockExNB(f); err != nil {
		return true
	}
	return false
}
