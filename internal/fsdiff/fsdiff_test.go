package fsdiff

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/snapshot"
	"github.com/airlockrun/airlock/internal/testutil"
)

// layout is a level's: a root skeleton and an overlay upper at /, shm at /dev/shm, and work,
// which is the level's own.
var layout = snapshot.Layout{
	Top: []string{"root", "upper", "shm", "work"},
	At:  map[string]string{"root": "/", "upper": "/", "shm": "/dev/shm"},
}

// fsOp is one step on a layer directory: a path relative to it and what to do there.
type fsOp func(t *testing.T, layer string)

func write(rel, content string) fsOp {
	return func(t *testing.T, layer string) {
		p := filepath.Join(layer, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
			must(t, os.Remove(p)) // a whiteout is replaced, as overlayfs does
		}
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func mkdir(rel string) fsOp {
	return func(t *testing.T, layer string) { must(t, os.MkdirAll(filepath.Join(layer, rel), 0o755)) }
}

func remove(rel string) fsOp {
	return func(t *testing.T, layer string) { must(t, os.RemoveAll(filepath.Join(layer, rel))) }
}

func rename(from, to string) fsOp {
	return func(t *testing.T, layer string) {
		must(t, os.Rename(filepath.Join(layer, from), filepath.Join(layer, to)))
	}
}

func chmod(rel string, mode os.FileMode) fsOp {
	return func(t *testing.T, layer string) { must(t, os.Chmod(filepath.Join(layer, rel), mode)) }
}

func symlink(target, rel string) fsOp {
	return func(t *testing.T, layer string) {
		p := filepath.Join(layer, rel)
		os.Remove(p)
		must(t, os.Symlink(target, p))
	}
}

func link(from, to string) fsOp {
	return func(t *testing.T, layer string) {
		must(t, os.Link(filepath.Join(layer, from), filepath.Join(layer, to)))
	}
}

// aged sets a file's times an hour back, as if an earlier exec had written it: an edit then
// moves them whatever the clock's granularity.
func aged(rel string) fsOp {
	return func(t *testing.T, layer string) {
		old := time.Now().Add(-time.Hour)
		must(t, os.Chtimes(filepath.Join(layer, rel), old, old))
	}
}

// whiteoutAt makes an overlay whiteout (character device 0:0); it needs CAP_MKNOD.
func whiteoutAt(rel string) fsOp {
	return func(t *testing.T, layer string) {
		p := filepath.Join(layer, rel)
		os.RemoveAll(p)
		if err := unix.Mknod(p, unix.S_IFCHR|0o000, 0); err != nil {
			t.Skipf("whiteout: %v (needs CAP_MKNOD)", err)
		}
	}
}

// opaqueAt marks a directory overlay-opaque; trusted.* needs CAP_SYS_ADMIN.
func opaqueAt(rel string) fsOp {
	return func(t *testing.T, layer string) {
		if err := unix.Setxattr(filepath.Join(layer, rel), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
			t.Skipf("opaque xattr: %v (needs CAP_SYS_ADMIN and xattrs)", err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	base := []fsOp{
		write("root/tmp/keep", "same"), aged("root/tmp/keep"),
		write("root/tmp/edit", "12345"), aged("root/tmp/edit"),
		write("root/tmp/gone", "x"),
		write("root/workspace/d/f", "x"),
		mkdir("upper"), mkdir("work"), mkdir("shm"),
	}
	for _, c := range []struct {
		name        string
		setup, exec []fsOp
		created     []string
		modified    []string
		deleted     []string
	}{
		{name: "nothing"},
		{name: "create", exec: []fsOp{write("root/tmp/a", "a")}, created: []string{"/tmp/a"}},
		{name: "edit same size", exec: []fsOp{write("root/tmp/edit", "54321")}, modified: []string{"/tmp/edit"}},
		{name: "append", exec: []fsOp{write("root/tmp/edit", "123456")}, modified: []string{"/tmp/edit"}},
		{name: "delete", exec: []fsOp{remove("root/tmp/gone")}, deleted: []string{"/tmp/gone"}},
		{name: "rename", exec: []fsOp{rename("root/tmp/gone", "root/tmp/moved")},
			created: []string{"/tmp/moved"}, deleted: []string{"/tmp/gone"}},
		{name: "rename over", exec: []fsOp{rename("root/tmp/gone", "root/tmp/keep")},
			modified: []string{"/tmp/keep"}, deleted: []string{"/tmp/gone"}},
		{name: "chmod", exec: []fsOp{chmod("root/tmp/keep", 0o755)}, modified: []string{"/tmp/keep"}},
		{name: "chmod dir", exec: []fsOp{chmod("root/workspace/d", 0o700)}, modified: []string{"/workspace/d"}},
		{name: "symlink", exec: []fsOp{symlink("/etc/passwd", "root/tmp/l")}, created: []string{"/tmp/l"}},
		{name: "symlink retarget", setup: []fsOp{symlink("a", "root/tmp/l")},
			exec: []fsOp{symlink("bb", "root/tmp/l")}, modified: []string{"/tmp/l"}},
		// The target's link count, and so its ctime, moves.
		{name: "hardlink", exec: []fsOp{link("root/tmp/keep", "root/tmp/h")},
			created: []string{"/tmp/h"}, modified: []string{"/tmp/keep"}},
		{name: "dir create", exec: []fsOp{write("root/workspace/new/sub/f", "x")},
			created: []string{"/workspace/new", "/workspace/new/sub", "/workspace/new/sub/f"}},
		// Its parent's mtime moves; the parent is not itself modified.
		{name: "dir delete", exec: []fsOp{remove("root/workspace/d")},
			deleted: []string{"/workspace/d", "/workspace/d/f"}},
		{name: "dir replaced", exec: []fsOp{remove("root/workspace/d"), mkdir("root/workspace/d"), chmod("root/workspace/d", 0o700)},
			modified: []string{"/workspace/d"}, deleted: []string{"/workspace/d/f"}},
		{name: "file becomes dir", exec: []fsOp{remove("root/tmp/gone"), mkdir("root/tmp/gone")},
			modified: []string{"/tmp/gone"}},
		{name: "shm", exec: []fsOp{write("shm/seg", "x")}, created: []string{"/dev/shm/seg"}},
		{name: "the level's own is not the sandbox's", exec: []fsOp{write("work/x", "x"), write("other/y", "y")}},
		{name: "whiteout", exec: []fsOp{whiteoutAt("upper/etc")}, deleted: []string{"/etc"}},
		{name: "whiteout over a layer file", setup: []fsOp{write("upper/etc/motd", "hi")},
			exec: []fsOp{whiteoutAt("upper/etc/motd")}, deleted: []string{"/etc/motd"}},
		{name: "whiteout replaced", setup: []fsOp{mkdir("upper/etc"), whiteoutAt("upper/etc/motd")},
			exec: []fsOp{write("upper/etc/motd", "new")}, created: []string{"/etc/motd"}},
		// rm -rf /opt && mkdir /opt over an image: the whiteouts under it go with the opaque dir.
		{name: "opaque dir", setup: []fsOp{mkdir("upper/opt"), whiteoutAt("upper/opt/old"), write("upper/opt/f", "x")},
			exec:     []fsOp{remove("upper/opt"), mkdir("upper/opt"), opaqueAt("upper/opt")},
			modified: []string{"/opt"}, deleted: []string{"/opt/f"}},
		{name: "whiteout gone, not hidden", setup: []fsOp{mkdir("upper/opt"), whiteoutAt("upper/opt/old")},
			exec: []fsOp{remove("upper/opt/old")}, created: []string{"/opt/old"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			layer := t.TempDir()
			for _, op := range append(slices.Clone(base), c.setup...) {
				op(t, layer)
			}
			before := scan(t, layer)
			for _, op := range c.exec {
				op(t, layer)
			}
			got := Compare(before, scan(t, layer))
			want := Changes{Created: orEmpty(c.created), Modified: orEmpty(c.modified), Deleted: orEmpty(c.deleted),
				NCreated: len(c.created), NModified: len(c.modified), NDeleted: len(c.deleted)}
			if diff := diffChanges(got, want); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

func TestCap(t *testing.T) {
	layer := t.TempDir()
	before := scan(t, layer)
	must(t, os.MkdirAll(layer+"/root/w", 0o755))
	for i := range MaxPaths + 500 {
		must(t, os.WriteFile(fmt.Sprintf("%s/root/w/%04d", layer, i), nil, 0o644))
	}
	got := Compare(before, scan(t, layer))
	if got.NCreated != MaxPaths+501 || len(got.Created) != MaxPaths || !got.Truncated || got.Partial {
		t.Fatalf("created %d listed of %d, truncated %v, partial %v; want %d of %d, truncated",
			len(got.Created), got.NCreated, got.Truncated, got.Partial, MaxPaths, MaxPaths+501)
	}
	if got.Created[0] != "/w" || got.Created[1] != "/w/0000" || !slices.IsSorted(got.Created) {
		t.Fatalf("created %v...: want /w, /w/0000, ... sorted", got.Created[:3])
	}
}

func TestPartial(t *testing.T) {
	defer func(n int) { maxEntries = n }(maxEntries)
	maxEntries = 10
	layer := t.TempDir()
	for i := range 20 {
		must(t, os.WriteFile(fmt.Sprintf("%s/%02d", mkdirAll(t, layer+"/root"), i), nil, 0o644))
	}
	tr := scan(t, layer)
	if !tr.Partial || len(tr.Entries) != 10 {
		t.Fatalf("%d entries, partial %v; want 10, partial", len(tr.Entries), tr.Partial)
	}
	// The same ten every time: a partial scan does not make changes up.
	if c := Compare(tr, scan(t, layer)); !c.Empty() || !c.Partial {
		t.Fatalf("two partial scans of one tree: %+v", c)
	}
}

// TestScanStaysInLayer: a symlink to a directory outside and a mount point are recorded, never
// followed or entered.
func TestScanStaysInLayer(t *testing.T) {
	layer, outside := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(outside+"/secret", nil, 0o644))
	must(t, os.Symlink(outside, mkdirAll(t, layer+"/root")+"/out"))
	tr := scan(t, layer)
	if e, ok := tr.Entries["/out"]; !ok || e.Mode&unix.S_IFMT != unix.S_IFLNK || len(tr.Entries) != 1 {
		t.Fatalf("entries %v: want the symlink /out alone", keys(tr))
	}
	testutil.RequiresRoot(t, "mount points")
	mnt := mkdirAll(t, layer+"/root/mnt")
	must(t, unix.Mount(outside, mnt, "", unix.MS_BIND, ""))
	defer func() { must(t, unix.Unmount(mnt, unix.MNT_DETACH)) }()
	tr = scan(t, layer)
	if _, ok := tr.Entries["/mnt"]; !ok || len(tr.Entries) != 2 {
		t.Fatalf("entries %v: want /out and /mnt, nothing under the mount", keys(tr))
	}
}

func scan(t *testing.T, layer string) Tree {
	t.Helper()
	tr, err := Scan(layer, layout)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mkdirAll(t *testing.T, dir string) string {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

func keys(tr Tree) []string {
	ks := make([]string, 0, len(tr.Entries))
	for k := range tr.Entries {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// diffChanges says how got differs from want, "" when it does not.
func diffChanges(got, want Changes) string {
	var b strings.Builder
	for _, l := range []struct {
		name      string
		got, want []string
		n, wn     int
	}{
		{"created", got.Created, want.Created, got.NCreated, want.NCreated},
		{"modified", got.Modified, want.Modified, got.NModified, want.NModified},
		{"deleted", got.Deleted, want.Deleted, got.NDeleted, want.NDeleted},
	} {
		if !slices.Equal(l.got, l.want) || l.n != l.wn {
			fmt.Fprintf(&b, "%s: got %q (%d), want %q (%d)\n", l.name, l.got, l.n, l.want, l.wn)
		}
	}
	if got.Truncated != want.Truncated || got.Partial != want.Partial {
		fmt.Fprintf(&b, "truncated/partial: got %v/%v, want %v/%v\n", got.Truncated, got.Partial, want.Truncated, want.Partial)
	}
	return b.String()
}
