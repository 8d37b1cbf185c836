package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol, over a socket pair whose other end QEMU got as its
// monitor: one command at a time, answers matched in order, events skipped.
type qmp struct {
	mu    sync.Mutex // one command at a time
	f     *os.File
	r     *bufio.Reader
	ready bool  // the greeting was read and capabilities negotiated
	err   error // set once that failed
}

// newQMP takes the host's end of QEMU's monitor socket; the greeting and the negotiation happen
// at the first command, by when QEMU runs.
func newQMP(f *os.File) *qmp { return &qmp{f: f, r: bufio.NewReader(f)} }

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	QMP   json.RawMessage `json:"QMP"`
}

// do runs one command without arguments and waits for its answer, within ctx.
func (q *qmp) do(ctx context.Context, cmd string) error { return q.call(ctx, cmd, nil, nil) }

// call runs cmd with args (nil: none) and decodes its answer into out (nil: ignored), within ctx.
// fd, when not negative, rides along with the command (getfd takes it).
func (q *qmp) call(ctx context.Context, cmd string, args, out any, fd ...int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		_ = q.f.SetDeadline(dl)
	} else {
		_ = q.f.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if !q.ready && q.err == nil {
		q.greet()
	}
	if q.err != nil {
		return q.err
	}
	return q.exec(cmd, args, out, fd...)
}

// greet reads the greeting and negotiates capabilities, once.
func (q *qmp) greet() {
	var g qmpReply
	line, err := q.r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &g)
	}
	if err == nil && g.QMP == nil {
		err = errors.New("no QMP greeting")
	}
	if err == nil {
		err = q.exec("qmp_capabilities", nil, nil)
	}
	if err != nil {
		q.err = fmt.Errorf("QEMU monitor: %w", err)
	}
	q.ready = true
}

func (q *qmp) exec(cmd string, args, out any, fds ...int) error {
	msg := map[string]any{"execute": cmd}
	if args != nil {
		msg["arguments"] = args
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(fds) > 0 {
		err = q.sendWithFds(b, fds)
	} else {
		_, err = q.f.Write(b)
	}
	if err != nil {
		return fmt.Errorf("QEMU monitor: %w", err)
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("QEMU monitor: %s: %w", cmd, err)
		}
		var r qmpReply
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("QEMU monitor: %s: %w", cmd, err)
		}
		switch {
		case r.Event != "":
			continue
		case r.Error != nil:
			return fmt.Errorf("QEMU monitor: %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		case out != nil:
			return json.Unmarshal(r.Return, out)
		default:
			return nil
		}
	}
}

// sendWithFds writes b with fds as SCM_RIGHTS.
func (q *qmp) sendWithFds(b []byte, fds []int) error {
	rc, err := q.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), b, unix.UnixRights(fds...), nil, 0)
		return serr != unix.EAGAIN
	})
	if werr != nil {
		return werr
	}
	return serr
}

func (q *qmp) close() { q.f.Close() }
