package fsroot

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Ids that the tests' Roots chown to; distinct from root's so that a missed chown shows.
const (
	testUID = 1234
	testGID = 5678
)

// secretTime is the mtime of everything outside the fake sandbox root, so that a FileInfo that
// describes an outside file gives itself away.
var secretTime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a fake sandbox root with hostile symlinks, next to host files it must not reach.
type fixture struct {
	root   *Root
	dir    string // host path of the sandbox root
	base   string // host directory holding the root and the secrets
	secret string // host path of a secret file outside the root
	proc   bool   // whether a procfs is mounted at <root>/proc
}

// newFixture builds, below a temp dir:
//
//	secret                host secret file
//	secretdir/secret2     host secret directory
//	jail/root/            the sandbox root, with:
//	  etc/hostname etc/passwd workspace/ rosrc/file fifo
//	  abs -> /etc   up -> ../../..   esc -> /../../secretdir   relout -> ../../secret
//	  outdir -> <host path of secretdir>   dirlink -> workspace
//	  proc/ (a fresh procfs)   ro/ (a read-only bind mount of rosrc)
//
// The mounts need root; without it they are left out and the tests that need them skip.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "jail", "root")
	f := &fixture{dir: dir, base: base, secret: filepath.Join(base, "secret")}
	files := map[string]string{
		"secret":                 "host secret\n",
		"secretdir/secret2":      "host secret 2\n",
		"jail/root/etc/hostname": "sandbox\n",
		"jail/root/etc/passwd":   "sandbox-passwd\n",
		"jail/root/rosrc/file":   "read-only\n",
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	for _, d := range []string{"workspace", "proc", "ro"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	links := map[string]string{
		"abs":     "/etc",
		"up":      "../../..",
		"esc":     "/../../secretdir",
		"relout":  "../../secret",
		"outdir":  filepath.Join(base, "secretdir"),
		"dirlink": "workspace",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	for _, p := range []string{"secret", "secretdir/secret2", "secretdir", "jail", "."} {
		must(t, os.Chtimes(filepath.Join(base, p), secretTime, secretTime))
	}

	if os.Geteuid() == 0 {
		f.mount(t)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	f.root = New(os.NewFile(uintptr(fd), dir), testUID, testGID)
	t.Cleanup(func() { f.root.Close() })
	if _, err := f.root.Stat("/"); errors.Is(err, unix.ENOSYS) {
		t.Skipf("SKIPPING: openat2 is not available on this kernel: %v", err)
	}
	return f
}

// mount puts a procfs at <root>/proc and a read-only bind of <root>/rosrc at <root>/ro.
func (f *fixture) mount(t testing.TB) {
	proc := filepath.Join(f.dir, "proc")
	if err := unix.Mount("proc", proc, "proc", 0, ""); err != nil {
		t.Logf("cannot mount proc, magic link cases will skip: %v", err)
		return
	}
	t.Cleanup(func() { must(t, unix.Unmount(proc, unix.MNT_DETACH)) })
	ro := filepath.Join(f.dir, "ro")
	must(t, unix.Mount(filepath.Join(f.dir, "rosrc"), ro, "", unix.MS_BIND, ""))
	t.Cleanup(func() { must(t, unix.Unmount(ro, unix.MNT_DETACH)) })
	must(t, unix.Mount("", ro, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	f.proc = true
}

// needsMounts skips a case that exercises the procfs or the read-only mount.
func (f *fixture) needsMounts(t *testing.T) {
	t.Helper()
	if !f.proc {
		testutil.RequiresRoot(t, "to mount procfs and a read-only bind mount")
	}
}

// needsRoot skips a test that chowns to other users.
func needsRoot(t *testing.T) {
	t.Helper()
	testutil.RequiresRoot(t, "CAP_CHOWN, to create files owned by another user")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkErr fails unless err wraps want (nil: no error).
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

// checkOwner fails unless the host file p belongs to the test's sandbox user.
func checkOwner(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	must(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != testUID || st.Gid != testGID {
		t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, testUID, testGID)
	}
}

// checkAbsent fails if the host file p exists.
func checkAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: err = %v, want it not to exist", p, err)
	}
}

func TestOpen(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, path string
		want       string // content
		wantErr    error
		mounts     bool
	}{
		{"plain", "/etc/hostname", "sandbox\n", nil, false},
		{"absolute symlink stays in root", "/abs/hostname", "sandbox\n", nil, false},
		{"dotdot stops at root", "/../../etc/passwd", "sandbox-passwd\n", nil, false},
		{"relative symlink up stops at root", "/up/etc/passwd", "sandbox-passwd\n", nil, false},
		{"absolute symlink with dotdot", "/esc/secret2", "", errdefs.ErrNotFound, false},
		{"relative symlink to outside file", "/relout", "", errdefs.ErrNotFound, false},
		{"symlink to host path of outside dir", "/outdir/secret2", "", errdefs.ErrNotFound, false},
		{"directory", "/etc", "", errdefs.ErrInvalidArgument, false},
		{"symlink to directory", "/abs", "", errdefs.ErrInvalidArgument, false},
		{"fifo does not hang", "/fifo", "", errdefs.ErrInvalidArgument, false},
		{"missing", "/nope", "", errdefs.ErrNotFound, false},
		{"file as directory", "/etc/hostname/x", "", errdefs.ErrConflict, false},
		{"relative path", "../../etc/passwd", "", errdefs.ErrInvalidArgument, false},
		{"empty path", "", "", errdefs.ErrInvalidArgument, false},
		{"NUL byte", "/etc/passwd\x00", "", errdefs.ErrInvalidArgument, false},
		{"magic link self/root", "/proc/self/root/etc/passwd", "", errdefs.ErrPermissionDenied, true},
		{"magic link 1/root", "/proc/1/root/etc/passwd", "", errdefs.ErrPermissionDenied, true},
		{"magic link self/cwd", "/proc/self/cwd", "", errdefs.ErrPermissionDenied, true},
		{"magic link self/exe", "/proc/self/exe", "", errdefs.ErrPermissionDenied, true},
		{"ordinary proc file", "/proc/self/status", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mounts {
				f.needsMounts(t)
			}
			file, info, err := f.root.Open(tt.path)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			defer file.Close()
			got, err := io.ReadAll(file)
			must(t, err)
			if tt.want != "" && string(got) != tt.want {
				t.Errorf("content = %q, want %q", got, tt.want)
			}
			if info.Type != api.FileRegular || info.Path != filepath.Clean(tt.path) {
				t.Errorf("info = %+v", info)
			}
		})
	}
}

func TestInvalidPathIsFieldError(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"", "relative", "/a\x00b"} {
		_, err := f.root.Stat(p)
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || fe.Field != "path" {
			t.Errorf("Stat(%q) = %v, want a FieldError for path", p, err)
		}
	}
}

func TestStat(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, path string
		want       api.FileInfo // Name, Path, Type, Size, Mode, Target are compared
		wantErr    error
		mounts     bool
	}{
		{"root", "/", api.FileInfo{Name: "/", Path: "/", Type: api.FileDir, Mode: "0755"}, nil, false},
		{"file", "/etc//hostname", api.FileInfo{Name: "hostname", Path: "/etc/hostname", Type: api.FileRegular, Size: 8, Mode: "0644"}, nil, false},
		{"final symlink not followed", "/abs", api.FileInfo{Name: "abs", Path: "/abs", Type: api.FileSymlink, Size: 4, Mode: "0777", Target: "/etc"}, nil, false},
		{"symlink in parent followed in root", "/abs/passwd", api.FileInfo{Name: "passwd", Path: "/abs/passwd", Type: api.FileRegular, Size: 15, Mode: "0644"}, nil, false},
		{"fifo", "/fifo", api.FileInfo{Name: "fifo", Path: "/fifo", Type: api.FileOther, Mode: "0644"}, nil, false},
		{"escape through absolute symlink", "/esc/secret2", api.FileInfo{}, errdefs.ErrNotFound, false},
		{"escape through host path", "/outdir/secret2", api.FileInfo{}, errdefs.ErrNotFound, false},
		{"not a directory", "/etc/hostname/x", api.FileInfo{}, errdefs.ErrConflict, false},
		{"magic link in parent", "/proc/self/root/etc", api.FileInfo{}, errdefs.ErrPermissionDenied, true},
		{"magic link in parent of pid 1", "/proc/1/root/etc/passwd", api.FileInfo{}, errdefs.ErrPermissionDenied, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mounts {
				f.needsMounts(t)
			}
			info, err := f.root.Stat(tt.path)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if info.ModTime.Equal(secretTime) {
				t.Errorf("ModTime %v is that of a host file", info.ModTime)
			}
			info.ModTime = time.Time{}
			if tt.want.Type == api.FileDir {
				info.Size = 0
			}
			if info != tt.want {
				t.Errorf("info = %+v\nwant   %+v", info, tt.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.dir, "workspace", "b"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(f.dir, "workspace", "a"), 0o755))
	must(t, os.Symlink("/etc", filepath.Join(f.dir, "workspace", "c")))
	tests := []struct {
		name, path string
		want       []string // "name type [target]"
		wantErr    error
		mounts     bool
	}{
		{"directory", "/workspace", []string{"a dir", "b file", "c symlink /etc"}, nil, false},
		{"through symlink", "/dirlink", []string{"a dir", "b file", "c symlink /etc"}, nil, false},
		{"absolute symlink in root", "/abs", []string{"hostname file", "passwd file"}, nil, false},
		{"up symlink stops at root", "/up/etc", []string{"hostname file", "passwd file"}, nil, false},
		{"outside dir", "/outdir", nil, errdefs.ErrNotFound, false},
		{"file", "/etc/hostname", nil, errdefs.ErrConflict, false},
		{"magic link", "/proc/self/root", nil, errdefs.ErrPermissionDenied, true},
		{"magic link to host dir", "/proc/1/root/etc", nil, errdefs.ErrPermissionDenied, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mounts {
				f.needsMounts(t)
			}
			infos, err := f.root.List(tt.path)
			checkErr(t, err, tt.wantErr)
			var got []string
			for _, in := range infos {
				got = append(got, strings.TrimSpace(in.Name+" "+in.Type+" "+in.Target))
				if want := filepath.Join(filepath.Clean(tt.path), in.Name); in.Path != want {
					t.Errorf("Path = %q, want %q", in.Path, want)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("List = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListRootIsSorted(t *testing.T) {
	f := newFixture(t)
	infos, err := f.root.List("/")
	must(t, err)
	if !slices.IsSortedFunc(infos, func(a, b api.FileInfo) int { return strings.Compare(a.Name, b.Name) }) || len(infos) < 10 {
		t.Errorf("List(/) = %+v, want all entries sorted", infos)
	}
}
