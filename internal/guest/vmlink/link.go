// Package vmlink carries airlock's control protocol (internal/guest) between the host and a
// virtual machine's guest over one byte stream — a virtio-serial port, where neither message
// boundaries nor file descriptors cross. It is a transport under the protocol, not a new one:
// on each side the link ends in an ordinary SOCK_SEQPACKET socket, so the host side of init
// (guest/host) and init itself (guest/pid1) talk exactly as they do on every other level.
//
// A packet of the control socket becomes a frame; each descriptor that rides along with it
// becomes a stream of its own, with credit-based flow control, so that a command that does not
// read its stdin, or a host that reads an output slowly, stalls only that stream. On the far
// side each stream is a new pipe (or a socket pair, for a descriptor used both ways) whose other
// end takes the descriptor's place in the packet. Besides init's packets the link carries the
// guest agent's own few calls (Call: its kernel's counters; the files API; a scan of the
// writable layer, ScanLayer) and its hello once it booted. The guest is not trusted: a stream it
// sends past its credit is cut, and what a call answers is read within bounds.
package vmlink

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Frame types.
const (
	fPacket byte = iota + 1 // a control packet; payload: packetHeader then the packet's bytes
	fData                   // stream data
	fEOF                    // the sender sends no more data on the stream
	fStop                   // the sender reads no more of the stream: stop sending it
	fCredit                 // the receiver consumed n bytes (payload: uint32)
	fCall                   // a call to the guest agent (stream: the call's id; payload: callMsg)
	fReply                  // its answer (stream: the call's id; payload: JSON or an error)
	fHello                  // the guest agent is up (payload: Hello)
	// A save of the VM (Host.Quiesce): the host sends fQuiesce and sends nothing more; the
	// guest answers fQuiesced and sends nothing more; fResume (payload: 1 for a new host, of a
	// VM restored from the save, 0 otherwise) lets both go on.
	fQuiesce
	fQuiesced
	fResume
	// A host takes the link over (payload: the link's token). The first host sends fSync first
	// thing, and the guest keeps its token; a later host — a restarted daemon adopting the VM —
	// sends it on a byte stream that may hold the tail of the old host's frames, and the guest,
	// which found its old host gone, hunts for it: the token, which only the hosts and the agent
	// know (never a process of the sandbox), tells it from any data. The guest drops what it kept
	// for the old host and answers fSynced with the same token, from which on the host, which
	// hunted for that answer, reads frames again.
	fSync
	fSynced
	fLast = fSynced
)

// TokenLen is the length of a link's token (hex).
const TokenLen = 32

// NewToken returns a fresh random token for a link.
func NewToken() (string, error) {
	var b [TokenLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// syncFrame is the whole frame typ (fSync or fSynced) with token, as it goes on the wire.
func syncFrame(typ byte, token string) []byte {
	b := []byte{typ, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], uint32(len(token)))
	return append(b, token...)
}

// Window is the most unacknowledged data a stream may have in flight; MaxFrame the largest payload.
const (
	Window   = 256 << 10
	MaxFrame = 64 << 10
	header   = 9
)

// Direction says which way a stream carries data, from the side that opened it.
type Direction byte

const (
	// ToPeer: the opener reads its descriptor and sends; the peer gets a pipe's read end.
	ToPeer Direction = 1
	// FromPeer: the peer's side writes; the opener writes what arrives to its descriptor.
	FromPeer Direction = 2
	// Both: a socket used both ways (a terminal relay); the peer gets a socket pair's end.
	Both Direction = 3
)

// Hello is what the guest agent says once it booted.
type Hello struct {
	Kernel string `json:"kernel"` // uname -r
	BootMs int64  `json:"bootMs"` // the guest kernel's uptime when the agent was ready
	// Phases are the guest kernel's uptime in ms at the end of each step of the agent's boot.
	Phases map[string]int64 `json:"phases,omitempty"`
	Error  string           `json:"error,omitempty"`
}

// Stats are the guest kernel's counters of the sandbox (its cgroup and writable layer).
type Stats struct {
	OOMKills    int64 `json:"oomKills"`
	PidsHits    int64 `json:"pidsHits"`
	Pids        int64 `json:"pids"`
	PidsMax     int64 `json:"pidsMax"`
	MemoryBytes int64 `json:"memory"`
	MemoryPeak  int64 `json:"memoryPeak"`
	MemoryMax   int64 `json:"memoryMax"`
	DiskUsed    int64 `json:"diskUsed"`
	DiskTotal   int64 `json:"diskTotal"`
	DiskFull    bool  `json:"diskFull"`
}

// callMsg is a call to the guest agent.
type callMsg struct {
	Kind string          `json:"kind"`
	Body json.RawMessage `json:"body,omitempty"`
}

// reply is the guest agent's answer.
type reply struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Error string          `json:"error,omitempty"`
}

// ErrClosed is a link whose byte stream ended.
var ErrClosed = errors.New("vm link closed")

// frameWriter writes whole frames; one mutex keeps them from interleaving.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
	buf []byte // reused for every frame, under mu
}

func (fw *frameWriter) write(typ byte, stream uint32, parts ...[]byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.writeLocked(typ, stream, parts...)
}

// hold writes a frame and holds the writer: no other frame goes out until release.
func (fw *frameWriter) hold(typ byte, stream uint32, parts ...[]byte) error {
	fw.mu.Lock()
	if err := fw.writeLocked(typ, stream, parts...); err != nil {
		fw.mu.Unlock()
		return err
	}
	return nil
}

// release writes a frame with the writer held (hold) and lets it go.
func (fw *frameWriter) release(typ byte, stream uint32, parts ...[]byte) error {
	defer fw.mu.Unlock()
	return fw.writeLocked(typ, stream, parts...)
}

func (fw *frameWriter) writeLocked(typ byte, stream uint32, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxFrame+4096 {
		return fmt.Errorf("vm link: frame of %d bytes", n)
	}
	if fw.err != nil {
		return fw.err
	}
	b := append(fw.buf[:0], typ, 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[1:], stream)
	binary.BigEndian.PutUint32(b[5:], uint32(n))
	for _, p := range parts {
		b = append(b, p...)
	}
	fw.buf = b
	if _, err := fw.w.Write(b); err != nil {
		fw.err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fw.err
}

// readFrame reads one frame into buf (grown as needed).
func readFrame(r io.Reader, buf []byte) (typ byte, stream uint32, payload []byte, err error) {
	var h [header]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[5:])
	if n > MaxFrame+4096 {
		return 0, 0, nil, fmt.Errorf("vm link: frame of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, 0, nil, err
	}
	return h[0], binary.BigEndian.Uint32(h[1:]), buf, nil
}

// packetHeader is a packet frame's stream list: for each descriptor of the packet, the stream
// that stands for it and its direction (from the sender's side).
func encodePacket(ids []uint32, dirs []Direction, b []byte) [][]byte {
	h := make([]byte, 1+5*len(ids))
	h[0] = byte(len(ids))
	for i, id := range ids {
		binary.BigEndian.PutUint32(h[1+5*i:], id)
		h[1+5*i+4] = byte(dirs[i])
	}
	return [][]byte{h, b}
}

func decodePacket(p []byte) (ids []uint32, dirs []Direction, b []byte, err error) {
	if len(p) < 1 {
		return nil, nil, nil, errors.New("vm link: empty packet frame")
	}
	n := int(p[0])
	if len(p) < 1+5*n {
		return nil, nil, nil, errors.New("vm link: short packet frame")
	}
	for i := 0; i < n; i++ {
		ids = append(ids, binary.BigEndian.Uint32(p[1+5*i:]))
		dirs = append(dirs, Direction(p[1+5*i+4]))
	}
	return ids, dirs, p[1+5*n:], nil
}
