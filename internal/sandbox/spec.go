// Package sandbox is airlock's domain: what a sandbox is asked to be (Spec), what running a command
// in it returns (ExecResult), and the limits every isolation level enforces. It holds no mechanism;
// the drivers under internal/driver do.
package sandbox

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Isolation levels of docs/levels.md#isolation-levels.
const (
	LevelProcess   = api.LevelProcess
	LevelContainer = api.LevelContainer
	LevelWasm      = api.LevelWasm
	LevelMicroVM   = api.LevelMicroVM
	LevelEnclave   = api.LevelEnclave
)

// The container level's runtimes.
const (
	RuntimeRunsc = "runsc" // gVisor: a user-space kernel (default)
	RuntimeRunc  = "runc"
)

// DefaultIsolation is the level of a sandbox whose spec names none (docs/levels.md#isolation-levels, seed 000): gVisor's
// container. The operator may configure another (defaults.isolation); the daemon and `airlock
// run` fill it in before SetDefaults, which falls back to this one.
const DefaultIsolation = LevelContainer

// Levels are the isolation levels of docs/levels.md#isolation-levels, in the order they are presented.
var Levels = []string{LevelProcess, LevelContainer, LevelWasm, LevelMicroVM, LevelEnclave}

// Egress policies of docs/network.md#network-policy.
const (
	EgressNone       = api.EgressNone
	EgressRestricted = api.EgressRestricted
	EgressOpen       = api.EgressOpen
)

// Users a sandbox's commands can run as.
const (
	UserAgent = api.UserAgent
	UserRoot  = api.UserRoot
)

// AgentUID is the uid (and gid) of the "agent" user inside every sandbox.
const AgentUID = 1000

// The specification types are the wire types of package api, and this package owns their
// defaults and validation: call SetDefaults then Validate. Inside the daemon they have one name,
// this package's (sandbox.Spec: the manager, tenancy, the levels, the one-shot runner); api.Spec
// is said only where the JSON form crosses an edge: the HTTP server decoding a request, the
// client and the CLI's remote verbs sending one, the store's records, and the packages below
// this one (netpolicy compiles an api.Network). They are aliases, not copies, so that a spec
// crosses those edges without a conversion; should the daemon's spec ever need to differ from
// the wire's, this is the one place that turns into a type and the edges convert.
type (
	Spec       = api.Spec
	Resources  = api.Resources
	Network    = api.Network
	Credential = api.Credential
	Filesystem = api.Filesystem
	Bind       = api.Bind
	Timeout    = api.Timeout
)

// Limit is one row of the resource table: the default and the inclusive range.
type Limit struct {
	Field        string // JSON path, used in errors
	Default, Min float64
	Max          float64
	Unit         string
}

// Limits is docs/levels.md#resources-and-limits as data, so that validation, defaults, flags and docs agree.
var Limits = struct {
	CPU, MemoryMB, DiskMB, NetworkMbps, MaxProcesses, MaxOpenFiles, MaxDuration, IdleTimeout Limit
}{
	CPU:          Limit{"resources.cpu", 1.0, 0.01, 8.0, "vCPUs"},
	MemoryMB:     Limit{"resources.memoryMb", 2048, 16, 32768, "MiB"},
	DiskMB:       Limit{"resources.diskMb", 5120, 1, 51200, "MiB"},
	NetworkMbps:  Limit{"resources.networkMbps", 100, 1, 1000, "Mbit/s"},
	MaxProcesses: Limit{"resources.maxProcesses", 64, 1, 512, "processes"},
	MaxOpenFiles: Limit{"resources.maxOpenFiles", 1024, 16, 65536, "files"},
	MaxDuration:  Limit{"timeout.maxDurationSeconds", 3600, 1, 86400, "seconds"},
	IdleTimeout:  Limit{"timeout.idleTimeoutSeconds", 300, 1, 86400, "seconds"},
}

// Check reports whether v lies in the limit's range, as a *errdefs.FieldError naming the field.
func (l Limit) Check(v float64) error {
	if v < l.Min || v > l.Max {
		return errdefs.Invalid(l.Field, "must be between %s and %s %s (got %s)",
			fmtNum(l.Min), fmtNum(l.Max), l.Unit, fmtNum(v))
	}
	return nil
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// SetDefaults fills every zero field with its default.
func SetDefaults(s *Spec) {
	if s.Isolation == "" {
		s.Isolation = DefaultIsolation
	}
	if s.User == "" {
		s.User = UserAgent
	}
	if s.Workdir == "" {
		s.Workdir = "/workspace"
	}
	r := &s.Resources
	if r.CPU == 0 {
		r.CPU = api.VCPU(Limits.CPU.Default)
	}
	defInt(&r.MemoryMB, Limits.MemoryMB)
	defInt(&r.DiskMB, Limits.DiskMB)
	defInt(&r.NetworkMbps, Limits.NetworkMbps)
	defInt(&r.MaxProcesses, Limits.MaxProcesses)
	defInt(&r.MaxOpenFiles, Limits.MaxOpenFiles)
	defInt(&s.Timeout.MaxDurationSeconds, Limits.MaxDuration)
	defInt(&s.Timeout.IdleTimeoutSeconds, Limits.IdleTimeout)
	if s.Network.EgressPolicy == "" {
		s.Network.EgressPolicy = EgressNone
		if len(s.Network.AllowedDomains) > 0 {
			s.Network.EgressPolicy = EgressRestricted
		}
	}
	if s.Network.BlockLocalNetwork == nil {
		t := true
		s.Network.BlockLocalNetwork = &t
	}
}

func defInt(v *int64, l Limit) {
	if *v == 0 {
		*v = int64(l.Default)
	}
}

// Validate checks a defaulted Spec. The error is a *errdefs.FieldError naming the first bad field.
func Validate(s *Spec) error {
	if !slices.Contains(Levels, s.Isolation) {
		return errdefs.Invalid("isolation", "must be one of process, container, wasm, microvm, enclave (got %q)", s.Isolation)
	}
	switch {
	case s.Runtime != "" && s.Isolation != LevelContainer:
		return errdefs.Invalid("runtime", "runtime %q applies to isolation container only (isolation is %s)", s.Runtime, s.Isolation)
	case s.Runtime != "" && s.Runtime != RuntimeRunsc && s.Runtime != RuntimeRunc:
		return errdefs.Invalid("runtime", "must be runsc or runc (got %q)", s.Runtime)
	case s.Image != "" && (s.RootDir != "" || s.Template != "" && s.Template != TemplateHost):
		return errdefs.Invalid("image", "an image and a template are two roots; give one")
	case s.Template != "" && !api.ValidName(s.Template):
		return errdefs.Invalid("template", "%q is not a template name (1-64 letters, digits, '.', '_' or '-')", s.Template)
	}
	if s.User != UserAgent && s.User != UserRoot {
		return errdefs.Invalid("user", "must be agent or root (got %q)", s.User)
	}
	if err := checkSandboxPath("workdir", s.Workdir); err != nil {
		return err
	}
	r := s.Resources
	for _, c := range []struct {
		l Limit
		v float64
	}{
		{Limits.CPU, float64(r.CPU)}, {Limits.MemoryMB, float64(r.MemoryMB)}, {Limits.DiskMB, float64(r.DiskMB)},
		{Limits.NetworkMbps, float64(r.NetworkMbps)}, {Limits.MaxProcesses, float64(r.MaxProcesses)},
		{Limits.MaxOpenFiles, float64(r.MaxOpenFiles)},
		{Limits.MaxDuration, float64(s.Timeout.MaxDurationSeconds)},
		{Limits.IdleTimeout, float64(s.Timeout.IdleTimeoutSeconds)},
	} {
		if err := c.l.Check(c.v); err != nil {
			return err
		}
	}
	if r.GPUEnabled {
		return &errdefs.FieldError{Field: "resources.gpuEnabled", Kind: errdefs.ErrUnavailable, Code: api.CodeGPUUnavailable,
			Message: "no GPU: " + GPUUnavailableReason}
	}
	switch s.Network.EgressPolicy {
	case EgressNone, EgressRestricted, EgressOpen:
	default:
		return errdefs.Invalid("network.egressPolicy", "must be none, restricted or open (got %q)", s.Network.EgressPolicy)
	}
	if err := netpolicy.Check(s.Network); err != nil {
		return err
	}
	for k, v := range s.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errdefs.Invalid("environment", "invalid variable %q: names must be non-empty without '=' or NUL", k)
		}
	}
	return validateFiles(s)
}

// GPUUnavailableReason says why resources.gpuEnabled is refused and GET /api/v1/capabilities
// lists gpu false: no level passes a device through.
const GPUUnavailableReason = "none of airlock's isolation levels (process, container, wasm) passes a GPU into a sandbox; " +
	"send gpuEnabled false or leave it out"

// TemplateHost is the default template: the host's /usr, /bin and /lib* read-only, a generated
// /etc (docs/levels.md#filesystem).
const TemplateHost = "host"

// validateFiles checks the sandbox's file tree: filesystem paths and volume mounts are paths
// inside the sandbox, volumes name the operator's volumes, and host binds (the operator's own
// tools) are absolute and clean.
func validateFiles(s *Spec) error {
	lists := []struct {
		field string
		paths []string
	}{{"filesystem.readOnly", s.Filesystem.ReadOnly}, {"filesystem.readWrite", s.Filesystem.ReadWrite}, {"filesystem.blocked", s.Filesystem.Blocked}}
	for _, l := range lists {
		for i, p := range l.paths {
			if err := checkMountPoint(fmt.Sprintf("%s[%d]", l.field, i), p); err != nil {
				return err
			}
		}
	}
	paths := map[string]string{}
	for i, v := range s.Volumes {
		field := fmt.Sprintf("volumes[%d]", i)
		if !api.ValidName(v.Name) {
			return errdefs.Invalid(field+".name", "%q is not a volume name (1-64 letters, digits, '.', '_' or '-')", v.Name)
		}
		if err := checkMountPoint(field+".path", v.Path); err != nil {
			return err
		}
		if prev, ok := paths[v.Path]; ok {
			return errdefs.Invalid(field+".path", "%s is already the mount point of %s", v.Path, prev)
		}
		paths[v.Path] = field
	}
	for i, b := range s.Binds {
		field := fmt.Sprintf("binds[%d]", i)
		if !path.IsAbs(b.Host) || path.Clean(b.Host) != b.Host {
			return errdefs.Invalid(field, "host path %q must be absolute and clean", b.Host)
		}
		if err := checkMountPoint(field, b.Path); err != nil {
			return err
		}
	}
	if s.RootDir != "" && (!path.IsAbs(s.RootDir) || path.Clean(s.RootDir) != s.RootDir) {
		return errdefs.Invalid("rootfs", "host directory %q must be absolute and clean", s.RootDir)
	}
	return nil
}

// checkMountPoint checks a path inside the sandbox that something is mounted at or made
// read-only, writable or inaccessible: absolute and clean, not the root, not under /proc or
// /dev, and never "HOST:DEST" (the form that once named host paths).
func checkMountPoint(field, p string) error {
	if err := checkSandboxPath(field, p); err != nil {
		return err
	}
	if strings.ContainsRune(p, ':') {
		return errdefs.Invalid(field, "%q: paths here are inside the sandbox; host directories enter only as the operator's volumes (volumes: [{name, path}])", p)
	}
	if p == "/" {
		return errdefs.Invalid(field, "cannot apply to the sandbox root")
	}
	for _, q := range []string{"/proc", "/dev"} {
		if p == q || strings.HasPrefix(p, q+"/") {
			return errdefs.Invalid(field, "%s is the kernel's; it cannot be changed", q)
		}
	}
	return nil
}

// ParseBind parses the operator's "HOST[:DEST]" (airlock run --ro/--rw); DEST defaults to
// HOST. Both must be absolute and clean.
func ParseBind(field, s string, readOnly bool) (Bind, error) {
	host, dest, ok := strings.Cut(s, ":")
	if !ok {
		dest = host
	}
	if !path.IsAbs(host) || path.Clean(host) != host {
		return Bind{}, errdefs.Invalid(field, "host path %q must be absolute and clean", host)
	}
	if err := checkMountPoint(field, dest); err != nil {
		return Bind{}, err
	}
	return Bind{Host: host, Path: dest, ReadOnly: readOnly}, nil
}

func checkSandboxPath(field, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return errdefs.Invalid(field, "path %q must be absolute and clean (no '..', no trailing '/')", p)
	}
	return nil
}
