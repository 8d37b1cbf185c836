package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image/imagetest"
)

// TestWhiteouts: OCI whiteouts become overlayfs whiteouts, and the layers stack as overlay
// lower dirs.
func TestWhiteouts(t *testing.T) {
	requireRoot(t)
	host := imagetest.Registry(t)
	bottom := imagetest.Layer(t,
		imagetest.Dir("a/", 0o755),
		imagetest.File("a/keep", "keep", 0o644),
		imagetest.File("a/gone", "gone", 0o644),
		imagetest.Dir("opq/", 0o755),
		imagetest.File("opq/old", "old", 0o644),
		imagetest.Dir("opq/olddir/", 0o755),
	)
	top := imagetest.Layer(t,
		imagetest.Dir("a/", 0o755),
		imagetest.File("a/.wh.gone", "", 0o644),
		imagetest.Dir("opq/", 0o755),
		imagetest.File("opq/.wh..wh..opq", "", 0o644),
		imagetest.File("opq/new", "new", 0o644),
		imagetest.File("b/.wh.missing", "", 0o644), // a whiteout whose directory has no entry
	)
	ref := imagetest.PushLayers(t, host, "test/wh:v1", v1.Config{}, bottom, top)
	s := newStore(t, Options{})
	img, err := s.Pull(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := s.LayerDirs(img)
	if err != nil {
		t.Fatal(err)
	}
	upper := dirs[1]
	for _, p := range []string{"a/gone", "b/missing"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(upper, p), &st); err != nil {
			t.Fatalf("whiteout %s: %v", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("whiteout %s: mode %o rdev %d, want a char device 0:0", p, st.Mode, st.Rdev)
		}
	}
	for _, x := range opaqueXattrs {
		buf := make([]byte, 8)
		n, err := unix.Getxattr(filepath.Join(upper, "opq"), x, buf)
		if err != nil || string(buf[:n]) != "y" {
			t.Errorf("opq: %s = %q, %v; want y", x, buf[:n], err)
		}
	}
	for _, p := range []string{"a/.wh.gone", "opq/.wh..wh..opq"} {
		if _, err := os.Lstat(filepath.Join(upper, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is in the layer: %v", p, err)
		}
	}

	// They stack: overlay with lowerdir=top:bottom.
	mnt := t.TempDir()
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+dirs[1]+":"+dirs[0]); err != nil {
		t.Skipf("cannot mount overlay here: %v", err)
	}
	defer func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(filepath.Join(mnt, "a/keep")); err != nil {
		t.Errorf("a/keep: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "a/gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a/gone shows through its whiteout: %v", err)
	}
	if got := entries(t, filepath.Join(mnt, "opq")); strings.Join(got, ",") != "new" {
		t.Errorf("opaque opq lists %v, want [new]", got)
	}
}

// outside are paths hostile layers aim at; none may exist after the test.
var outside = []string{"/etc/airlock-imagetest-abs", "/etc/airlock-imagetest-passwd", "/etc/airlock-imagetest-wh",
	"/tmp/airlock-imagetest-escape", "/airlock-imagetest-up"}

func TestHostileLayers(t *testing.T) {
	requireRoot(t)
	for _, p := range outside {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists before the test; remove it", p)
		}
	}
	var shadow syscall.Stat_t
	if err := syscall.Stat("/etc/shadow", &shadow); err != nil {
		t.Fatal(err)
	}
	host := imagetest.Registry(t)

	pax := imagetest.Dir("x/", 0o755)
	pax.Format = tar.FormatPAX
	pax.PAXRecords = map[string]string{
		"SCHILY.xattr.trusted.overlay.opaque":   "y",
		"SCHILY.xattr.trusted.overlay.redirect": "/etc",
		"SCHILY.xattr.user.overlay.opaque":      "y",
		"SCHILY.xattr.user.note":                "kept",
	}
	for i, c := range []struct {
		name    string
		entries []imagetest.Entry
		fails   string // "" when the pull succeeds
		check   func(t *testing.T, layer string)
	}{
		{"dotdot", []imagetest.Entry{imagetest.File("../escape", "x", 0o644)}, "leaves the layer", nil},
		{"dotdot deep", []imagetest.Entry{imagetest.File("a/../../../../../../../../../tmp/airlock-imagetest-escape", "x", 0o644)}, "leaves the layer", nil},
		{"absolute", []imagetest.Entry{imagetest.File("/etc/airlock-imagetest-abs", "x", 0o644)}, "absolute path", nil},
		{"through a symlink to /", []imagetest.Entry{
			imagetest.Symlink("evil", "/"),
			imagetest.File("evil/etc/airlock-imagetest-passwd", "x", 0o644),
		}, "evil/etc/airlock-imagetest-passwd", nil},
		{"through a relative symlink", []imagetest.Entry{
			imagetest.Symlink("up", "../../../../../../../.."),
			imagetest.File("up/airlock-imagetest-up", "x", 0o644),
		}, "up/airlock-imagetest-up", nil},
		{"hard link to /etc/shadow", []imagetest.Entry{imagetest.Hardlink("shadow", "/etc/shadow")}, "absolute path", nil},
		{"hard link through a symlink", []imagetest.Entry{
			imagetest.Symlink("evil", "/etc"),
			imagetest.Hardlink("shadow", "evil/shadow"),
		}, "hard link", nil},
		{"whiteout through a symlink", []imagetest.Entry{
			imagetest.Symlink("evil", "/etc"),
			imagetest.File("evil/.wh.airlock-imagetest-wh", "", 0o644),
		}, "evil/.wh.airlock-imagetest-wh", nil},
		{"opaque through a symlink", []imagetest.Entry{
			imagetest.Symlink("evil", "/tmp"),
			imagetest.File("evil/.wh..wh..opq", "", 0o644),
		}, "evil/.wh..wh..opq", nil},
		{"whiteout of .", []imagetest.Entry{imagetest.File("a/.wh..", "", 0o644)}, "invalid whiteout", nil},
		{"a file replaces a symlink, never writes through it", []imagetest.Entry{
			imagetest.Symlink("passwd", "/etc/passwd"),
			imagetest.File("passwd", "mine", 0o644),
		}, "", func(t *testing.T, l string) {
			fi, err := os.Lstat(filepath.Join(l, "passwd"))
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("passwd in the layer: %v, %v", fi, err)
			}
			if b, _ := os.ReadFile("/etc/passwd"); string(b) == "mine" {
				t.Fatal("the host's /etc/passwd was overwritten")
			}
		}},
		{"devices and fifos are not created", []imagetest.Entry{
			{Header: tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}},
			{Header: tar.Header{Typeflag: tar.TypeBlock, Name: "dev/sda", Mode: 0o660, Devmajor: 8}},
			{Header: tar.Header{Typeflag: tar.TypeFifo, Name: "pipe", Mode: 0o644}},
			imagetest.File("ok", "ok", 0o644),
		}, "", func(t *testing.T, l string) {
			for _, p := range []string{"dev/null", "dev/sda", "pipe"} {
				if _, err := os.Lstat(filepath.Join(l, p)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created: %v", p, err)
				}
			}
			if _, err := os.Stat(filepath.Join(l, "ok")); err != nil {
				t.Error(err)
			}
		}},
		{"overlay xattrs are refused, user xattrs kept", []imagetest.Entry{pax}, "", func(t *testing.T, l string) {
			buf := make([]byte, 64)
			for _, x := range []string{"trusted.overlay.opaque", "trusted.overlay.redirect", "user.overlay.opaque"} {
				if _, err := unix.Getxattr(filepath.Join(l, "x"), x, buf); err == nil {
					t.Errorf("%s was set", x)
				}
			}
			if n, err := unix.Getxattr(filepath.Join(l, "x"), "user.note", buf); err != nil || string(buf[:n]) != "kept" {
				t.Errorf("user.note = %q, %v", buf[:max(n, 0)], err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := imagetest.PushLayers(t, host, "hostile/"+strconv.Itoa(i)+":v1", v1.Config{}, imagetest.Layer(t, c.entries...))
			s := newStore(t, Options{})
			img, err := s.Pull(context.Background(), ref, nil)
			if c.fails != "" {
				if err == nil || !strings.Contains(err.Error(), c.fails) {
					t.Fatalf("Pull = %v, want an error containing %q", err, c.fails)
				}
				assertClean(t, s)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				dirs, _ := s.LayerDirs(img)
				c.check(t, dirs[0])
			}
			for _, p := range outside {
				if _, err := os.Lstat(p); err == nil {
					os.Remove(p)
					t.Errorf("%s was created outside the layer", p)
				}
			}
			if es := entries(t, filepath.Dir(s.dir)); !slices.Equal(es, []string{"images"}) {
				t.Errorf("beside the store: %v", es)
			}
			var st syscall.Stat_t
			if err := syscall.Stat("/etc/shadow", &st); err != nil {
				t.Fatal(err)
			}
			if st.Nlink != shadow.Nlink {
				t.Errorf("/etc/shadow has %d links, had %d", st.Nlink, shadow.Nlink)
			}
			buf := make([]byte, 8)
			if _, err := unix.Getxattr("/tmp", "trusted.overlay.opaque", buf); err == nil {
				t.Error("/tmp was made opaque")
				if err := unix.Removexattr("/tmp", "trusted.overlay.opaque"); err != nil {
					t.Errorf("and stays so: %v", err)
				}
			}
		})
	}
}

// TestHostileIsInvalidArgument: a layer that climbs out is the image's fault.
func TestHostileIsInvalidArgument(t *testing.T) {
	for _, name := range []string{"../x", "/abs", "a/../../x"} {
		if _, err := cleanPath(name); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("cleanPath(%q) = %v, want ErrInvalidArgument", name, err)
		}
	}
	for name, want := range map[string]string{"./": ".", "a/./b/": "a/b", "a/../b": "b", ".wh..": ".wh.."} {
		if got, err := cleanPath(name); got != want || err != nil {
			t.Errorf("cleanPath(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}
