package api

import "time"

// Event is something that happened to a sandbox: a lifecycle transition, an exec's start or end,
// a limit hit.
type Event struct {
	ID          string         `json:"id"` // evt_…
	Type        string         `json:"type"`
	Time        time.Time      `json:"time"`
	SandboxID   string         `json:"sandboxId"`
	ExecutionID string         `json:"executionId,omitempty"`
	Message     string         `json:"message,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
}

// Event types.
const (
	EventSandboxStatus  = "sandbox.status"  // Data: from, to, reason
	EventExecStarted    = "exec.started"    // Data: command
	EventExecExited     = "exec.exited"     // Data: exitCode, durationMs
	EventSandboxAdopted = "sandbox.adopted" // a restarted daemon took the sandbox over; Data: status
	// Limit events use the types of ExecResult.LimitEvents: limit.memory, limit.pids, ...
)

// LogEntry is one item of GET /api/v1/sandboxes/{id}/logs: a chunk of a command's output or an
// event. Seq increases by one per entry of a sandbox, so a client can resume with ?since=Seq.
type LogEntry struct {
	Seq         int64     `json:"seq"`
	Time        time.Time `json:"time"`
	Stream      string    `json:"stream"` // stdout, stderr or event
	ExecutionID string    `json:"executionId,omitempty"`
	Data        string    `json:"data,omitempty"`
	Event       *Event    `json:"event,omitempty"`
}

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamEvent  = "event"
)

// Frame is one WebSocket message of interactive exec (GET /api/v1/sandboxes/{id}/exec). Every
// frame is a JSON text message.
//
// Client to daemon: first "start" (Start set), then any of "stdin" (Data), "resize" (Rows, Cols),
// "eof" (closes the command's stdin), "signal" (Signal, e.g. 2 for SIGINT).
// Daemon to client: "started" (ExecutionID), "stdout"/"stderr" (Data), then one "exit" (Result)
// or "error" (Error), after which the daemon closes the connection.
type Frame struct {
	Type        string      `json:"type"`
	Start       *ExecStart  `json:"start,omitempty"`
	Data        []byte      `json:"data,omitempty"` // base64 in JSON
	Rows        uint16      `json:"rows,omitempty"`
	Cols        uint16      `json:"cols,omitempty"`
	Signal      int         `json:"signal,omitempty"`
	ExecutionID string      `json:"executionId,omitempty"`
	Result      *ExecResult `json:"result,omitempty"`
	Error       *Error      `json:"error,omitempty"`
}

// Frame types.
const (
	FrameStart   = "start"
	FrameStdin   = "stdin"
	FrameResize  = "resize"
	FrameEOF     = "eof"
	FrameSignal  = "signal"
	FrameStarted = "started"
	FrameStdout  = "stdout"
	FrameStderr  = "stderr"
	FrameExit    = "exit"
	FrameError   = "error"
)

// ExecStart opens an interactive exec: the ExecRequest fields, and a PTY if TTY is set (then
// stderr is merged into stdout, as on a terminal).
type ExecStart struct {
	ExecRequest
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}
