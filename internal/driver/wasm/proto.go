package wasm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/airlockrun/airlock/internal/sandbox"
)

// The daemon and a sandbox's worker talk over one stream (the worker's stdin and stdout, a
// socket the daemon handed to the process level's exec) in frames: a kind, an exec's number
// and a payload. Several execs run at once, each on its own number; 0 is the worker's own.
//
//	daemon → worker: frameConfig (once, first), frameExec, frameStdin, frameStdinEOF, frameStop
//	worker → daemon: frameReady (after frameConfig), frameStdout, frameStderr, frameExit
const (
	frameConfig   byte = iota + 1 // workerConfig
	frameReady                    // empty, or the reason the worker cannot serve
	frameExec                     // execRequest
	frameStdin                    // bytes for the exec's standard input
	frameStdinEOF                 // the exec's standard input is over
	frameStop                     // end the exec now: a signal's number, or 0 (a timeout)
	frameStdout                   // bytes the guest wrote to its standard output
	frameStderr                   // bytes the guest wrote to its standard error
	frameExit                     // execReply: the exec is over
)

// maxFrame caps a frame's payload: output and input travel in pieces of at most this, and no
// request comes near it.
const maxFrame = 1 << 20

// frame is one message of the stream.
type frame struct {
	kind    byte
	id      uint32
	payload []byte
}

// frameWriter writes frames from any number of goroutines.
type frameWriter struct {
	mu sync.Mutex // guards w: one frame at a time
	w  io.Writer
}

func (fw *frameWriter) write(kind byte, id uint32, payload []byte) error {
	var hdr [9]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:5], id)
	binary.BigEndian.PutUint32(hdr[5:9], uint32(len(payload)))
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, err := fw.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := fw.w.Write(payload)
	return err
}

// writeJSON writes v as a frame's payload.
func (fw *frameWriter) writeJSON(kind byte, id uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fw.write(kind, id, b)
}

// data writes b as frames of kind, in pieces of at most maxFrame bytes.
func (fw *frameWriter) data(kind byte, id uint32, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), maxFrame)
		if err := fw.write(kind, id, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// streamWriter is an io.Writer whose writes become frames of one kind and exec.
type streamWriter struct {
	fw   *frameWriter
	kind byte
	id   uint32
}

func (s streamWriter) Write(b []byte) (int, error) {
	if err := s.fw.data(s.kind, s.id, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// frameReader reads frames into one buffer: a frame's payload is valid until the next read
// (200 MB of output do not become 200 MB of garbage).
type frameReader struct {
	r   io.Reader
	hdr [9]byte
	buf []byte
}

// next reads the next frame.
func (fr *frameReader) next() (frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return frame{}, err
	}
	f := frame{kind: fr.hdr[0], id: binary.BigEndian.Uint32(fr.hdr[1:5])}
	n := binary.BigEndian.Uint32(fr.hdr[5:9])
	if n > maxFrame {
		return frame{}, fmt.Errorf("frame of %d bytes: at most %d", n, maxFrame)
	}
	if int(n) > cap(fr.buf) {
		fr.buf = make([]byte, n)
	}
	f.payload = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, f.payload); err != nil {
		return frame{}, err
	}
	return f, nil
}

// workerConfig is what a worker is told first: the sandbox it serves.
type workerConfig struct {
	// Spec is the sandbox's spec (its binds travel in Binds: a Spec's do not marshal).
	Spec sandbox.Spec `json:"spec"`
	// Binds are the operator's directories, each bound into the jail at Dir and seen by the
	// guest at Path.
	Binds []workerBind `json:"binds,omitempty"`
}

type workerBind struct {
	Path     string `json:"path"`
	Dir      string `json:"dir"`
	ReadOnly bool   `json:"ro,omitempty"`
}

// execRequest is one command for the worker.
type execRequest struct {
	Argv []string `json:"argv"`
	// SandboxEnv is the sandbox's environment; Env the request's, which goes over it and over
	// the command line's assignments.
	SandboxEnv map[string]string `json:"sandboxEnv,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Workdir    string            `json:"workdir"`
	// Stdin says frames of standard input follow; without it the guest reads an empty input.
	Stdin bool `json:"stdin,omitempty"`
}

// execReply is how a command ended, as the worker saw it.
type execReply struct {
	ExitCode     int     `json:"exitCode"`
	CPUTimeMs    int64   `json:"cpuTimeMs"`
	PeakMemoryMB float64 `json:"peakMemoryMb"`
	// Refused is how often the memory cap refused the command's modules memory; OOM says the
	// interpreter's own allocator reached the cap.
	Refused int64 `json:"refused,omitempty"`
	OOM     bool  `json:"oom,omitempty"`
	// DiskFull says the store had (nearly) no space left afterwards; WritesRefused counts the
	// writes to the store refused because the jail's memory could not pay for them (while the
	// command ran; a concurrent command's may be among them).
	DiskFull      bool  `json:"diskFull,omitempty"`
	WritesRefused int64 `json:"writesRefused,omitempty"`
	// Stopped says a frameStop ended the command.
	Stopped bool `json:"stopped,omitempty"`
	// Error is set when the command could not be run at all.
	Error string `json:"error,omitempty"`
}
