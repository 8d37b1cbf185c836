package mountinfo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011x\134y`: "/tab\tx\\y",
		`/trailing\04`:   `/trailing\04`,
		`/not\999octal`:  `/not\999octal`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnder(t *testing.T) {
	testutil.RequiresRoot(t, "it mounts")
	dir := filepath.Join(t.TempDir(), "with space")
	inner := filepath.Join(dir, "inner")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, inner} {
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=64k"); err != nil {
			t.Fatal(err)
		}
		// dir's tmpfs hides inner: made again for its own.
		if err := os.MkdirAll(inner, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	got := Under(dir)
	if len(got) != 2 || got[0] != inner || got[1] != dir {
		t.Fatalf("Under(%q) = %q, want deepest first [%q %q]", dir, got, inner, dir)
	}
	if n := len(Under(dir + "x")); n != 0 {
		t.Fatalf("a sibling prefix matched %d mounts", n)
	}
}
