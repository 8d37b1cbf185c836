package sandbox

import (
	"io"
	"time"
)

// DefaultOutputLimit caps what is kept of each of stdout and stderr of one exec. Past it the
// output is still read (so the command never blocks on a full pipe) but dropped, and the result
// says Truncated.
const DefaultOutputLimit = 10 << 20

// ExecRequest is one command to run in a sandbox.
type ExecRequest struct {
	ID      string            // exec_… ; the caller allocates it
	Command []string          // argv; Command[0] is looked up in the sandbox's PATH
	Env     map[string]string // added to the sandbox's environment
	Workdir string            // default: the sandbox's workdir

	// Stdin, Stdout and Stderr connect the command. An *os.File is handed to the command as it
	// is (a terminal stays a terminal, nothing is copied); any other value is fed through a pipe.
	// nil means /dev/null for Stdin and "discard" for the outputs.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Capture keeps up to OutputLimit bytes of each output stream in the result.
	Capture     bool
	OutputLimit int64 // default DefaultOutputLimit
}

// Limit event types (SPEC §2): every limit that is hit is reported with one of these.
const (
	EventLimitMemory  = "limit.memory"
	EventLimitPids    = "limit.pids"
	EventLimitDisk    = "limit.disk"
	EventLimitCPU     = "limit.cpu"
	EventLimitTimeout = "limit.timeout"
	EventLimitOutput  = "limit.output"
)

// LimitEvent says that a limit was hit during an exec.
type LimitEvent struct {
	Type    string    `json:"type"`
	Message string    `json:"message"`
	Count   int64     `json:"count,omitempty"` // how many times, where the kernel counts
	Time    time.Time `json:"time"`
}

// ResourceUsage is measured by the kernel (cgroup counters, interface counters), never estimated.
type ResourceUsage struct {
	PeakMemoryMB       float64 `json:"peakMemoryMb"`
	CPUTimeMs          int64   `json:"cpuTimeMs"`
	NetworkEgressBytes int64   `json:"networkEgressBytes"`
}

// ExecResult is the exec result object of SPEC §6.
type ExecResult struct {
	ExecutionID   string        `json:"executionId"`
	ExitCode      int           `json:"exitCode"`
	Stdout        string        `json:"stdout"`
	Stderr        string        `json:"stderr"`
	DurationMs    int64         `json:"durationMs"`
	TimedOut      bool          `json:"timedOut"`
	OOMKilled     bool          `json:"oomKilled"`
	Truncated     bool          `json:"truncated"`
	LimitEvents   []LimitEvent  `json:"limitEvents"`
	ResourceUsage ResourceUsage `json:"resourceUsage"`
}

// Exit codes with a fixed meaning (SPEC §7).
const (
	ExitTimeout    = 124 // the timeout killed the command
	ExitSetupError = 125 // the sandbox could not be set up
	ExitOOM        = 137 // 128+SIGKILL: the memory limit killed the command
)
