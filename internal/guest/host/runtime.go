// Package host is the host side of airlock's init: it starts init (or has a runtime start it),
// drives it over the control socket and serves a level's sandbox API with it — execs and their
// streams, terminals, limits and their events, pause, usage, files, snapshots, adoption by a
// restarted daemon. It runs in the airlock process, as host root; init itself, inside the
// sandbox, is internal/guest/pid1, and the protocol between them internal/guest.
//
// Every level that runs init goes through it, so they all behave the same from Exec on: the
// process level, which starts init in namespaces it makes, and the container level, whose OCI
// runtime starts it (Launch with a Launcher saying how). A Runtime is what those levels share in
// one airlock process: the seccomp filter init loads, the host uid ranges sandboxes' user
// namespaces map, and the host template their roots are made of.
package host

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/hosttemplate"
	"github.com/airlockrun/airlock/internal/seccomp"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Config is what a Runtime needs of airlock's configuration: the process level's settings,
// which the levels package passes on.
type Config struct {
	// UIDBase and UIDRanges are the pool of host uids (and gids) that sandboxes' ids are mapped to:
	// UIDRanges ranges of 65536 ids from the first multiple of 65536 at or above UIDBase (0:
	// uidalloc.DefaultRanges). Every live sandbox, of any level, has a range of its own, disjoint
	// from every other airlock's on the host (uids.go). No sandbox id maps to host root.
	UIDBase   uint32
	UIDRanges int
	// UIDDir holds the host-wide records of the uid allocator; empty: uidalloc.DefaultDir, which
	// every airlock on a host must share (tests of the allocator alone use another).
	UIDDir string
	// Instance names this airlock in those records; empty: uidalloc.InstanceOf(StateDir).
	Instance string
	// StateDir holds the host template's generated /etc directories.
	StateDir string
	// HostPaths are host paths (absolute, clean) the host template also binds read-only at the
	// same place, after hiding /usr/local (config hostTemplate.paths).
	HostPaths []string
}

// Runtime is the host side of airlock's init as the levels of one airlock process share it. It
// never fails to be made: what the host lacks, Checks says.
type Runtime struct {
	log      *slog.Logger
	checks   Checks
	template *hosttemplate.Host

	// filter is the seccomp program every init loads, 8 bytes per instruction, compiled once.
	filter func() ([]byte, error)

	uids     *uidalloc.Pool // the host uid ranges of sandboxes; nil when unusable (uidsErr)
	uidsErr  error
	instance string

	usedMu sync.Mutex              // guards used
	used   map[string]map[int]bool // the ranges this process allocated, by level (for leak checks)
}

// NewRuntime probes the host once and returns the runtime. Compiling the seccomp filter overlaps
// with whatever the caller does next (for a one-shot run: starting the first sandbox's init).
func NewRuntime(cfg Config, log *slog.Logger) *Runtime {
	rt := &Runtime{log: log, used: map[string]map[int]bool{}}
	rt.filter = sync.OnceValues(compileFilter)
	go func() { _, _ = rt.filter() }() // its callers get its error
	rt.uids, rt.instance, rt.uidsErr = newUIDPool(cfg)
	rt.probe(cfg)
	return rt
}

// compileFilter compiles airlock's seccomp allowlist into the bytes init loads.
func compileFilter() ([]byte, error) {
	prog, err := seccomp.Default().Compile()
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(prog)*8), nil
}

// Checks are what the host offers airlock's init, as `airlock doctor` shows them; every one is
// required.
type Checks struct {
	Root           driver.Check // root makes cgroups and maps a host uid range per sandbox
	Kernel         driver.Check // 5.10 or later
	UserNamespaces driver.Check
	Seccomp        driver.Check
	HostTemplate   driver.Check
	UIDRanges      driver.Check
}

// All lists the checks.
func (c Checks) All() []driver.Check {
	return []driver.Check{c.Root, c.Kernel, c.UserNamespaces, c.Seccomp, c.HostTemplate, c.UIDRanges}
}

// Checks are the runtime's checks of the host.
func (rt *Runtime) Checks() Checks { return rt.checks }

// Missing lists the checks that failed ("name: detail"); empty when init can run here.
func (rt *Runtime) Missing() []string {
	var out []string
	for _, ch := range rt.checks.All() {
		if !ch.OK {
			out = append(out, ch.Name+": "+ch.Detail)
		}
	}
	return out
}

// Template is the host template sandboxes' roots are made of.
func (rt *Runtime) Template() *hosttemplate.Host { return rt.template }

// probe inspects the host once: what init needs of it.
func (rt *Runtime) probe(cfg Config) {
	check := func(name string, ok bool, detail string) driver.Check {
		return driver.Check{Name: name, OK: ok, Detail: detail, Required: true}
	}
	c := &rt.checks

	root := os.Geteuid() == 0
	c.Root = check("root", root, map[bool]string{true: "running as root",
		false: "airlock creates cgroups and maps a host uid range for each sandbox: run it as root"}[root])

	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		c.Kernel = check("kernel", false, "uname: "+err.Error())
	} else {
		rel := unix.ByteSliceToString(u.Release[:])
		c.Kernel = check("kernel", kernelAtLeast(rel, 5, 10), "Linux "+rel+" (needs 5.10 or later)")
	}

	n, _ := os.ReadFile("/proc/sys/user/max_user_namespaces")
	userns := strings.TrimSpace(string(n))
	c.UserNamespaces = check("user namespaces", userns != "" && userns != "0",
		"user.max_user_namespaces = "+userns+map[bool]string{true: "", false: " (fix: sysctl -w user.max_user_namespaces=15000)"}[userns != "" && userns != "0"])

	status, _ := os.ReadFile("/proc/self/status")
	c.Seccomp = check("seccomp", strings.Contains(string(status), "Seccomp_filters:") || strings.Contains(string(status), "Seccomp:"),
		"seccomp-bpf filters ("+strconv.Itoa(len(seccomp.Blocked()))+" calls answered EPERM, unknown calls ENOSYS)")

	host, err := hosttemplate.Probe(cfg.HostPaths, cfg.StateDir)
	rt.template = host
	detail := host.Summary()
	if err != nil {
		detail = err.Error()
	}
	c.HostTemplate = check("host template", err == nil && host.Usable(), detail)

	if rt.uidsErr != nil {
		c.UIDRanges = check("uid ranges", false, rt.uidsErr.Error())
	} else {
		c.UIDRanges = check("uid ranges", true, fmt.Sprintf("a host range of %d uids per sandbox, records in %s, instance %s", uidalloc.Size, rt.uids.Dir(), rt.instance))
	}
}

func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return ma > major || ma == major && mi >= minor
}
