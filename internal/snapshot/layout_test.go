package snapshot

import "testing"

func TestSandboxPath(t *testing.T) {
	l := Layout{Top: []string{"root", "upper", "shm", "nomap"}, At: map[string]string{"root": "/", "upper": "/", "shm": "/dev/shm", "gone": "/x"}}
	for _, c := range []struct {
		rel, want string
		ok        bool
	}{
		{"root", "/", true},
		{"upper/etc/passwd", "/etc/passwd", true},
		{"shm/seg", "/dev/shm/seg", true},
		{"shm/a/../b", "/dev/shm/b", true},
		{"upper/../shm/x", "/dev/shm/x", true},
		{"nomap/x", "", false}, // a Top entry without a sandbox path
		{"gone/x", "", false},  // a sandbox path without a Top entry
		{"work/x", "", false},
		{"../etc", "", false},
	} {
		if got, ok := l.SandboxPath(c.rel); got != c.want || ok != c.ok {
			t.Errorf("SandboxPath(%q) = %q, %v; want %q, %v", c.rel, got, ok, c.want, c.ok)
		}
	}
}
