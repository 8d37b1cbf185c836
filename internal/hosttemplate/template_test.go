package hosttemplate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/internal/hosttemplate"
)

func TestEtc(t *testing.T) {
	state := t.TempDir()
	h, err := hosttemplate.Probe(nil, state)
	if err != nil {
		t.Fatal(err)
	}
	none, err := h.Etc("")
	if err != nil {
		t.Fatal(err)
	}
	named, err := h.Etc("10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := h.Etc("")
	if none == named || again != none || filepath.Dir(none) != state {
		t.Fatalf("/etc by name server: none %s, named %s, none again %s", none, named, again)
	}
	for _, c := range []struct {
		dir, file, want string
	}{
		{none, "resolv.conf", "no name server"},
		{named, "resolv.conf", "nameserver 10.0.0.1"},
		{none, "passwd", "agent:x:1000:1000"},
		{none, "hostname", "sandbox\n"},
	} {
		b, err := os.ReadFile(filepath.Join(c.dir, c.file))
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%s/%s = %q, %v; want it to hold %q", c.dir, c.file, b, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(none, "shadow")); !os.IsNotExist(err) {
		t.Errorf("the host's /etc/shadow is in the generated /etc: %v", err)
	}
}

func TestNameFiles(t *testing.T) {
	files := hosttemplate.NameFiles("")
	if len(files) != 3 || files["/etc/passwd"] != "" || !strings.Contains(files["/etc/hosts"], "sandbox") {
		t.Fatalf("name files %v: want hostname, hosts and resolv.conf", files)
	}
}

func TestProbePaths(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		paths []string
		err   string
	}{
		{"none", nil, ""},
		{"a directory", []string{dir}, ""},
		{"missing", []string{filepath.Join(dir, "missing")}, "hostTemplate.paths"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := hosttemplate.Probe(c.paths, t.TempDir())
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Probe(%v) = %v, want error %q", c.paths, err, c.err)
			}
			if err == nil && len(h.Mounts()) < len(c.paths)+1 {
				t.Errorf("mounts %v: want the system directories and %v", h.Mounts(), c.paths)
			}
		})
	}
}
