package api

// The compatibility surface of docs/api.md#http-api (seed 002), for agents written against the /api/sandbox
// routes. It answers bare objects in snake_case, not the {ok, data} envelope: a success is the
// object itself, a failure {"error": {"code", "message", "field"}} (CompatError) with the same
// codes and HTTP statuses as the rest of the API, and a delete 204 with no body.

// CompatCreateRequest is the body of POST /api/sandbox/create.
type CompatCreateRequest struct {
	AgentID string `json:"agent_id,omitempty"`
	// Mode is container (the default: the daemon's default level, container unless the
	// operator configured another) or wasm; process is accepted too.
	Mode   string       `json:"mode,omitempty" enum:"container,wasm,process"`
	Config CompatConfig `json:"config"`
}

// CompatConfig is the sandbox configuration of the compatibility surface.
type CompatConfig struct {
	// Image must be an approved image: one the operator pulled or allowed (images.allowed).
	Image      string           `json:"image,omitempty"`
	Filesystem CompatFilesystem `json:"filesystem"`
	Network    CompatNetwork    `json:"network"`
	Resources  CompatResources  `json:"resources"`
}

// CompatFilesystem maps to Filesystem: paths inside the sandbox, never host paths.
type CompatFilesystem struct {
	ReadOnly  []string `json:"read_only,omitempty"`
	ReadWrite []string `json:"read_write,omitempty"`
	Blocked   []string `json:"blocked,omitempty"`
}

// CompatNetwork maps to Network: Allow is AllowedDomains (egress restricted to them);
// BlockOutbound true without Allow is egress none, false is egress open.
type CompatNetwork struct {
	Allow         []string `json:"allow,omitempty"`
	BlockOutbound *bool    `json:"block_outbound,omitempty"`
}

// CompatMaxTimeout caps config.resources.timeout, in seconds (seed 002).
const CompatMaxTimeout = 3600

// CompatResources maps to Resources; CPU is "0.5" (a number is accepted too), Memory a size such
// as "512m"; Timeout destroys the sandbox after this many seconds (at most CompatMaxTimeout;
// default timeout.maxDurationSeconds' 3600).
type CompatResources struct {
	CPU     VCPU   `json:"cpu,omitempty"`
	Memory  string `json:"memory,omitempty"`
	Timeout int64  `json:"timeout,omitempty"`
}

// Statuses of the compatibility surface (seed 002): provisioning, ready and running as in
// docs/daemon.md#lifecycle; destroyed for terminated (and completed: its agent finished, nothing more runs in it);
// error for failed. A paused sandbox shows running.
const (
	CompatStatusDestroyed = "destroyed"
	CompatStatusError     = "error"
)

// CompatSandbox is a sandbox as the compatibility surface shows it (seed 002's create answer).
// Times are RFC 3339 in UTC, to the second.
type CompatSandbox struct {
	ID        string `json:"sandbox_id"`
	Status    string `json:"status" enum:"provisioning,ready,running,destroyed,error"`
	Mode      string `json:"mode"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at"`
	// Reason says why a destroyed sandbox ended or an errored one failed ("terminated",
	// "timeout", "idle", the error); absent otherwise.
	Reason string `json:"reason,omitempty"`
}

// Run timeouts of the compatibility surface, in seconds (seed 002).
const (
	CompatRunTimeoutDefault = 30
	CompatRunTimeoutMax     = 600
)

// CompatRunRequest is the body of POST /api/sandbox/{id}/run: Python code to run.
type CompatRunRequest struct {
	Code string `json:"code" openapi:"required"`
	// Timeout is the run's, in seconds: default CompatRunTimeoutDefault, at most
	// CompatRunTimeoutMax. A run past it is killed (result.timed_out).
	Timeout int64 `json:"timeout,omitempty"`
	// Async answers at once (202) with the run's ID, to poll with GET .../run/{run_id}.
	Async bool `json:"async,omitempty"`
}

// CompatRun is a run of the compatibility surface. An async run is polled with
// GET /api/sandbox/{id}/run/{run_id} until Status is no longer "running".
type CompatRun struct {
	RunID  string        `json:"run_id"`
	Status string        `json:"status" enum:"running,done,failed"` // running, done, failed
	Result *CompatResult `json:"result,omitempty"`
	Error  string        `json:"error,omitempty"` // why a failed run has no result
}

// CompatResult is a finished run's outcome.
type CompatResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	DurationMs int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	OOMKilled  bool   `json:"oom_killed"`
	Truncated  bool   `json:"truncated"`
}

// CompatError is the body of a failed request on the compatibility surface.
type CompatError struct {
	Error Error `json:"error"`
}
