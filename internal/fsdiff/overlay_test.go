package fsdiff

import (
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestOverlay changes a real overlay over two image layers through its merged directory, the way
// a sandbox does, and compares scans of the upper directory over the layers.
func TestOverlay(t *testing.T) {
	testutil.RequiresRoot(t, "mounts an overlay")
	dir := tmpfs(t)
	l0, l1 := dir+"/l0", dir+"/l1" // top, bottom
	layer, merged := dir+"/layer", dir+"/merged"
	for _, rel := range []string{"l1/etc/motd", "l1/etc/old", "l1/etc/hosts", "l1/srv/x", "l1/opt/app/a", "l1/opt/app/b",
		"l1/opt/app/sub/c", "l0/etc/hosts"} {
		write(rel, "image")(t, dir)
	}
	whiteoutAt("l0/etc/old")(t, dir) // the top layer deletes the bottom one's /etc/old
	for _, d := range []string{layer + "/upper", layer + "/work", merged} {
		mkdirAll(t, d)
	}
	o := "lowerdir=" + l0 + ":" + l1 + ",upperdir=" + layer + "/upper,workdir=" + layer + "/work"
	if err := unix.Mount("overlay", merged, "overlay", 0, o); err != nil {
		t.Skipf("overlay: %v", err)
	}
	defer func() { must(t, unix.Unmount(merged, unix.MNT_DETACH)) }()

	before := scan(t, layer)
	for _, op := range []fsOp{
		write("etc/motd", "edited"),                  // copied up: /etc comes with it, unchanged
		remove("srv/x"),                              // a whiteout
		remove("opt/app"), write("opt/app/a", "new"), // an opaque directory
		write("etc/new", "new"),
		chmod("etc/hosts", 0o600),
		write("etc/old", "again"), // the image had deleted it
		mkdir("data"),
	} {
		op(t, merged)
	}
	after := scan(t, layer)
	want := Changes{
		Created:  []string{"/data", "/etc/new", "/etc/old"},
		Modified: []string{"/etc/hosts", "/etc/motd", "/opt/app", "/opt/app/a"},
		Deleted:  []string{"/opt/app/b", "/opt/app/sub", "/opt/app/sub/c", "/srv/x"},
	}
	want.NCreated, want.NModified, want.NDeleted = len(want.Created), len(want.Modified), len(want.Deleted)
	if diff := diffChanges(CompareOver(before, after, []string{l0, l1}), want); diff != "" {
		t.Fatal(diff)
	}
	// From the layer alone, copy-ups look like creations.
	alone := Changes{
		Created:  []string{"/data", "/etc", "/etc/hosts", "/etc/motd", "/etc/new", "/etc/old", "/opt", "/opt/app", "/opt/app/a", "/srv"},
		Modified: []string{}, Deleted: []string{"/srv/x"}, NCreated: 10, NDeleted: 1,
	}
	if diff := diffChanges(Compare(before, after), alone); diff != "" {
		t.Fatalf("from the layer alone: %s", diff)
	}
}

// tmpfs mounts a tmpfs, as the levels' layers are, for t.
func tmpfs(t testing.TB) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256m"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	return filepath.Clean(dir)
}
