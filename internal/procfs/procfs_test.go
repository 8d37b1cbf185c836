package procfs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/airlockrun/airlock/internal/procfs"
)

func TestSelf(t *testing.T) {
	self := os.Getpid()
	start, err := procfs.StartTime(self)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"alive with its start time", procfs.Alive(self, start)},
		{"not alive with another start time", !procfs.Alive(self, start+1)},
		{"not a zombie", !procfs.Zombie(self)},
		{"comm is the executable's name (15 bytes at most)", procfs.Comm(self) == truncate(filepath.Base(exe), 15)},
		{"no comm for pid 0", procfs.Comm(0) == ""},
		{"the largest is not the skipped one", procfs.Largest(self) != self},
	} {
		if !c.ok {
			t.Errorf("%s: false", c.name)
		}
	}
	if rx, tx := procfs.NetBytes(self); rx < 0 || tx < 0 {
		t.Errorf("NetBytes = %d, %d", rx, tx)
	}
	if rx, tx := procfs.NetBytes(0); rx != 0 || tx != 0 {
		t.Errorf("NetBytes of no process = %d, %d", rx, tx)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
