package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/testutil"
)

// TestAsOwner checks that a root made with NewAsOwner acts with the owner's rights only: it can
// write where the owner can and creates files owned by it, and it cannot read what only host
// root could.
func TestAsOwner(t *testing.T) {
	testutil.RequiresRoot(t, "setfsuid")
	const uid, gid = 4321, 8765
	top := t.TempDir()
	must(t, os.Chmod(top, 0o755))
	home := filepath.Join(top, "home")
	must(t, os.Mkdir(home, 0o755))
	must(t, os.Chown(home, uid, gid))
	must(t, os.WriteFile(filepath.Join(top, "rootonly"), []byte("secret"), 0o600))
	dir, err := os.Open(top)
	if err != nil {
		t.Fatal(err)
	}
	r := NewAsOwner(dir, uid, gid)
	defer r.Close()

	if _, err := r.Write("/home/f", strings.NewReader("x"), 0, 10, false); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(home, "f"))
	if s := st.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid {
		t.Errorf("owner %d:%d", s.Uid, s.Gid)
	}
	if _, _, err := r.Open("/rootonly"); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("read a root-only file as the owner: %v", err)
	}
	if _, err := r.Write("/planted", strings.NewReader("x"), 0, 10, false); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("write into root's directory as the owner: %v", err)
	}
	// The thread's ids are back to root's afterwards: a plain root can still read it.
	plain, _ := os.Open(top)
	pr := New(plain, -1, -1)
	defer pr.Close()
	f, _, err := pr.Open("/rootonly")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
