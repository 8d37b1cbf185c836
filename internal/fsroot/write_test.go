package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/testutil"
)

// dirNames lists the host directory p, to see that a failed write left no temp file.
func dirNames(t *testing.T, p string) []string {
	t.Helper()
	entries, err := os.ReadDir(p)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	needsRoot(t)
	tests := []struct {
		name     string
		path     string
		content  string
		mode     os.FileMode
		limit    int64
		parents  bool
		prepare  func(f *fixture) // optional setup
		wantErr  error
		wantAt   string   // host path, relative to the root, where the content must land
		wantMode string   // of the new file
		absent   []string // host paths, relative to the fixture base, that must not exist after
		mounts   bool
	}{
		{name: "new file", path: "/workspace/a.txt", content: "hi", limit: -1, wantAt: "workspace/a.txt", wantMode: "0644"},
		{name: "mode", path: "/workspace/a.sh", content: "x", mode: 0o700, limit: -1, wantAt: "workspace/a.sh", wantMode: "0700"},
		{name: "setuid bit dropped", path: "/workspace/s", content: "x", mode: os.ModeSetuid | 0o755, limit: -1, wantAt: "workspace/s", wantMode: "0755"},
		{name: "exactly at limit", path: "/workspace/l", content: "12345", limit: 5, wantAt: "workspace/l", wantMode: "0644"},
		{name: "replace", path: "/etc/hostname", content: "new", limit: -1, wantAt: "etc/hostname", wantMode: "0644"},
		{name: "through symlinked dir", path: "/dirlink/b.txt", content: "b", limit: -1, wantAt: "workspace/b.txt", wantMode: "0644"},
		{name: "through absolute symlink", path: "/abs/new", content: "n", limit: -1, wantAt: "etc/new", wantMode: "0644"},
		{name: "through up symlink", path: "/up/new", content: "n", limit: -1, wantAt: "new", wantMode: "0644"},
		{name: "final symlink replaced, not followed", path: "/workspace/ln", content: "z", limit: -1,
			prepare: func(f *fixture) { must(t, os.Symlink("/etc/hostname", filepath.Join(f.dir, "workspace/ln"))) },
			wantAt:  "workspace/ln", wantMode: "0644"},
		{name: "parents through dangling symlink", path: "/outdir/new", content: "n", limit: -1, parents: true,
			wantErr: errdefs.ErrConflict, absent: []string{"secretdir/new"}},
		{name: "parents through up symlink stay inside", path: "/up/secretdir/new", content: "n", limit: -1, parents: true,
			wantAt: "secretdir/new", wantMode: "0644", absent: []string{"secretdir/new"}},
		{name: "parents", path: "/workspace/x/y/z.txt", content: "z", limit: -1, parents: true, wantAt: "workspace/x/y/z.txt", wantMode: "0644"},
		{name: "over limit", path: "/workspace/big", content: "123456", limit: 5, wantErr: errdefs.ErrTooLarge, absent: []string{"jail/root/workspace/big"}},
		{name: "over limit with parents", path: "/workspace/p/big", content: "123456", limit: 5, parents: true, wantErr: errdefs.ErrTooLarge},
		{name: "missing parent", path: "/workspace/no/a", content: "a", limit: -1, wantErr: errdefs.ErrNotFound},
		{name: "parent is a file", path: "/etc/hostname/a", content: "a", limit: -1, parents: true, wantErr: errdefs.ErrConflict},
		{name: "directory", path: "/etc", content: "a", limit: -1, wantErr: errdefs.ErrConflict},
		{name: "root", path: "/", content: "a", limit: -1, wantErr: errdefs.ErrInvalidArgument},
		{name: "escape through absolute symlink", path: "/esc/new", content: "a", limit: -1, wantErr: errdefs.ErrNotFound, absent: []string{"secretdir/new"}},
		{name: "relative path", path: "workspace/a", content: "a", limit: -1, wantErr: errdefs.ErrInvalidArgument},
		{name: "read-only mount", path: "/ro/x", content: "a", limit: -1, wantErr: errdefs.ErrConflict, mounts: true},
		{name: "magic link", path: "/proc/self/root/tmp/x", content: "a", limit: -1, wantErr: errdefs.ErrPermissionDenied, mounts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.mounts {
				f.needsMounts(t)
			}
			if tt.prepare != nil {
				tt.prepare(f)
			}
			before := dirNames(t, filepath.Join(f.dir, "workspace"))
			info, err := f.root.Write(tt.path, strings.NewReader(tt.content), tt.mode, tt.limit, tt.parents)
			checkErr(t, err, tt.wantErr)
			for _, p := range tt.absent {
				checkAbsent(t, filepath.Join(f.base, p))
			}
			if err != nil {
				if after := dirNames(t, filepath.Join(f.dir, "workspace")); !slices.Equal(before, after) {
					t.Errorf("workspace changed from %q to %q", before, after)
				}
				return
			}
			if info.Path != filepath.Clean(tt.path) || info.Type != api.FileRegular || info.Size != int64(len(tt.content)) {
				t.Errorf("info = %+v", info)
			}
			if tt.wantAt == "" {
				return
			}
			at := filepath.Join(f.dir, tt.wantAt)
			got, err := os.ReadFile(at)
			must(t, err)
			if string(got) != tt.content {
				t.Errorf("%s = %q, want %q", at, got, tt.content)
			}
			if info.Mode != tt.wantMode {
				t.Errorf("Mode = %s, want %s", info.Mode, tt.wantMode)
			}
			checkOwner(t, at)
			if tt.parents {
				checkOwner(t, filepath.Dir(at))
			}
		})
	}
}

func TestWriteReadOnlyKeepsErrno(t *testing.T) {
	f := newFixture(t)
	if !f.proc {
		testutil.RequiresRoot(t, "to make a read-only bind mount")
	}
	_, err := f.root.Write("/ro/x", strings.NewReader("a"), 0, -1, false)
	if !errors.Is(err, errdefs.ErrConflict) || !errors.Is(err, unix.EROFS) || !strings.Contains(err.Error(), "read-only file system") {
		t.Errorf("err = %v, want ErrConflict wrapping EROFS", err)
	}
}

func TestMkdir(t *testing.T) {
	needsRoot(t)
	tests := []struct {
		name    string
		path    string
		parents bool
		wantErr error
		wantAt  []string // host paths, relative to the root, of directories owned by the sandbox user
		absent  []string // relative to the fixture base
		mounts  bool
	}{
		{name: "new", path: "/workspace/d", wantAt: []string{"workspace/d"}},
		{name: "existing", path: "/workspace", wantErr: errdefs.ErrConflict},
		{name: "existing with parents", path: "/workspace", parents: true},
		{name: "root with parents", path: "/", parents: true},
		{name: "root", path: "/", wantErr: errdefs.ErrConflict},
		{name: "missing parent", path: "/workspace/p/q", wantErr: errdefs.ErrNotFound},
		{name: "parents", path: "/workspace/p/q/r", parents: true, wantAt: []string{"workspace/p", "workspace/p/q", "workspace/p/q/r"}},
		{name: "over a file", path: "/etc/hostname", parents: true, wantErr: errdefs.ErrConflict},
		{name: "below a file", path: "/etc/hostname/d", parents: true, wantErr: errdefs.ErrConflict},
		{name: "through absolute symlink", path: "/abs/d", wantAt: []string{"etc/d"}},
		{name: "through escaping symlink", path: "/esc/d", parents: true, wantErr: errdefs.ErrConflict, absent: []string{"secretdir/d"}},
		{name: "through up symlink", path: "/up/secretdir/d", parents: true, wantAt: []string{"secretdir", "secretdir/d"}, absent: []string{"secretdir/d"}},
		{name: "dangling symlink", path: "/relout/d", parents: true, wantErr: errdefs.ErrConflict},
		{name: "read-only mount", path: "/ro/d", wantErr: errdefs.ErrConflict, mounts: true},
		{name: "magic link", path: "/proc/self/root/d", parents: true, wantErr: errdefs.ErrPermissionDenied, mounts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.mounts {
				f.needsMounts(t)
			}
			info, err := f.root.Mkdir(tt.path, tt.parents)
			checkErr(t, err, tt.wantErr)
			for _, p := range tt.absent {
				checkAbsent(t, filepath.Join(f.base, p))
			}
			if err != nil {
				return
			}
			if info.Type != api.FileDir || info.Path != tt.path {
				t.Errorf("info = %+v", info)
			}
			for _, p := range tt.wantAt {
				at := filepath.Join(f.dir, p)
				checkOwner(t, at)
				if fi, err := os.Stat(at); err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("%s: %v, %v; want mode 0755", at, fi, err)
				}
			}
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		recursive bool
		wantErr   error
		gone      []string // relative to the root
		kept      []string // relative to the fixture base
		mounts    bool
	}{
		{name: "file", path: "/etc/hostname", gone: []string{"etc/hostname"}, kept: []string{"jail/root/etc/passwd"}},
		{name: "symlink, not its target", path: "/abs", gone: []string{"abs"}, kept: []string{"jail/root/etc/passwd"}},
		{name: "symlink to outside", path: "/relout", gone: []string{"relout"}, kept: []string{"secret"}},
		{name: "empty directory", path: "/workspace/tree/empty", gone: []string{"workspace/tree/empty"}},
		{name: "non-empty directory", path: "/workspace/tree", wantErr: errdefs.ErrConflict, kept: []string{"jail/root/workspace/tree/f"}},
		{name: "tree with links out", path: "/workspace/tree", recursive: true, gone: []string{"workspace/tree"},
			kept: []string{"secret", "secretdir/secret2", "jail/root/etc/passwd"}},
		{name: "tree through symlinked parent", path: "/dirlink/tree", recursive: true, gone: []string{"workspace/tree"}, kept: []string{"secretdir/secret2"}},
		{name: "symlink to directory, recursive", path: "/dirlink", recursive: true, gone: []string{"dirlink"}, kept: []string{"jail/root/workspace/tree/f"}},
		{name: "root", path: "/", recursive: true, wantErr: errdefs.ErrInvalidArgument},
		{name: "root spelled with dotdot", path: "/workspace/../..", recursive: true, wantErr: errdefs.ErrInvalidArgument},
		{name: "missing", path: "/nope", wantErr: errdefs.ErrNotFound},
		{name: "escape through absolute symlink", path: "/esc/secret2", wantErr: errdefs.ErrNotFound, kept: []string{"secretdir/secret2"}},
		{name: "escape through host path", path: "/outdir", recursive: true, gone: []string{"outdir"}, kept: []string{"secretdir/secret2"}},
		{name: "magic link", path: "/proc/self/root/" + "x", recursive: true, wantErr: errdefs.ErrPermissionDenied, mounts: true},
		{name: "mount point", path: "/ro", wantErr: errdefs.ErrConflict, mounts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.mounts {
				f.needsMounts(t)
			}
			tree := filepath.Join(f.dir, "workspace", "tree")
			for _, d := range []string{"empty", "sub/deeper"} {
				must(t, os.MkdirAll(filepath.Join(tree, d), 0o755))
			}
			for _, p := range []string{"f", "sub/g", "sub/deeper/h"} {
				must(t, os.WriteFile(filepath.Join(tree, p), []byte(p), 0o644))
			}
			must(t, os.Symlink(filepath.Join(f.base, "secretdir"), filepath.Join(tree, "hostlink")))
			must(t, os.Symlink("../../../../../secretdir", filepath.Join(tree, "sub", "rellink")))
			must(t, os.Symlink("/etc", filepath.Join(tree, "sub", "abslink")))

			err := f.root.Remove(tt.path, tt.recursive)
			checkErr(t, err, tt.wantErr)
			for _, p := range tt.gone {
				checkAbsent(t, filepath.Join(f.dir, p))
			}
			for _, p := range tt.kept {
				if _, err := os.Lstat(filepath.Join(f.base, p)); err != nil {
					t.Errorf("%s was removed: %v", p, err)
				}
			}
		})
	}
}
