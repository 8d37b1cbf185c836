package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// mibFlag parses a size like 512M, 1G, 1.5g, 256MiB or a bare number of MiB into MiB.
type mibFlag struct{ mib *int64 }

func (f mibFlag) String() string {
	if f.mib == nil || *f.mib == 0 {
		return ""
	}
	return strconv.FormatInt(*f.mib, 10) + "M"
}

func (f mibFlag) Set(v string) error {
	n, err := parseMiB(v)
	if err != nil {
		return err
	}
	*f.mib = n
	return nil
}

func parseMiB(v string) (int64, error) { return sandbox.ParseMiB(v) }

// optionalBool is a boolean flag that may be left unset (nil): --memory, --memory=false.
type optionalBool struct{ b **bool }

func (f optionalBool) IsBoolFlag() bool { return true }

func (f optionalBool) String() string {
	if f.b == nil || *f.b == nil {
		return ""
	}
	return strconv.FormatBool(**f.b)
}

func (f optionalBool) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*f.b = &b
	return nil
}

// memoryUsage is the help of snapshot's and fork's --memory.
const memoryUsage = "save running processes and their memory (default: where the sandbox's level and runtime can; --memory=false: files only)"

// durationFlag takes a Go duration (30s, 2m) or a number of seconds.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "" // unset: the help shows the default its usage names
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		*f.d = time.Duration(n * float64(time.Second))
	} else if d, err := time.ParseDuration(v); err == nil {
		*f.d = d
	} else {
		return fmt.Errorf("%q is not a duration (examples: 30s, 5m, 90)", v)
	}
	if *f.d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

// flagForField names the CLI flag behind a spec field, so validation errors speak the user's
// language.
var flagForField = map[string]string{
	"resources.cpu": "--cpu", "resources.memoryMb": "--memory", "resources.diskMb": "--disk",
	"resources.maxProcesses": "--pids", "resources.maxOpenFiles": "--nofile",
	"timeout.maxDurationSeconds": "--timeout", "network.egressPolicy": "--network",
	"isolation": "--isolation", "user": "--user", "workdir": "--workdir", "environment": "--env",
	"rootfs": "--rootfs", "image": "--image",
}

// explicitZero reports a flag given as 0 (or less) where 0 would mean "the default": a user who
// writes --cpu 0 asked for something, and gets the range error instead of the default.
func explicitZero(fs *flag.FlagSet) error {
	explicit := map[string]sandbox.Limit{"cpu": sandbox.Limits.CPU, "pids": sandbox.Limits.MaxProcesses, "nofile": sandbox.Limits.MaxOpenFiles}
	var zeroErr error
	fs.Visit(func(f *flag.Flag) {
		if l, ok := explicit[f.Name]; ok && zeroErr == nil {
			if v, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && v <= 0 {
				zeroErr = l.Check(v)
			}
		}
	})
	return zeroErr
}

// specFlags are the flags of run and create that shape a sandbox. Unset, they leave the spec's
// fields zero, for sandbox.SetDefaults (run) or the daemon (create) to fill; the help says the
// defaults.
type specFlags struct {
	envs, ro, rw, allow, block, creds, volumes listFlag
	allowLocal                                 bool
	// host: --ro/--rw name host paths and --rootfs exists (run, the operator's shell); otherwise
	// --ro/--rw are paths inside the sandbox and host directories enter as --volume (docs/cli.md#command-line).
	host bool
}

func (f *specFlags) register(fs *flag.FlagSet, spec *sandbox.Spec) {
	r := &spec.Resources
	fs.StringVar(&spec.Isolation, "isolation", "", "isolation level: container (default: gVisor, or the config's defaults.isolation), process, wasm, microvm, enclave")
	fs.StringVar(&spec.Runtime, "runtime", "", "container runtime: runsc or runc")
	fs.Float64Var((*float64)(&r.CPU), "cpu", 0, "vCPUs, the cgroup CPU quota (default 1)")
	fs.Var(mibFlag{&r.MemoryMB}, "memory", "memory limit, e.g. 512M (default 2048M)")
	fs.Var(mibFlag{&r.DiskMB}, "disk", "size of the writable layer, e.g. 1G (default 5120M)")
	fs.Int64Var(&r.MaxProcesses, "pids", 0, "maximum processes and threads (default 64)")
	fs.Int64Var(&r.MaxOpenFiles, "nofile", 0, "maximum open files per process (default 1024)")
	fs.StringVar(&spec.Network.EgressPolicy, "network", "", "egress policy: none (default), restricted, open")
	fs.Var(&f.allow, "allow-domain", "a domain the sandbox may reach: example.com, *.example.com, example.com:8443 (repeatable; implies --network restricted)")
	fs.BoolVar(&f.allowLocal, "allow-local-network", false, "let the sandbox reach private addresses (blockLocalNetwork false); metadata addresses stay blocked")
	fs.Var(&f.creds, "credential", "HOST:HEADER:secret=NAME (a daemon secret) or HOST:HEADER:env=VAR (from this shell): a header the proxy adds to requests to http://HOST/, forwarded over HTTPS (repeatable)")
	fs.Int64Var(&r.NetworkMbps, "network-mbps", 0, "bandwidth cap in Mbit/s, each direction (default 100)")
	fs.Var(&f.envs, "env", "K=V environment variable (repeatable)")
	if f.host {
		fs.Var(&f.ro, "ro", "HOST[:DEST] mounted read-only (repeatable)")
		fs.Var(&f.rw, "rw", "HOST[:DEST] mounted read-write (repeatable)")
		fs.StringVar(&spec.RootDir, "rootfs", "", "host directory used as the root filesystem (copy-on-write)")
	} else {
		fs.Var(&f.ro, "ro", "path inside the sandbox made read-only, e.g. /workspace/data (repeatable)")
		fs.Var(&f.rw, "rw", "path inside the sandbox made writable (repeatable)")
		fs.Var(&f.volumes, "volume", "NAME:PATH[:ro] mounts the operator's volume NAME at PATH (repeatable; airlock volumes lists them)")
	}
	fs.Var(&f.block, "block", "path inside the sandbox made inaccessible (repeatable)")
	fs.StringVar(&spec.Image, "image", "", "OCI image reference for the root filesystem")
	fs.StringVar(&spec.User, "user", "", "agent (default, uid 1000) or root (uid 0 in the sandbox only)")
	fs.StringVar(&spec.Workdir, "workdir", "", "working directory inside the sandbox (default /workspace)")
}

// apply moves the repeatable network and filesystem flags into spec (the environment each verb
// parses itself).
func (f *specFlags) apply(spec *sandbox.Spec) error {
	spec.Network.AllowedDomains = f.allow
	if len(f.allow) > 0 && spec.Network.EgressPolicy == "" {
		spec.Network.EgressPolicy = sandbox.EgressRestricted
	}
	spec.Filesystem = sandbox.Filesystem{Blocked: f.block}
	if f.host {
		for i, s := range f.ro {
			b, err := sandbox.ParseBind(fmt.Sprintf("--ro[%d]", i), s, true)
			if err != nil {
				return err
			}
			spec.Binds = append(spec.Binds, b)
		}
		for i, s := range f.rw {
			b, err := sandbox.ParseBind(fmt.Sprintf("--rw[%d]", i), s, false)
			if err != nil {
				return err
			}
			spec.Binds = append(spec.Binds, b)
		}
	} else {
		spec.Filesystem.ReadOnly, spec.Filesystem.ReadWrite = f.ro, f.rw
		for i, s := range f.volumes {
			name, rest, ok := strings.Cut(s, ":")
			p, mode, _ := strings.Cut(rest, ":")
			if !ok || name == "" || p == "" || (mode != "" && mode != "ro") {
				return errdefs.Invalid(fmt.Sprintf("volumes[%d]", i), "--volume %q: want NAME:PATH or NAME:PATH:ro", s)
			}
			spec.Volumes = append(spec.Volumes, api.VolumeMount{Name: name, Path: p, ReadOnly: mode == "ro"})
		}
	}
	if f.allowLocal {
		no := false
		spec.Network.BlockLocalNetwork = &no
	}
	cs, err := f.credentials()
	spec.Network.Credentials = cs
	return err
}

// credentials parses the --credential flags.
func (f *specFlags) credentials() ([]api.Credential, error) {
	var cs []api.Credential
	for i, s := range f.creds {
		field := fmt.Sprintf("network.credentials[%d]", i)
		host, rest, ok1 := strings.Cut(s, ":")
		header, src, ok2 := strings.Cut(rest, ":")
		kind, name, ok3 := strings.Cut(src, "=")
		if !ok1 || !ok2 || !ok3 || host == "" || header == "" || name == "" {
			return nil, errdefs.Invalid(field, "%q: want HOST:HEADER:secret=NAME or HOST:HEADER:env=VAR", s)
		}
		c := api.Credential{Host: host, Header: header}
		switch kind {
		case "secret":
			c.Secret = name
		case "env":
			v, set := os.LookupEnv(name)
			if !set || v == "" {
				return nil, errdefs.Invalid(field, "environment variable %s is not set", name)
			}
			c.Value = v
		default:
			return nil, errdefs.Invalid(field, "%q: the value comes from secret=NAME or env=VAR (never the command line)", s)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// parseInterspersed parses fs's flags, which may come before or after the positional arguments
// (everything after "--" is positional), and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if len(rest) == 0 || (consumed > 0 && args[consumed-1] == "--") {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
