package microvm

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestInitramfsPruned: the initramfs files of other builds that no airlock holds are removed
// from the state directory; the current one and one another airlock holds are kept.
func TestInitramfsPruned(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "guest")
	if err := os.WriteFile(bin, []byte("a guest binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	old, other := filepath.Join(dir, "initramfs-0ld.cpio"), filepath.Join(dir, "initramfs-0ther.cpio")
	for _, p := range []string{old, other} {
		if err := os.WriteFile(p, []byte("cpio"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	theirs, err := lockImage(other) // another airlock's current one
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	current, held, err := holdInitramfs(dir, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	pruneInitramfs(dir, current, slog.New(slog.DiscardHandler))
	for p, want := range map[string]bool{old: false, other: true, current: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
