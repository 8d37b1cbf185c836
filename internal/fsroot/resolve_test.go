package fsroot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/fsroot"
)

func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/lib", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"lib":         "usr/lib",     // relative
		"abs":         "/usr/lib",    // absolute: inside root, not the host's
		"escape":      "../../../..", // climbs no higher than root
		"etc/hostabs": "/etc",
		"loop":        "loop",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ p, want, err string }{
		{p: "/usr/lib/x", want: "/usr/lib/x"},
		{p: "lib/x", want: "/usr/lib/x"},
		{p: "/abs/x", want: "/usr/lib/x"},
		{p: "/escape/etc", want: "/etc"},
		{p: "/../../etc", want: "/etc"},
		{p: "/etc/hostabs/passwd", want: "/etc/passwd"},
		{p: "/new/dir", want: "/new/dir"},
		{p: "/loop/x", err: "too many symlinks"},
	} {
		got, err := fsroot.ResolveIn(root, c.p)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ResolveIn(%q) = %q, %v; want error %q", c.p, got, err, c.err)
			}
			continue
		}
		if err != nil || got != root+c.want {
			t.Errorf("ResolveIn(%q) = %q, %v; want %q", c.p, got, err, root+c.want)
		}
	}
}
