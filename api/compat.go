package api

// The compatibility surface of SPEC §6, for agents written against the older /api/sandbox routes.

// CompatCreateRequest is the body of POST /api/sandbox/create.
type CompatCreateRequest struct {
	AgentID string       `json:"agent_id,omitempty"`
	Mode    string       `json:"mode,omitempty"` // process (default), container or wasm
	Config  CompatConfig `json:"config"`
}

// CompatConfig is the sandbox configuration of the compatibility surface.
type CompatConfig struct {
	Image      string           `json:"image,omitempty"`
	Filesystem CompatFilesystem `json:"filesystem"`
	Network    CompatNetwork    `json:"network"`
	Resources  CompatResources  `json:"resources"`
}

// CompatFilesystem maps to Filesystem.
type CompatFilesystem struct {
	ReadOnly  []string `json:"read_only,omitempty"`
	ReadWrite []string `json:"read_write,omitempty"`
	Blocked   []string `json:"blocked,omitempty"`
}

// CompatNetwork maps to Network: Allow is AllowedDomains; BlockOutbound true means egress none.
type CompatNetwork struct {
	Allow         []string `json:"allow,omitempty"`
	BlockOutbound *bool    `json:"block_outbound,omitempty"`
}

// CompatResources maps to Resources; Memory is a size such as "512m"; Timeout is the sandbox's
// maximum duration in seconds.
type CompatResources struct {
	CPU     float64 `json:"cpu,omitempty"`
	Memory  string  `json:"memory,omitempty"`
	Timeout int64   `json:"timeout,omitempty"`
}

// CompatSandbox is a sandbox as the compatibility surface shows it.
type CompatSandbox struct {
	ID        string `json:"id"`
	AgentID   string `json:"agent_id,omitempty"`
	Mode      string `json:"mode"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

// CompatRunRequest is the body of POST /api/sandbox/{id}/run: Python code to run.
type CompatRunRequest struct {
	Code    string  `json:"code"`
	Timeout float64 `json:"timeout,omitempty"` // seconds
	Async   bool    `json:"async,omitempty"`
}

// CompatRun is a run of the compatibility surface. An async run is polled with
// GET /api/sandbox/{id}/run/{runId} until Status is no longer "running".
type CompatRun struct {
	RunID  string      `json:"run_id"`
	Status string      `json:"status"` // running, done, failed
	Result *ExecResult `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}
