// Package api holds the wire types of airlock's HTTP API (docs/api.md#http-api): what the daemon accepts and
// returns, shared by the daemon and the Go SDK (package client). It imports only the standard
// library, so that any Go program can use it.
package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Isolation levels (docs/levels.md#isolation-levels).
const (
	LevelProcess   = "process"
	LevelContainer = "container"
	LevelWasm      = "wasm"
	LevelMicroVM   = "microvm"
	LevelEnclave   = "enclave"
)

// Egress policies (docs/network.md#network-policy).
const (
	EgressNone       = "none"
	EgressRestricted = "restricted"
	EgressOpen       = "open"
)

// Users a sandbox's commands can run as.
const (
	UserAgent = "agent" // uid 1000 inside the sandbox
	UserRoot  = "root"  // uid 0 inside the sandbox's user namespace, no capabilities, unprivileged on the host
)

// Spec is everything a sandbox is created with: the body of POST /api/v1/sandboxes. The zero value
// of every field means "the default" (docs/levels.md#resources-and-limits).
type Spec struct {
	Name      string `json:"name,omitempty"`
	Isolation string `json:"isolation,omitempty" enum:"process,container,wasm,microvm,enclave"`
	Runtime   string `json:"runtime,omitempty" enum:"runsc,runc"` // container level: runsc or runc
	AgentID   string `json:"agentId,omitempty"`
	// Template is the root filesystem: "host" (the default) or one of the operator's templates
	// (GET /api/v1/templates). Image is the other kind of root.
	Template    string            `json:"template,omitempty"`
	Image       string            `json:"image,omitempty"`
	User        string            `json:"user,omitempty" enum:"agent,root"`
	Workdir     string            `json:"workdir,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	Resources   Resources         `json:"resources"`
	Network     Network           `json:"network"`
	Filesystem  Filesystem        `json:"filesystem"`
	// Volumes are the operator's host directories (GET /api/v1/volumes) mounted into the
	// sandbox; one not granted to the tenant is a 403.
	Volumes  []VolumeMount     `json:"volumes,omitempty"`
	Timeout  Timeout           `json:"timeout"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Agent is the process the sandbox is for (SPEC §5), started by POST .../start (or Start):
	// running while it runs, completed when it exits 0, failed (reason agent_exit) otherwise.
	// Without it, a sandbox of an image with an entrypoint or cmd has that as its agent.
	Agent *Agent `json:"agent,omitempty"`
	// Start starts the agent as soon as the sandbox is ready.
	Start bool `json:"start,omitempty"`
	// FromSnapshot starts the sandbox from a snapshot (snap_...): its level, root, user, workdir,
	// resources and filesystem are the snapshot's sandbox's, and may be left out (given, they must
	// equal them); its environment and metadata are the snapshot's, merged under the request's.
	FromSnapshot string `json:"fromSnapshot,omitempty"`

	// Binds and RootDir are host paths, which only the operator names (docs/security.md#who-is-trusted-with-what): the one-shot
	// `airlock run` sets them from --ro/--rw/--rootfs, and the daemon from the volumes and the
	// template it granted. They never cross the API in either direction.
	Binds   []Bind `json:"-"`
	RootDir string `json:"-"`
	// ID, when set, is the new sandbox's ID instead of a fresh one (sbx_ and 20 hex digits): an
	// airlock Kubernetes node makes a Pod's sandbox with the ID the front API chose
	// (docs/kubernetes.md#the-front-api). Never read from the API.
	ID string `json:"-"`
}

// Agent is a sandbox's own process: its command (a string run by /bin/sh -c, or an argv array,
// as an exec's), the variables it adds to the sandbox's environment, and its working directory
// (default the sandbox's). Its stdout and stderr are the sandbox's log; its stdin is written
// through POST .../agent/stdin.
type Agent struct {
	Command Command           `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
}

// AgentStdin is the answer of POST .../agent/stdin: how many bytes of the body were queued for
// the agent's stdin, and whether its stdin is now closed (?eof=true).
type AgentStdin struct {
	Bytes int  `json:"bytes"`
	EOF   bool `json:"eof"`
}

// VolumeMount mounts the operator's volume Name at Path inside the sandbox; ReadOnly makes a
// writable volume read-only for this sandbox (a read-only volume stays read-only).
type VolumeMount struct {
	Name     string `json:"name" openapi:"required"`
	Path     string `json:"path" openapi:"required"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Bind is a host path bound into a sandbox at Path.
type Bind struct {
	Host     string
	Path     string
	ReadOnly bool
}

// Resources are the limits of docs/levels.md#resources-and-limits. Zero means the default; a value above the maximum is an
// error, never clamped.
type Resources struct {
	CPU          VCPU  `json:"cpu,omitempty"`          // vCPUs: "2.0" or 2 in, "2.0" out
	MemoryMB     int64 `json:"memoryMb,omitempty"`     // cgroup memory limit
	DiskMB       int64 `json:"diskMb,omitempty"`       // size of the writable layer
	NetworkMbps  int64 `json:"networkMbps,omitempty"`  // egress shaping
	MaxProcesses int64 `json:"maxProcesses,omitempty"` // pids limit
	MaxOpenFiles int64 `json:"maxOpenFiles,omitempty"` // RLIMIT_NOFILE
	// GPUEnabled asks for a GPU (seed 000). false is accepted; true is refused with 422
	// gpu_unavailable, since no isolation level of airlock passes a GPU through (GET
	// /api/v1/capabilities says so: features.gpu false, with the reason).
	GPUEnabled bool `json:"gpuEnabled,omitempty"`
}

// Network is the egress policy of docs/network.md#network-policy.
type Network struct {
	EgressPolicy string `json:"egressPolicy,omitempty" enum:"none,restricted,open"`
	// AllowedDomains are the names a restricted sandbox may reach: "example.com" (that name
	// only), "*.example.com" (any name below it, not example.com itself), each optionally with
	// ":PORT" (default: ports 80 and 443).
	AllowedDomains    []string `json:"allowedDomains,omitempty"`
	BlockLocalNetwork *bool    `json:"blockLocalNetwork,omitempty"`
	// Credentials are headers the egress proxy adds to the sandbox's requests to a host; the
	// values never enter the sandbox.
	Credentials []Credential `json:"credentials,omitempty"`
}

// Credential binds a secret header to a destination host. The sandbox sends plain HTTP to
// http://HOST/ (through the proxy or directly); airlock adds the header and forwards the request
// over HTTPS to HOST:443. Exactly one of Value and Secret is set; responses never carry Value.
type Credential struct {
	Host   string `json:"host" openapi:"required"`   // exact host name, e.g. api.openai.com
	Header string `json:"header" openapi:"required"` // e.g. Authorization
	Value  string `json:"value,omitempty"`           // the header's value, given at create time
	Secret string `json:"secret,omitempty"`          // or the name of a secret in the daemon's configuration (network.secrets)
}

// Filesystem shapes the sandbox's own file tree: paths inside the sandbox (never host paths) the
// code may read but not write (ReadOnly, e.g. /workspace/data), may write (ReadWrite: created
// writable, in the writable layer), or may not reach at all (Blocked, e.g. /etc/ssh). Each is
// enforced by the kernel: a read-only bind of the sandbox's own directory, a writable directory
// of the layer, an inaccessible mount.
type Filesystem struct {
	ReadOnly  []string `json:"readOnly,omitempty"`
	ReadWrite []string `json:"readWrite,omitempty"`
	Blocked   []string `json:"blocked,omitempty"`
}

// Timeout bounds a sandbox's life.
type Timeout struct {
	MaxDurationSeconds int64 `json:"maxDurationSeconds,omitempty"`
	IdleTimeoutSeconds int64 `json:"idleTimeoutSeconds,omitempty"`
}

// Sandbox states (docs/daemon.md#lifecycle).
const (
	StatusProvisioning = "provisioning"
	StatusReady        = "ready"
	StatusRunning      = "running"
	StatusPaused       = "paused"
	StatusCompleted    = "completed"
	StatusFailed       = "failed"
	StatusTerminated   = "terminated"
)

// Sandbox is a sandbox as the API shows it.
type Sandbox struct {
	ID     string `json:"id"`
	Status string `json:"status" enum:"provisioning,ready,running,paused,completed,failed,terminated"`
	// Reason is why the sandbox entered its current status (e.g. "idle", "timeout", "daemon_restart").
	Reason    string    `json:"reason,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// ExpiresAt is when timeout.maxDurationSeconds ends the sandbox.
	ExpiresAt time.Time `json:"expiresAt"`
	// Spec is the sandbox's defaulted specification; its fields appear at the top level.
	Spec
	Endpoints   Endpoints    `json:"endpoints"`
	Transitions []Transition `json:"transitions,omitempty"`
}

// Endpoints are the sandbox's routes as absolute URLs (seed 000): exec and logs are WebSocket
// URLs (ws:// or wss://), files and metrics HTTP ones. They start with the daemon's publicUrl
// (configuration) or else the scheme and host the request reached the daemon by; the API key
// goes in the Authorization header as for every route.
type Endpoints struct {
	Exec    string `json:"exec"`
	Files   string `json:"files"`
	Logs    string `json:"logs"`
	Metrics string `json:"metrics"`
}

// Transition is one recorded change of a sandbox's status.
type Transition struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Command is a command line: an argv array, or a string that is run by /bin/sh -c.
type Command []string

// Shell returns the command that runs line with /bin/sh -c.
func Shell(line string) Command { return Command{"/bin/sh", "-c", line} }

// UnmarshalJSON accepts a string (run by /bin/sh -c) or an array of strings (argv).
func (c *Command) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = Shell(s)
		return nil
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil {
		return fmt.Errorf("command must be a string or an array of strings")
	}
	*c = argv
	return nil
}

// ExecRequest is the body of POST /api/v1/sandboxes/{id}/exec.
type ExecRequest struct {
	Command Command           `json:"command" openapi:"required"`
	Stdin   string            `json:"stdin,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// Timeout in seconds; 0 means no limit but the sandbox's own lifetime.
	Timeout float64 `json:"timeout,omitempty"`
	// CaptureOutput keeps stdout and stderr in the result (default true).
	CaptureOutput *bool `json:"captureOutput,omitempty"`
}

// LimitEvent says that a limit was hit during an exec.
type LimitEvent struct {
	Type    string    `json:"type"`
	Message string    `json:"message"`
	Count   int64     `json:"count,omitempty"` // how many times, where the kernel counts
	Time    time.Time `json:"time"`
}

// ResourceUsage is measured by the kernel, never estimated.
type ResourceUsage struct {
	PeakMemoryMB       float64 `json:"peakMemoryMb"`
	CPUTimeMs          int64   `json:"cpuTimeMs"`
	NetworkEgressBytes int64   `json:"networkEgressBytes"`
}

// ExecResult is the exec result object of docs/api.md#http-api.
type ExecResult struct {
	ExecutionID string `json:"executionId"`
	ExitCode    int    `json:"exitCode"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	DurationMs  int64  `json:"durationMs"`
	TimedOut    bool   `json:"timedOut"`
	OOMKilled   bool   `json:"oomKilled"`
	Truncated   bool   `json:"truncated"`
	// OutputDropped: the recorded output of this exec was dropped later, oldest first, to keep
	// the tenant's stored bytes within its quota (maxStoredMb). The answer had it whole.
	OutputDropped bool          `json:"outputDropped,omitempty"`
	LimitEvents   []LimitEvent  `json:"limitEvents"`
	ResourceUsage ResourceUsage `json:"resourceUsage"`
	// EndedBy says what ended the command when it was neither itself nor its own limits:
	// EndedByDaemonShutdown. Empty otherwise.
	EndedBy string `json:"endedBy,omitempty"`
}

// EndedByDaemonShutdown: the daemon's shutdown killed the command (its grace,
// server.shutdownGraceSeconds, was over); the client's connection was closed without an answer.
const EndedByDaemonShutdown = "daemon_shutdown"

// Execution is the stored record of one exec.
type Execution struct {
	ID        string      `json:"id"`
	SandboxID string      `json:"sandboxId"`
	Command   []string    `json:"command"`
	Status    string      `json:"status" enum:"running,done,lost"` // running, done, lost (the daemon stopped while it ran)
	StartedAt time.Time   `json:"startedAt"`
	EndedAt   *time.Time  `json:"endedAt,omitempty"`
	Result    *ExecResult `json:"result,omitempty"`
}

// Execution statuses.
const (
	ExecRunning = "running"
	ExecDone    = "done"
	ExecLost    = "lost"
)

// ValidName reports whether s is a valid name of the API's named things — tenants, warm pools,
// volumes, templates: 1-64 letters, digits, '.', '_' or '-' (safe in paths, headers and shells).
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
