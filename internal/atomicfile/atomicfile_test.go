package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: the file holds the new content with its mode, and no temporary file is left;
// a write into a directory that is not there fails and leaves the old file as it was.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o644 {
		t.Fatalf("after the write: %q %v %v", b, fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left in the directory: %v", ents)
	}
	if err := WriteFile(filepath.Join(dir, "no", "f"), []byte("x"), 0o644); err == nil {
		t.Fatal("a write into a missing directory worked")
	}
}
