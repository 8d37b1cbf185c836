package sandbox

import (
	"fmt"
	"slices"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// The lifecycle of docs/daemon.md#lifecycle:
//
//	provisioning → ready → running → (paused ⇄ running) → completed | failed → terminated
//	ready → terminated; ready → paused; any non-terminal state → failed → terminated
//	running | paused → ready: restored from a snapshot
//
// ready means created and never used; the first exec (or resume) makes a sandbox running, and it
// stays running between execs. completed and failed are ends: the sandbox's host resources are
// released on entering them. terminated is final; the record is kept.
var next = map[string][]string{
	api.StatusProvisioning: {api.StatusReady, api.StatusFailed},
	api.StatusReady:        {api.StatusRunning, api.StatusPaused, api.StatusTerminated, api.StatusFailed},
	api.StatusRunning:      {api.StatusPaused, api.StatusCompleted, api.StatusFailed, api.StatusReady},
	api.StatusPaused:       {api.StatusRunning, api.StatusCompleted, api.StatusFailed, api.StatusReady},
	api.StatusCompleted:    {api.StatusTerminated},
	api.StatusFailed:       {api.StatusTerminated},
	api.StatusTerminated:   nil,
}

// CanTransition reports whether a sandbox may go from one status to another.
func CanTransition(from, to string) bool {
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// LiveStatuses are the statuses in which a sandbox holds host resources (and counts against its
// tenant's quota).
var LiveStatuses = []string{api.StatusProvisioning, api.StatusReady, api.StatusRunning, api.StatusPaused}

// Live reports whether status is one of LiveStatuses.
func Live(status string) bool { return slices.Contains(LiveStatuses, status) }

// Transition reasons used by the daemon.
const (
	ReasonCreated        = "created"
	ReasonReady          = "ready"
	ReasonExec           = "exec"
	ReasonPaused         = "paused"
	ReasonResumed        = "resumed"
	ReasonTerminated     = "terminated"      // by the API
	ReasonTimeout        = "timeout"         // timeout.maxDurationSeconds
	ReasonIdle           = "idle"            // timeout.idleTimeoutSeconds
	ReasonDaemonRestart  = "daemon_restart"  // the daemon died while the sandbox lived
	ReasonDaemonShutdown = "daemon_shutdown" // the daemon was stopped
	ReasonInitExited     = "init_exited"     // the sandbox ended by itself
	ReasonWarm           = "warm"            // ready in a warm pool, waiting for a create to claim it
	ReasonRecycled       = "recycled"        // a warm pool's sandbox aged out unclaimed
	ReasonRestored       = "restored"        // its state was replaced by a snapshot's
	ReasonPoolRemoved    = "pool_removed"    // its warm pool was removed or changed
	ReasonAgentStarted   = "agent_started"   // its agent was started (POST .../start)
	ReasonAgentExit      = "agent_exit"      // its agent exited: completed with 0, failed otherwise
)

// StateError is a request the sandbox's current status does not allow (HTTP 409, naming the
// status).
type StateError struct {
	ID     string
	Status string
	Op     string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("sandbox %s is %s: cannot %s", e.ID, e.Status, e.Op)
}

// Unwrap makes errors.Is(err, errdefs.ErrConflict) true.
func (e *StateError) Unwrap() error { return errdefs.ErrConflict }
