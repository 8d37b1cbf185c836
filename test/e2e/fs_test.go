package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const helloSrc = `package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("hello from rootfs")
	target := "/data.txt"
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	if err := os.WriteFile(target, []byte("written in the sandbox\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write", target+":", err)
		os.Exit(1)
	}
}
`

// buildHello builds a static program that greets and writes /data.txt.
func buildHello(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "hello")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}
	return bin
}

// TestRootfs runs a static program from a directory root filesystem as root: the write lands
// in the writable layer, never in the directory.
func TestRootfs(t *testing.T) {
	hello := buildHello(t)
	bin, err := os.ReadFile(hello)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dirs []string
		user string
	}{
		{"conventional layout, root", []string{"tmp", "proc", "dev", "etc", "workspace"}, "root"},
		// The agent may not write into a root-owned "/", only where it is given room.
		{"conventional layout, agent", []string{"tmp", "proc", "dev", "etc", "workspace"}, "agent"},
		{"only the binary", nil, "root"},
		{"with etc", []string{"etc"}, "root"},
		{"with tmp", []string{"tmp"}, "root"},
		{"with workspace", []string{"workspace"}, "root"},
		{"with proc and dev", []string{"proc", "dev"}, "root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rootfs")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "hello"), bin, 0o755); err != nil {
				t.Fatal(err)
			}
			target := "/data.txt"
			if tc.user == "agent" {
				target = "/workspace/data.txt"
				denied := runAirlock(t, nil, "run", "--rootfs", dir, "--user", "agent", "--", "/hello", "/data.txt")
				if denied.code != 1 || !strings.Contains(denied.stderr, "permission denied") {
					t.Errorf("agent wrote into the root-owned /: exit %d, stderr %q", denied.code, denied.stderr)
				}
			}
			r := runAirlock(t, nil, "run", "--rootfs", dir, "--user", tc.user, "--", "/hello", target)
			if r.code != 0 || r.stdout != "hello from rootfs\n" {
				t.Errorf("airlock run --rootfs DIR (with %v) --user %s -- /hello: exit %d, stdout %q, stderr %q; want 0, the greeting",
					tc.dirs, tc.user, r.code, r.stdout, strings.TrimSpace(r.stderr))
			}
			if _, err := os.Stat(filepath.Join(dir, target)); err == nil {
				t.Errorf("the sandbox's write reached the rootfs directory: %s exists", filepath.Join(dir, target))
			}
			var names []string
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if want := len(tc.dirs) + 1; len(names) != want {
				t.Errorf("rootfs directory changed: it holds %v", names)
			}
		})
	}
}

// TestMounts checks --ro and --rw host directories.
func TestMounts(t *testing.T) {
	ro := t.TempDir()
	rw := t.TempDir()
	// The sandbox's users are unprivileged on the host: let them read ro and write rw.
	for _, p := range []string{ro, rw} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("secret\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		user       string
		script     string
		wantCode   int
		wantStdout string
	}{
		{"ro readable", "agent", "cat /data/in.txt", 0, "secret\n"},
		{"ro: no new file", "agent", "echo x > /data/new", 2, ""},
		{"ro: no overwrite despite mode 0666", "agent", "echo x >> /data/in.txt", 2, ""},
		{"ro: no delete", "agent", "rm -f /data/in.txt", 1, ""},
		{"ro: no new file as root", "root", "echo x > /data/new", 2, ""},
		{"ro: mount flags", "agent", "grep -q ' /data ro[, ]' /proc/self/mountinfo && echo ro", 0, "ro\n"},
		{"rw writable", "agent", "echo hello > /out/agent.txt && cat /out/agent.txt", 0, "hello\n"},
		{"rw writable as root", "root", "echo hi > /out/root.txt && cat /out/root.txt", 0, "hi\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runAirlock(t, nil, "run", "--user", tc.user, "--ro", ro+":/data", "--rw", rw+":/out",
				"--", "sh", "-c", tc.script)
			if r.code != tc.wantCode || r.stdout != tc.wantStdout {
				t.Errorf("%s: exit %d, stdout %q, want %d, %q (stderr %q)", tc.script, r.code, r.stdout, tc.wantCode, tc.wantStdout, r.stderr)
			}
		})
	}
	for _, f := range []string{"agent.txt", "root.txt"} {
		if b, err := os.ReadFile(filepath.Join(rw, f)); err != nil || len(b) == 0 {
			t.Errorf("host does not see %s written through --rw: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Errorf("a write through --ro reached the host")
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "in.txt")); string(b) != "secret\n" {
		t.Errorf("host file behind --ro changed: %q", b)
	}

	// HOST alone mounts at the same path inside.
	r := runAirlock(t, nil, "run", "--ro", ro, "--", "cat", filepath.Join(ro, "in.txt"))
	if r.code != 0 || r.stdout != "secret\n" {
		t.Errorf("--ro HOST: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
