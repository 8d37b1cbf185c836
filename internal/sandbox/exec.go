package sandbox

import (
	"bytes"
	"io"
	"sync"
	"syscall"

	"github.com/airlockrun/airlock/api"
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

	// TTY runs the command on a new pseudo-terminal inside the sandbox, as the controlling
	// terminal of its session: Stdin feeds the terminal and Stdout receives everything it prints
	// (stderr included). Rows and Cols are its first size; Resize changes it.
	TTY        bool
	Rows, Cols uint16
	Resize     <-chan Resize
	// Signal delivers signals to the command's process group while it runs.
	Signal <-chan syscall.Signal

	// Capture keeps up to OutputLimit bytes of each output stream in the result.
	Capture     bool
	OutputLimit int64 // default DefaultOutputLimit
}

// Winsize is a terminal's size in characters.
type Winsize struct{ Rows, Cols uint16 }

// Resize is a new size for an exec's terminal. Done, when set, is closed once the size is in
// force, so that input the caller sends after Done is read under the new size.
type Resize struct {
	Winsize
	Done chan<- struct{}
}

// Limit event types (docs/levels.md#resources-and-limits): every limit that is hit is reported with one of these.
const (
	EventLimitMemory  = "limit.memory"
	EventLimitPids    = "limit.pids"
	EventLimitDisk    = "limit.disk"
	EventLimitCPU     = "limit.cpu"
	EventLimitTimeout = "limit.timeout"
	EventLimitOutput  = "limit.output"
)

// The result types are the wire types of package api.
type (
	LimitEvent    = api.LimitEvent
	ResourceUsage = api.ResourceUsage
	ExecResult    = api.ExecResult
)

// Exit codes with a fixed meaning (docs/cli.md#command-line).
const (
	ExitTimeout    = 124 // the timeout killed the command
	ExitSetupError = 125 // the sandbox could not be set up
	ExitOOM        = 137 // 128+SIGKILL: the memory limit killed the command
)

// Capture is an exec's output stream as the driver sees it: it keeps the first limit bytes
// written to it (none when limit is 0: not capturing) and notes that more came; everything goes on
// to tee. The limit applies to what is kept only: a streaming caller gets every byte.
type Capture struct {
	mu        sync.Mutex // guards buf and truncated
	buf       bytes.Buffer
	limit     int64
	truncated bool
	tee       io.Writer
}

// NewCapture returns a Capture keeping limit bytes and passing everything on to tee (may be nil).
func NewCapture(limit int64, tee io.Writer) *Capture { return &Capture{limit: limit, tee: tee} }

// Write implements io.Writer; it never fails (a failing tee is the caller's to notice).
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.limit - int64(c.buf.Len()); room < int64(len(p)) {
		c.truncated = c.limit > 0
		if room > 0 {
			c.buf.Write(p[:room])
		}
	} else {
		c.buf.Write(p)
	}
	if c.tee != nil {
		_, _ = c.tee.Write(p)
	}
	return len(p), nil
}

// Result sets *out to what was kept and *truncated when something was not, when capturing.
func (c *Capture) Result(out *string, truncated *bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit > 0 {
		*out = c.buf.String()
		*truncated = *truncated || c.truncated
	}
}
