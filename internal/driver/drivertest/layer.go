package drivertest

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/fsdiff"
	"github.com/airlockrun/airlock/internal/image/imagetest"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// testLayerChanges: on a level whose sandboxes are driver.Layerers, scans of the layer around
// an exec tell exactly the sandbox paths it created, modified and deleted, and nothing it wrote
// outside the layer (a read-write mount of a host directory).
func testLayerChanges(t *testing.T, h *Harness) {
	rw := t.TempDir()
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	sb := h.New(t, sandbox.Spec{Binds: []sandbox.Bind{{Host: rw, Path: "/out"}}})
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "echo old > /workspace/edit && echo x > /workspace/gone && mkdir /workspace/keep",
		Py: `
import os
with open("/workspace/edit", "w") as f: f.write("old\n")
with open("/workspace/gone", "w") as f: f.write("x\n")
os.mkdir("/workspace/keep")`,
	}), 0, "")
	layer := LayerOf(t, sb)
	before := ScanLayer(t, layer)
	// The edit keeps the file's size: its times tell. (/dev/shm is the kernel's: the Python form,
	// for levels that may have none, leaves it out.)
	created := []string{"/dev/shm/s", "/tmp/a", "/workspace/dir"}
	if h.Python() {
		created = created[1:]
	}
	res := h.Exec(t, sb, 10*time.Second, Script{
		Sh: "echo a > /tmp/a && echo new > /workspace/edit && rm /workspace/gone && " +
			"mkdir /workspace/dir && chmod 700 /workspace/keep && echo s > /dev/shm/s && echo host > /out/host && echo ok",
		// Where files have no modes (WASI), the directory is not modified: it says so.
		Py: pyChmod + `
with open("/tmp/a", "w") as f: f.write("a\n")
with open("/workspace/edit", "w") as f: f.write("new\n")
os.remove("/workspace/gone")
os.mkdir("/workspace/dir")
modes = chmod("/workspace/keep", 0o700)
with open("/out/host", "w") as f: f.write("host\n")
print("ok" if modes else "ok without modes")`,
	})
	modified := []string{"/workspace/edit", "/workspace/keep"}
	if h.Python() && res.Stdout == "ok without modes\n" {
		modified = modified[:1]
	} else {
		expect(t, res, 0, "ok")
	}
	ExpectChanges(t, fsdiff.CompareOver(before, ScanLayer(t, layer), layer.Lowers),
		created, modified, []string{"/workspace/gone"})
	// An exec that changes nothing changes nothing.
	before = ScanLayer(t, layer)
	expect(t, h.Exec(t, sb, 10*time.Second, Script{
		Sh: "cat /workspace/edit /tmp/a >/dev/null && ls / >/dev/null && echo ok",
		Py: `
import os
open("/workspace/edit").read(), open("/tmp/a").read(), os.listdir("/")
print("ok")`,
	}), 0, "ok")
	ExpectChanges(t, fsdiff.CompareOver(before, ScanLayer(t, layer), layer.Lowers), nil, nil, nil)
}

// pyChmod imports os and defines chmod(path, mode): os.chmod, or False where files have no
// modes to set (WASI).
const pyChmod = `
import errno, os
def chmod(path, mode):
    try:
        os.chmod(path, mode)
        # WASI's libc answers chmod with success and changes nothing: look.
        return os.stat(path).st_mode & 0o7777 == mode
    except AttributeError:
        return False
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.ENOSYS): return False
        raise
`

// LayerOf returns sb's writable layer, or skips t when its level cannot read it.
func LayerOf(t *testing.T, sb driver.Sandbox) driver.Layer {
	t.Helper()
	l, ok := sb.(driver.Layerer)
	if !ok {
		t.Skip("the level's sandboxes are no driver.Layerer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	layer, err := l.Layer(ctx)
	if errors.Is(err, errdefs.ErrUnavailable) {
		t.Skipf("the level cannot read this sandbox's layer: %v", err)
	}
	if err != nil {
		t.Fatalf("layer: %v", err)
	}
	return layer
}

// ScanLayer scans layer, as the manager does (Layer.Scan).
func ScanLayer(t *testing.T, layer driver.Layer) fsdiff.Tree {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := layer.Scan(ctx)
	if err != nil {
		t.Fatalf("scan %s: %v", layer.Dir, err)
	}
	if tr.Partial {
		t.Fatalf("scan %s: partial", layer.Dir)
	}
	return tr
}

// ExpectChanges fails t unless c lists exactly these sandbox paths.
func ExpectChanges(t *testing.T, c fsdiff.Changes, created, modified, deleted []string) {
	t.Helper()
	eq := func(got []string, n int, want []string) bool { return slices.Equal(got, want) && n == len(want) }
	if !eq(c.Created, c.NCreated, created) || !eq(c.Modified, c.NModified, modified) || !eq(c.Deleted, c.NDeleted, deleted) ||
		c.Truncated || c.Partial {
		t.Fatalf("changes: created %q, modified %q, deleted %q (truncated %v, partial %v); want created %q, modified %q, deleted %q",
			c.Created, c.Modified, c.Deleted, c.Truncated, c.Partial, created, modified, deleted)
	}
}

// ImageChangesLayer is an image layer of files in /workspace, for ExpectImageChanges: an image
// of it over a shell's (imagetest.Busybox) is what that case runs in. Owned by the host's root,
// which no level maps: writable by mode (the container level's image root is read-only but for
// the writable directories, /workspace among them).
func ImageChangesLayer(t testing.TB) v1.Layer {
	return imagetest.Layer(t,
		imagetest.Dir("workspace/", 0o755), imagetest.File("workspace/edit", "image", 0o666),
		imagetest.File("workspace/gone", "image", 0o644), imagetest.File("workspace/keep", "image", 0o644),
		imagetest.Dir("workspace/dir/", 0o777), imagetest.File("workspace/dir/a", "a", 0o644),
		imagetest.File("workspace/dir/b", "b", 0o644))
}

// ExpectImageChanges: in sb, made from an image whose top layer is ImageChangesLayer, the files
// an exec changed are told over the image's layers (layer, sb's): an image file edited (copied
// up) is modified, one removed (a whiteout) deleted, a directory removed and made again (opaque)
// hides what the image had in it, which is deleted, and a file written is created. It returns
// the scan after the exec.
func ExpectImageChanges(t *testing.T, sb driver.Sandbox, layer driver.Layer, timeout time.Duration) fsdiff.Tree {
	t.Helper()
	if len(layer.Lowers) != 2 {
		t.Fatalf("lowers %q: want the image's two layers", layer.Lowers)
	}
	before := ScanLayer(t, layer)
	res := Exec(t, sb, timeout, "echo edited > /workspace/edit && rm /workspace/gone && "+
		"rm -r /workspace/dir && mkdir /workspace/dir && echo n > /workspace/new && cat /workspace/keep")
	if res.ExitCode != 0 || res.Stdout != "image" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	after := ScanLayer(t, layer)
	ExpectChanges(t, fsdiff.CompareOver(before, after, layer.Lowers),
		[]string{"/workspace/new"}, []string{"/workspace/dir", "/workspace/edit"},
		[]string{"/workspace/dir/a", "/workspace/dir/b", "/workspace/gone"})
	return after
}
