package wasm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// This file is the daemon's side of a sandbox's worker (worker.go): it starts the worker as a
// long-running command of the sandbox's jail, with a socket as its standard input and output,
// and runs execs on it in frames (proto.go).

// workerReady bounds a worker's start: the airlock binary's start and the guest's skeleton.
const workerReady = 30 * time.Second

// stopGrace is how long an exec waits for the worker to stop a command it was told to stop
// before the worker is killed, with every command it runs.
const stopGrace = 2 * time.Second

// worker is the daemon's handle on one running worker.
type worker struct {
	conn   *os.File // the daemon's end of the stream
	fw     *frameWriter
	kill   context.CancelFunc // ends the worker's command: the process level kills it
	ready  chan string        // the worker's frameReady: "" or why it cannot serve
	exited chan struct{}      // closed when the worker's command is over; res and err are set
	done   chan struct{}      // closed after exited, once every frame the worker sent was read
	res    sandbox.ExecResult // the worker's command's result (an OOM kill, say)
	err    error

	mu    sync.Mutex // guards execs and next
	execs map[uint32]*execStreams
	next  uint32
}

// execStreams is where the frames of one exec go.
type execStreams struct {
	stdout, stderr io.Writer
	exit           chan execReply // gets the exec's frameExit
}

// startWorker starts a worker in the sandbox's jail and waits until it is ready.
func (s *Sandbox) startWorker(ctx context.Context) (*worker, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: worker stream: %w", s.id, err)
	}
	conn, theirs := os.NewFile(uintptr(fds[0]), "worker stream"), os.NewFile(uintptr(fds[1]), "worker stream")
	logR, logW, err := os.Pipe()
	if err != nil {
		conn.Close()
		theirs.Close()
		return nil, fmt.Errorf("sandbox %s: worker log: %w", s.id, err)
	}
	wctx, kill := context.WithCancel(context.Background())
	w := &worker{conn: conn, fw: &frameWriter{w: conn}, kill: kill, ready: make(chan string, 1),
		exited: make(chan struct{}), done: make(chan struct{}), execs: map[uint32]*execStreams{}}
	go func() {
		defer close(w.exited)
		w.res, w.err = s.jail.Exec(wctx, sandbox.ExecRequest{ID: sandbox.NewID("exec_"),
			Command: []string{jailBinary, workerArg}, Stdin: theirs, Stdout: theirs, Stderr: logW})
		// The worker is gone: the stream ends once no one holds its other end.
		theirs.Close()
		logW.Close()
	}()
	go s.logWorker(logR)
	go w.readLoop()
	cfg := workerConfig{Spec: s.spec}
	for i, b := range s.spec.Binds {
		cfg.Binds = append(cfg.Binds, workerBind{Path: b.Path, Dir: bindDir(i), ReadOnly: b.ReadOnly})
	}
	// Written aside: a worker that does not read must not hold the daemon past workerReady.
	go func() {
		if err := w.fw.writeJSON(frameConfig, 0, cfg); err != nil {
			w.kill()
		}
	}()
	t := time.NewTimer(workerReady)
	defer t.Stop()
	select {
	case why := <-w.ready:
		if why != "" {
			w.stop()
			return nil, fmt.Errorf("sandbox %s: the worker cannot serve: %s", s.id, why)
		}
		return w, nil
	case <-w.done:
		err := fmt.Errorf("sandbox %s: the worker ended as it started (exit %d): %s", s.id, w.res.ExitCode, strings.TrimSpace(w.res.Stderr))
		if w.err != nil {
			err = fmt.Errorf("%w: %w", err, w.err)
		}
		return nil, err
	case <-ctx.Done():
		w.stop()
		return nil, fmt.Errorf("sandbox %s: waiting for the worker: %w", s.id, ctx.Err())
	case <-t.C:
		w.stop()
		return nil, fmt.Errorf("sandbox %s: the worker was not ready after %v: %w", s.id, workerReady, errdefs.ErrSetup)
	}
}

// bindDir is where the operator's i-th bind is in the jail.
func bindDir(i int) string { return fmt.Sprintf("%s/%d", jailBinds, i) }

// logWorker passes on what the worker writes to its standard error (nothing, unless it fails).
func (s *Sandbox) logWorker(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.d.log.Warn("wasm worker", "sandbox", s.id, "said", sc.Text())
	}
}

// stop kills the worker and waits until it is gone.
func (w *worker) stop() {
	w.kill()
	<-w.done
}

// alive reports whether the worker still runs.
func (w *worker) alive() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

// readLoop routes the worker's frames to the execs they belong to, until the stream ends.
func (w *worker) readLoop() {
	defer close(w.done)
	defer w.conn.Close() // writes still under way end with the worker's end gone (EPIPE)
	defer func() { <-w.exited }()
	defer w.kill() // a broken stream is a worker that cannot be talked to
	r := &frameReader{r: bufio.NewReaderSize(w.conn, 64<<10)}
	for {
		f, err := r.next()
		if err != nil {
			return
		}
		if f.kind == frameReady {
			select {
			case w.ready <- string(f.payload):
			default:
			}
			continue
		}
		w.mu.Lock()
		es := w.execs[f.id]
		w.mu.Unlock()
		if es == nil {
			continue // an exec that gave up already
		}
		// An exec's writer that fails (its client gone) must not stop the reading: the stream
		// carries every exec's frames.
		switch f.kind {
		case frameStdout:
			_, _ = es.stdout.Write(f.payload)
		case frameStderr:
			_, _ = es.stderr.Write(f.payload)
		case frameExit:
			var rep execReply
			if json.Unmarshal(f.payload, &rep) != nil {
				rep = execReply{Error: "malformed reply from the worker"}
			}
			es.exit <- rep // buffered: one reply per exec
		}
	}
}

// errWorkerGone is an exec's error when its worker ended under it (or could not be written to).
var errWorkerGone = errors.New("the worker ended")

// run runs one command on the worker and waits for its reply. When ctx is done, or a signal
// arrives, the worker is told to stop the command; if it does not within stopGrace, the worker
// is killed. It returns errWorkerGone when the worker ended before the command did.
func (w *worker) run(ctx context.Context, req execRequest, stdin io.Reader, signals <-chan syscall.Signal, stdout, stderr io.Writer) (execReply, error) {
	es := &execStreams{stdout: stdout, stderr: stderr, exit: make(chan execReply, 1)}
	w.mu.Lock()
	w.next++
	id := w.next
	w.execs[id] = es
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.execs, id)
		w.mu.Unlock()
	}()
	req.Stdin = stdin != nil
	// Every write to the worker is made aside, so that a worker that stops reading its stream
	// (a full socket buffer) cannot hold the exec past its timeout: the kill below does not wait
	// for a write. The request goes first, then standard input, in order.
	var over atomic.Bool
	defer over.Store(true)
	go func() {
		if err := w.fw.writeJSON(frameExec, id, req); err != nil {
			w.kill()
			return
		}
		if stdin == nil {
			return
		}
		// Not waited for: a reader that blocks past the command's end is left to its caller, as
		// on the process level; it stops at its next read once the command is over.
		buf := make([]byte, 32<<10)
		for !over.Load() {
			n, err := stdin.Read(buf)
			if n > 0 && w.fw.write(frameStdin, id, buf[:n]) != nil {
				return
			}
			if err != nil {
				_ = w.fw.write(frameStdinEOF, id, nil) // a worker gone is seen below (w.done)
				return
			}
		}
	}()
	var killTimer <-chan time.Time
	done := ctx.Done()
	for {
		select {
		case rep := <-es.exit:
			return rep, nil
		case <-w.done:
			select {
			case rep := <-es.exit:
				return rep, nil
			default:
				return execReply{}, errWorkerGone
			}
		case sig, ok := <-signals:
			if !ok {
				signals = nil
				continue
			}
			// A worker gone is seen at w.done, one that does not read at the kill timer.
			go func() { _ = w.fw.write(frameStop, id, []byte{byte(sig)}) }()
		case <-done:
			done = nil
			killTimer = time.After(stopGrace)
			go func() { _ = w.fw.write(frameStop, id, []byte{0}) }() // as for a signal
		case <-killTimer:
			killTimer = nil
			w.kill()
		}
	}
}
