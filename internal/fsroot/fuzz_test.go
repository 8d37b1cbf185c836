package fsroot

import (
	"os"
	"path"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzResolve feeds arbitrary paths to the read operations on a root full of hostile symlinks and
// a procfs, and checks that nothing they return describes or opens a file outside the root.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	var secret unix.Stat_t
	if err := unix.Stat(fx.secret, &secret); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{
		"/", "/abs/hostname", "/abs/../../secret", "/up/secret", "/up/up/secretdir/secret2",
		"/esc/secret2", "/esc", "/outdir/secret2", "/relout", "/dirlink/../../secret",
		"/../" + fx.base + "/secret", fx.base + "/secret", fx.secret,
		"/proc/self/root" + fx.secret, "/proc/1/root/etc/passwd", "/proc/self/cwd/secret",
		"/proc/thread-self/root/etc", "/proc/self/fd/3", "/proc/self/exe", "/proc/self/status",
		"/proc/" + strconv.Itoa(os.Getpid()) + "/root" + fx.base,
	} {
		f.Add(p)
	}
	inside := func(host string) bool { return host == fx.dir || strings.HasPrefix(host, fx.dir+"/") }

	f.Fuzz(func(t *testing.T, p string) {
		if file, _, err := fx.root.Open(p); err == nil {
			var st unix.Stat_t
			must(t, unix.Fstat(int(file.Fd()), &st))
			host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(file.Fd())))
			must(t, err)
			file.Close()
			if st.Dev == secret.Dev && st.Ino == secret.Ino || !inside(host) {
				t.Fatalf("Open(%q) opened %s, outside the root %s", p, host, fx.dir)
			}
		}
		if info, err := fx.root.Stat(p); err == nil {
			if info.ModTime.Equal(secretTime) {
				t.Fatalf("Stat(%q) = %+v describes a file outside the root", p, info)
			}
			if info.Path != path.Clean(p) {
				t.Fatalf("Stat(%q).Path = %q", p, info.Path)
			}
		}
		if infos, err := fx.root.List(p); err == nil {
			for _, info := range infos {
				if info.ModTime.Equal(secretTime) {
					t.Fatalf("List(%q) has %+v, outside the root", p, info)
				}
			}
		}
	})
}
