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

// Isolation levels of SPEC §1.
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

// Levels are the isolation levels of SPEC §1, in the order they are presented.
var Levels = []string{LevelProcess, LevelContainer, LevelWasm, LevelMicroVM, LevelEnclave}

// Egress policies of SPEC §4.
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

// The specification types are the wire types of package api; this package owns their defaults
// and validation. Call SetDefaults then Validate.
type (
	Spec       = api.Spec
	Resources  = api.Resources
	Network    = api.Network
	Credential = api.Credential
	Filesystem = api.Filesystem
	Timeout    = api.Timeout
)

// Limit is one row of the resource table: the default and the inclusive range.
type Limit struct {
	Field        string // JSON path, used in errors
	Default, Min float64
	Max          float64
	Unit         string
}

// Limits is SPEC §2 as data, so that validation, defaults, flags and docs agree.
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
		s.Isolation = LevelProcess
	}
	if s.User == "" {
		s.User = UserAgent
	}
	if s.Workdir == "" {
		s.Workdir = "/workspace"
	}
	r := &s.Resources
	if r.CPU == 0 {
		r.CPU = Limits.CPU.Default
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
	case s.Image != "" && s.Rootfs != "":
		return errdefs.Invalid("image", "image and rootfs are two templates; give one")
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
		{Limits.CPU, r.CPU}, {Limits.MemoryMB, float64(r.MemoryMB)}, {Limits.DiskMB, float64(r.DiskMB)},
		{Limits.NetworkMbps, float64(r.NetworkMbps)}, {Limits.MaxProcesses, float64(r.MaxProcesses)},
		{Limits.MaxOpenFiles, float64(r.MaxOpenFiles)},
		{Limits.MaxDuration, float64(s.Timeout.MaxDurationSeconds)},
		{Limits.IdleTimeout, float64(s.Timeout.IdleTimeoutSeconds)},
	} {
		if err := c.l.Check(c.v); err != nil {
			return err
		}
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
	for i, m := range s.Filesystem.ReadOnly {
		if _, err := ParseMount(fmt.Sprintf("filesystem.readOnly[%d]", i), m, true); err != nil {
			return err
		}
	}
	for i, m := range s.Filesystem.ReadWrite {
		if _, err := ParseMount(fmt.Sprintf("filesystem.readWrite[%d]", i), m, false); err != nil {
			return err
		}
	}
	for i, p := range s.Filesystem.Blocked {
		if err := checkSandboxPath(fmt.Sprintf("filesystem.blocked[%d]", i), p); err != nil {
			return err
		}
	}
	return nil
}

// Mount is a host path bound into the sandbox.
type Mount struct {
	Host, Dest string
	ReadOnly   bool
}

// ParseMount parses "HOST[:DEST]"; DEST defaults to HOST. Both must be absolute and clean.
func ParseMount(field, s string, readOnly bool) (Mount, error) {
	host, dest, ok := strings.Cut(s, ":")
	if !ok {
		dest = host
	}
	if !path.IsAbs(host) || path.Clean(host) != host {
		return Mount{}, errdefs.Invalid(field, "host path %q must be absolute and clean", host)
	}
	if err := checkSandboxPath(field, dest); err != nil {
		return Mount{}, err
	}
	if dest == "/" {
		return Mount{}, errdefs.Invalid(field, "cannot mount over the sandbox root")
	}
	return Mount{Host: host, Dest: dest, ReadOnly: readOnly}, nil
}

func checkSandboxPath(field, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return errdefs.Invalid(field, "path %q must be absolute and clean (no '..', no trailing '/')", p)
	}
	return nil
}
