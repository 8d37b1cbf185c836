package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// The host and the sandbox's init talk over a SOCK_SEQPACKET socket pair: one JSON message per
// packet, file descriptors (a command's stdio) riding along as SCM_RIGHTS. SEQPACKET keeps message
// boundaries and delivers EOF to init when the host goes away, which is init's cue to end the
// sandbox.
//
// A packet can be no larger than the sender's socket buffer (net.core.wmem_default, 208 KiB by
// default): the host sends a message that does not fit (EMSGSIZE: an exec with a large argv or
// environment) in parts — a MsgParts header with the message's size and its descriptors, then
// the JSON in packets of PartSize — and init puts it back together.

// MaxMessage bounds one packet init reads.
const MaxMessage = 1 << 20

// PartSize is the size of the packets a message in parts is sent in: far below any socket
// buffer a host configures.
const PartSize = 32 << 10

// MaxParts bounds a message in parts: what an exec request of the largest body the API accepts
// could encode to, with room to spare.
const MaxParts = 64 << 20

// MaxReply bounds what init sends (statuses, errors): the buffer each sandbox's reader keeps.
const MaxReply = 64 << 10

// MaxFds is the most descriptors one message to init may carry (the kernel's SCM_MAX_FD is 253).
const MaxFds = 250

// MaxRecvFds is the most descriptors one message from init carries (a terminal's master).
const MaxRecvFds = 4

// Message kinds.
const (
	MsgConfig  = "config"  // host → init: set the sandbox up (Config)
	MsgReady   = "ready"   // init → host: set up, locked down, waiting for execs
	MsgError   = "error"   // init → host: setup or an exec failed (Error, ID)
	MsgPlaced  = "placed"  // host → init: you are in the sandbox's cgroup; lock down
	MsgExec    = "exec"    // host → init: start a command (Exec) with 3 fds, or none for a TTY
	MsgStarted = "started" // init → host: the command runs (ID, Pid; a TTY's master as the fd)
	MsgExited  = "exited"  // init → host: the command ended (ID, ExitCode, Signal, Usage)
	MsgSignal  = "signal"  // host → init: signal a command's process group (ID, Signal)
	MsgOOM     = "oom"     // host → init: the sandbox is at its memory limit; kill its largest process
	MsgResize  = "resize"  // host → init: set a relayed terminal's size (ID, Size); init → host: it is set (ID)
	MsgPing    = "ping"    // host → init: are you there? (a host adopting the sandbox asks)
	MsgPong    = "pong"    // init → host: yes (ID; Guest, when the sandbox's kernel counts its processes)
	MsgLayer   = "layer"   // host → init: send me the writable layer; init → host: here (ID; the fd)
	MsgHello   = "hello"   // init → host: first message on a control socket init dialled again (Token)
	MsgQuiesce = "quiesce" // host → init: hold no host descriptor (a memory snapshot comes); init → host: done (ID)
	MsgParts   = "parts"   // host → init: the next message is the next Length bytes, in packets of PartSize; its descriptors come with this one
)

// Message is one packet of the control protocol, either way; Kind says which fields it carries.
type Message struct {
	Kind     string           `json:"kind"`
	ID       string           `json:"id,omitempty"`
	Config   *Config          `json:"config,omitempty"`
	Exec     *ExecSpec        `json:"exec,omitempty"`
	Pid      int              `json:"pid,omitempty"`
	ExitCode int              `json:"exitCode,omitempty"`
	Signal   int              `json:"signal,omitempty"`
	Usage    *Rusage          `json:"usage,omitempty"`
	Error    string           `json:"error,omitempty"`
	Guest    *CgroupStats     `json:"guest,omitempty"`
	Size     *sandbox.Winsize `json:"size,omitempty"`
	Token    string           `json:"token,omitempty"`
	Length   int              `json:"length,omitempty"` // MsgParts
	// Phases is, in MsgReady, how long init's setup steps took, in microseconds from init's
	// start (for the host's debug log).
	Phases map[string]int64 `json:"phases,omitempty"`

	// Files are the descriptors that came with the message to the host; whoever takes the
	// message owns them.
	Files []*os.File `json:"-"`
}

// CloseFiles closes the descriptors a message brought that nobody took.
func (m *Message) CloseFiles() {
	for _, f := range m.Files {
		f.Close()
	}
	m.Files = nil
}

// ExecSpec is one command for init to start.
type ExecSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// TTY, when set, runs the command on a new terminal of the sandbox's devpts of this size;
	// init sends the master back with MsgStarted, or relays it through the one descriptor that
	// came with the request (a gVisor terminal: see TerminalRelay in the host side).
	TTY *sandbox.Winsize `json:"tty,omitempty"`
}

// Rusage is what the kernel reports for a reaped command (wait4): its own usage plus that of the
// descendants it waited for. Background processes it left behind are not in it.
type Rusage struct {
	CPUMicros int64 `json:"cpuUs"`     // user + system time
	MaxRSSKiB int64 `json:"maxRssKiB"` // peak resident set of the largest of them
}

// CgroupStats are the counters of the pids cgroup init keeps in a sandbox's own kernel (gVisor,
// Config.GuestPids). Its kernel keeps no count of refused forks, so PidsHits counts the times
// init found the sandbox at its limit.
type CgroupStats struct {
	Pids     int64 `json:"pids"`
	PidsMax  int64 `json:"pidsMax"`
	PidsHits int64 `json:"pidsHits"`
	OOMKills int64 `json:"oomKills"` // processes init killed at the host's word (MsgOOM)
}

// Encode turns m into a packet, and fds into its control message.
func Encode(m *Message, fds []int) ([]byte, []byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return b, oob, nil
}

// ErrMalformed is a packet that could not be parsed; the connection itself is fine.
var ErrMalformed = errors.New("malformed control message")

// Decode parses one packet with its control message and recvmsg flags, and returns the
// descriptors that came with it. A zero-length packet is the peer closing (SEQPACKET reads 0 at
// EOF): net.ErrClosed.
func Decode(b, oob []byte, flags int) (*Message, []int, error) {
	var fds []int
	if len(oob) > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob)
		if err == nil {
			for _, cm := range cmsgs {
				if f, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, f...)
				}
			}
		}
	}
	fail := func(err error) (*Message, []int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, nil, err
	}
	if len(b) == 0 {
		return fail(net.ErrClosed)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return fail(fmt.Errorf("%w: truncated", ErrMalformed))
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrMalformed, err))
	}
	return &m, fds, nil
}
