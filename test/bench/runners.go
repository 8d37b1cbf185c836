package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// workload is the program every runner starts; the runners differ only in what wraps it.
type workload struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
}

// workloads are absolute paths on purpose: the sandboxes see the host's /usr but not the
// caller's PATH (on a pyenv host "python3" would resolve to a shim outside /usr).
var workloads = map[string]workload{
	"true":   {Name: "true", Argv: []string{"/bin/true"}},
	"python": {Name: "python", Argv: []string{"/usr/bin/python3", "-c", "print(1)"}},
}

// runner is one way of starting a workload; argv is the full command line.
type runner struct {
	Name string
	Argv []string
}

// Runner names, in the order the table lists them.
const (
	runAirlock  = "airlock"
	runBwrap    = "bwrap"
	runUnshare  = "unshare"
	runBaseline = "baseline"
)

// tools are the paths of the wrappers found on this host.
type tools struct {
	Airlock, Bwrap, Unshare string
}

// findTools checks every wrapper up front, so a missing one fails before any timing starts
// rather than halfway through a long run.
func findTools(airlock string) (tools, error) {
	t := tools{Airlock: airlock}
	if fi, err := os.Stat(airlock); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return t, fmt.Errorf("airlock binary %q not found or not executable; build it with: "+
			"CGO_ENABLED=0 go build -o bin/airlock ./cmd/airlock (or pass -airlock PATH)", airlock)
	}
	var err error
	if t.Bwrap, err = exec.LookPath("bwrap"); err != nil {
		return t, errors.New("bwrap (bubblewrap) not found in PATH; install with apt-get install -y bubblewrap")
	}
	if t.Unshare, err = exec.LookPath("unshare"); err != nil {
		return t, errors.New("unshare not found in PATH; install with apt-get install -y util-linux")
	}
	return t, nil
}

// runnersFor builds the four command lines for one workload.
func runnersFor(t tools, w workload, bwrapPrefix []string) []runner {
	cat := func(a []string, b ...string) []string { return append(append([]string(nil), a...), b...) }
	return []runner{
		// The process level (airlock's default is container), otherwise its defaults on purpose:
		// the benchmark measures what a user gets with every protection on.
		{runAirlock, cat([]string{t.Airlock, "run", "--isolation", "process", "--"}, w.Argv...)},
		{runBwrap, cat(cat([]string{t.Bwrap}, bwrapPrefix...), w.Argv...)},
		// The issue specifies unshare without --user: as root that skips the user namespace,
		// which is part of why it is the cheapest wrapper.
		{runUnshare, cat([]string{t.Unshare, "--fork", "--pid", "--mount", "--net", "--ipc", "--uts"}, w.Argv...)},
		{runBaseline, cat(nil, w.Argv...)},
	}
}

// hostSystemDirs mirrors airlock's host template (internal/hosttemplate/template.go), so bwrap
// sets up the same root: read-only system directories, or symlinks where /usr is merged.
var hostSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// bwrapArgs returns bwrap's options (without the workload) matching airlock's namespaces and
// host binds. The one deliberate difference is /etc: airlock generates a minimal /etc, bwrap
// has no such feature, so it binds the host's.
func bwrapArgs() ([]string, error) {
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup", "--die-with-parent"}
	for _, p := range hostSystemDirs {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// The host has no such entry, and neither does airlock's sandbox.
		case err != nil:
			return nil, err
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, err
			}
			args = append(args, "--symlink", target, p)
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/tmp", "--dir", "/workspace", "--chdir", "/workspace",
		"--uid", "1000", "--gid", "1000")
	return args, nil
}

// parseWorkloads turns the -workloads flag into workloads, in the order given.
func parseWorkloads(s string) ([]workload, error) {
	var out []workload
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		w, ok := workloads[name]
		if !ok {
			return nil, fmt.Errorf("unknown workload %q (want true, python)", name)
		}
		if _, err := os.Stat(w.Argv[0]); err != nil {
			return nil, fmt.Errorf("workload %s needs %s: %w", name, w.Argv[0], err)
		}
		seen[name] = true
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("no workloads selected")
	}
	return out, nil
}
