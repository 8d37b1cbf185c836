package cli

import (
	"fmt"
	"math"
	"time"

	"github.com/airlockrun/airlock/api"
)

// createFlags names create's flags behind the API fields that the shared table does not cover.
var createFlags = map[string]string{
	"name": "--name", "agentId": "--agent-id", "runtime": "--runtime", "template": "--template",
	"timeout.maxDurationSeconds": "--max-duration", "timeout.idleTimeoutSeconds": "--idle-timeout",
	"network.blockLocalNetwork": "--network",
}

// createCmd is `airlock create`: create a sandbox on the daemon and print its ID.
func createCmd(e *env, args []string) int {
	r := newRemote(e, "create", "[flags]")
	spec, asJSON, code := parseCreate(r, args)
	if code >= 0 {
		return code
	}
	if code := r.dial(); code >= 0 {
		return code
	}
	ctx, stop := interruptible()
	defer stop()
	sb, err := r.c.Create(ctx, spec)
	if err != nil {
		return r.fail(err, createFlags)
	}
	if asJSON {
		printJSON(e.stdout, sb)
	} else {
		fmt.Fprintln(e.stdout, sb.ID)
	}
	return 0
}

// parseCreate turns create's flags into a spec. Unlike run, it leaves unset fields zero, so that
// the daemon applies its own defaults and checks. code >= 0 means: exit with it.
func parseCreate(r *remote, args []string) (spec api.Spec, asJSON bool, code int) {
	fs := r.fs
	var envs, ro, rw, allow, block, meta listFlag
	var maxDuration, idle time.Duration
	res := &spec.Resources
	fs.StringVar(&spec.Name, "name", "", "a name for the sandbox")
	fs.StringVar(&spec.AgentID, "agent-id", "", "the agent the sandbox is for (list filters by it)")
	fs.Var(&meta, "metadata", "K=V metadata (repeatable)")
	fs.StringVar(&spec.Isolation, "isolation", "", "isolation level: process (default), container, wasm, microvm, enclave")
	fs.StringVar(&spec.Runtime, "runtime", "", "container runtime: runsc or runc")
	fs.Float64Var(&res.CPU, "cpu", 0, "vCPUs (default 1)")
	fs.Var(mibFlag{&res.MemoryMB}, "memory", "memory limit, e.g. 512M (default 2048M)")
	fs.Var(mibFlag{&res.DiskMB}, "disk", "size of the writable layer, e.g. 1G (default 5120M)")
	fs.Int64Var(&res.MaxProcesses, "pids", 0, "maximum processes and threads (default 64)")
	fs.Int64Var(&res.MaxOpenFiles, "nofile", 0, "maximum open files per process (default 1024)")
	fs.Var(durationFlag{&maxDuration}, "max-duration", "terminate the sandbox after this long, e.g. 30m (default 1h)")
	fs.Var(durationFlag{&maxDuration}, "timeout", "the same as --max-duration")
	fs.Var(durationFlag{&idle}, "idle-timeout", "terminate the sandbox after this long without activity (default 5m)")
	fs.StringVar(&spec.Network.EgressPolicy, "network", "", "egress policy: none (default), restricted, open")
	fs.Var(&allow, "allow-domain", "a domain the sandbox may reach (repeatable; implies --network restricted)")
	fs.Var(&envs, "env", "K=V environment variable (repeatable)")
	fs.Var(&ro, "ro", "HOST[:DEST] mounted read-only (repeatable)")
	fs.Var(&rw, "rw", "HOST[:DEST] mounted read-write (repeatable)")
	fs.Var(&block, "block", "path inside the sandbox made inaccessible (repeatable)")
	fs.StringVar(&spec.Template, "template", "", "root filesystem template (default host)")
	fs.StringVar(&spec.Image, "image", "", "OCI image reference for the root filesystem")
	fs.StringVar(&spec.Rootfs, "rootfs", "", "host directory used as the root filesystem (copy-on-write)")
	fs.StringVar(&spec.User, "user", "", "agent (default, uid 1000) or root (uid 0 in the sandbox only)")
	fs.StringVar(&spec.Workdir, "workdir", "", "working directory inside the sandbox (default /workspace)")
	fs.BoolVar(&asJSON, "json", false, "print the sandbox as JSON instead of its ID")
	pos, code := r.parse(args, true)
	if code >= 0 {
		return spec, false, code
	}
	if len(pos) > 0 {
		return spec, false, r.usageError("unexpected argument %q", pos[0])
	}
	// Zero means "the default" in the API; on the command line an explicit 0 is a mistake and
	// gets the range, as in run.
	zeroErr := explicitZero(fs)
	if zeroErr != nil {
		return spec, false, r.usageError("%s", describe(zeroErr))
	}
	var err error
	if spec.Environment, err = keyValues("env", envs); err != nil {
		return spec, false, r.usageError("%v", err)
	}
	if spec.Metadata, err = keyValues("metadata", meta); err != nil {
		return spec, false, r.usageError("%v", err)
	}
	spec.Network.AllowedDomains = allow
	if len(allow) > 0 && spec.Network.EgressPolicy == "" {
		spec.Network.EgressPolicy = api.EgressRestricted
	}
	spec.Filesystem = api.Filesystem{ReadOnly: ro, ReadWrite: rw, Blocked: block}
	spec.Timeout.MaxDurationSeconds = int64(math.Ceil(maxDuration.Seconds()))
	spec.Timeout.IdleTimeoutSeconds = int64(math.Ceil(idle.Seconds()))
	return spec, asJSON, -1
}
