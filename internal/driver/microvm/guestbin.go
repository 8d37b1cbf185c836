package microvm

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/airlockrun/airlock/internal/guest"
)

// The guest binary: what every VM runs as its PID 1 (the guest agent, internal/guest/vm) and
// re-executes as the sandbox's init (internal/guest/pid1). Any airlock binary can be it — the
// roles start before anything else (internal/entry) — but the guest pays for every package of
// the binary at each of its two starts: under TCG the Go runtime spends about 0.4 s initialising
// the daemon's packages (JSON Schema metaschemas, Prometheus, SQLite, wazero…), twice per boot.
// cmd/airlock-guest is the two roles alone (4 MB against 27 MB), and `make build` puts it beside
// airlock, where the level takes it when it is of the same build as this binary: the guest and
// the host speak a protocol of their build's (vmlink, init's configuration), which no version
// negotiates.

// GuestName is the guest binary's file name beside airlock (cmd/airlock-guest).
const GuestName = "airlock-guest"

// guestBinary decides which binary the guests run: the operator's (configured) as it is;
// else airlock-guest beside self when it is of self's build; else self. why says which and,
// when self, why not airlock-guest.
func guestBinary(configured, self string) (path, why string) {
	if configured != "" {
		return configured, "the configured guest binary"
	}
	beside := filepath.Join(filepath.Dir(self), GuestName)
	if _, err := os.Stat(beside); err != nil {
		return self, fmt.Sprintf("no %s beside %s (make build puts it there; without it each boot takes about 0.8 s more under TCG)", GuestName, self)
	}
	if err := sameBuild(self, beside); err != nil {
		return self, fmt.Sprintf("%s is not used: %v (make build builds both)", beside, err)
	}
	return beside, "of this build"
}

// sameBuild says why the guest binary at g may not be of the build of this process (whose
// binary is self), or nil: the same guest.Build (one make build), or, where no build set it, the
// same commit without local changes, Go and dependencies.
func sameBuild(self, g string) error {
	if guest.Build != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, g, guest.BuildArg).Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w", g, guest.BuildArg, err)
		}
		if b := string(bytes.TrimSpace(out)); b != guest.Build {
			return fmt.Errorf("it is of build %q, this airlock of %q", b, guest.Build)
		}
		return nil
	}
	is, err := buildinfo.ReadFile(self)
	if err != nil {
		return fmt.Errorf("build information of %s: %w", self, err)
	}
	ss := settings(is)
	if ss["vcs.revision"] == "" || ss["vcs.modified"] != "false" {
		return fmt.Errorf("this airlock was not built by make build, nor from a commit without local changes")
	}
	ig, err := buildinfo.ReadFile(g)
	if err != nil {
		return fmt.Errorf("build information: %w", err)
	}
	sg := settings(ig)
	if is.GoVersion != ig.GoVersion || is.Main != ig.Main || ss["vcs.revision"] != sg["vcs.revision"] || ss["vcs.modified"] != sg["vcs.modified"] {
		return fmt.Errorf("it is of %s %s (%s, commit %s, modified %s), this airlock of %s %s (%s, commit %s)",
			ig.Main.Path, ig.Main.Version, ig.GoVersion, sg["vcs.revision"], sg["vcs.modified"], is.Main.Path, is.Main.Version, is.GoVersion, ss["vcs.revision"])
	}
	deps := map[string]string{}
	for _, m := range is.Deps {
		deps[m.Path] = moduleVersion(m)
	}
	for _, m := range ig.Deps {
		if v, ok := deps[m.Path]; ok && v != moduleVersion(m) {
			return fmt.Errorf("its dependency %s is %s, this airlock's %s", m.Path, moduleVersion(m), v)
		}
	}
	return nil
}

func settings(info *debug.BuildInfo) map[string]string {
	m := map[string]string{}
	for _, s := range info.Settings {
		m[s.Key] = s.Value
	}
	return m
}

func moduleVersion(m *debug.Module) string {
	if m.Replace != nil {
		return m.Replace.Path + "@" + m.Replace.Version + " " + m.Replace.Sum
	}
	return m.Version + " " + m.Sum
}
