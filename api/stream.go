package api

import "time"

// Event is something that happened to a sandbox: a lifecycle transition, an exec's start or end,
// a limit hit.
type Event struct {
	ID string `json:"id"` // evt_…
	// Seq is the event's place in the audit log, which orders every event of the daemon; it is
	// the cursor of the events API (after=, and Last-Event-ID when following).
	Seq         int64          `json:"seq,omitempty"`
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
	EventSandboxClaimed = "sandbox.claimed" // a create claimed the sandbox from a warm pool; Data: pool, warmedAt
	// EventSandboxSnapshot: a snapshot was taken; Data: snapshotId, name, memory, sizeMb.
	EventSandboxSnapshot = "sandbox.snapshot"
	// EventSandboxRestored: the sandbox's state was replaced by a snapshot's; Data: snapshotId, memory.
	EventSandboxRestored = "sandbox.restored"
	// EventAgentStarted: the sandbox's agent started (POST .../start); Data: command, workdir.
	EventAgentStarted = "sandbox.agent.started"
	// EventAgentExited: the sandbox's agent exited; Data: exitCode, durationMs, and endedBy when
	// the sandbox's end (terminate, timeout, restore) killed it rather than itself.
	EventAgentExited = "sandbox.agent.exited"
	// EventNetworkDNS is a DNS query to airlock's resolver. Data: proto, name, qtype, decision
	// (allow, deny), rule, reason, answers.
	EventNetworkDNS = "network.dns"
	// EventNetworkConnect is a connection or request through the egress proxy. Data: proto
	// (http, connect, tls, tcp), name, address, port, decision, rule, reason, bytesOut,
	// bytesIn, credentialHeader.
	EventNetworkConnect = "network.connect"
	// EventNetworkPolicy is a live change of the network policy. Data: egressPolicy,
	// allowedDomains.
	EventNetworkPolicy = "network.policy"
	// EventExecFiles lists the files an exec created, modified and deleted in the sandbox's
	// writable layer. Data: created, modified, deleted (sandbox paths, at most 1000 each),
	// nCreated, nModified, nDeleted (the full counts), truncated, and concurrentExecutions:
	// execs that started before the scan after this one's end, whose first changes may be here.
	EventExecFiles = "exec.files"
	// EventFilesChanged lists files changed between execs (through the files API, or by a
	// background process), with the same Data as exec.files and no execution ID.
	EventFilesChanged = "files.changed"
	// EventAPIRequest is an API call that changed something or was refused: who (keyId), what
	// (method, path, status, code), from where (remote, userAgent), durationMs; closedBy and
	// delivered false when the daemon's shutdown closed the connection before the answer.
	EventAPIRequest = "api.request"
	// EventDaemonStore is daemon-wide (no tenant): the daemon's store started refusing writes
	// for its disk (full or failing), or works again. Data: degraded, reason.
	EventDaemonStore = "daemon.store"
	// Limit events use the types of ExecResult.LimitEvents: limit.memory, limit.pids,
	// limit.disk, limit.timeout, ...; a sandbox ended by its maxDurationSeconds also gets a
	// limit.timeout event (Data: scope "sandbox", seconds).
)

// Replay is one sandbox's recorded history, ordered for display (GET .../replay).
type Replay struct {
	Sandbox Sandbox       `json:"sandbox"`
	Entries []ReplayEntry `json:"entries"`
	// Truncated says that the history is longer than a replay shows (100,000 events).
	Truncated bool `json:"truncated,omitempty"`
}

// ReplayEntry is one moment of a replay: an event, when it happened relative to the sandbox's
// creation, and for an exec.exited event the exec's record with its command and output.
type ReplayEntry struct {
	Seq         int64      `json:"seq"`
	Time        time.Time  `json:"time"`
	OffsetMs    int64      `json:"offsetMs"`
	Type        string     `json:"type"`
	ExecutionID string     `json:"executionId,omitempty"`
	Event       Event      `json:"event"`
	Exec        *Execution `json:"exec,omitempty"`
}

// EventPage is one page of a sandbox's recorded events.
type EventPage struct {
	Events []Event `json:"events"`
	// Next is the cursor of the following page (pass it as after=).
	Next int64 `json:"next"`
}

// AuditVerification is what GET /api/v1/audit/verify found when it walked the audit log's hash
// chain from its anchor (where retention left it) to its head: whether every event is what the
// daemon wrote, and if not the first one that is not.
type AuditVerification struct {
	// Intact is true when the whole chain checked out.
	Intact bool `json:"intact"`
	// Events is how many events were checked (before the problem, when there is one).
	Events int64 `json:"events"`
	// FromSeq and HeadSeq are the first and last sequence numbers of the chain; an event whose
	// seq lies between them is covered by this verification.
	FromSeq int64 `json:"fromSeq"`
	HeadSeq int64 `json:"headSeq"`
	// HeadHash is the chain's last hash: kept somewhere else, it makes a later rewrite of the
	// whole log visible (an external checkpoint).
	HeadHash string `json:"headHash"`
	// CheckedAt is when the walk ended. A tenant key may get an answer up to a minute old (one
	// walk serves every caller); an admin key's is fresh.
	CheckedAt time.Time `json:"checkedAt"`
	// Problem is the first bad place, when the chain is not intact.
	Problem *AuditProblem `json:"problem,omitempty"`
}

// AuditProblem is the first place where the audit log is not what the daemon wrote.
type AuditProblem struct {
	// Seq is the first bad (or first missing) event's sequence number.
	Seq int64 `json:"seq"`
	// ID is the bad event's ID, when it is there and the caller may see it (an admin key, or the
	// caller's own event).
	ID string `json:"id,omitempty"`
	// Reason says what is wrong; for another tenant's event, only that it is not the caller's.
	Reason string `json:"reason"`
}

// LogEntry is one item of GET /api/v1/sandboxes/{id}/logs: a chunk of a command's output or an
// event. Seq increases by one per entry of a sandbox, so a client can resume with ?since=Seq.
type LogEntry struct {
	Seq         int64     `json:"seq"`
	Time        time.Time `json:"time"`
	Stream      string    `json:"stream" enum:"stdout,stderr,event"` // stdout, stderr or event
	ExecutionID string    `json:"executionId,omitempty"`
	Data        string    `json:"data,omitempty"`
	Event       *Event    `json:"event,omitempty"`
	// Timestamp and Message are the line as seed 000's SDK reads it (line.timestamp,
	// line.message): Time again, and the output chunk or the event's message.
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
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
	Type        string      `json:"type" enum:"start,stdin,resize,eof,signal,started,stdout,stderr,exit,error"`
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
