package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// maxExecTimeout bounds ExecRequest.Timeout (seconds); a sandbox lives at most this long anyway.
const maxExecTimeout = 86400

// What execve(2) takes, checked before an exec starts so that a request too large for it is a 413
// naming the field rather than a command that cannot start. maxArgString is Linux's
// MAX_ARG_STRLEN: one argument or NAME=value with its NUL. maxExecArgs bounds the argv and env of
// one request together as the kernel counts them (each string with its NUL, and a pointer to it):
// half of what a sandbox's execve takes with the usual 8 MiB stack limit, leaving the rest to the
// sandbox's own and its image's environment.
const (
	maxArgString = 128 << 10
	maxExecArgs  = 1 << 20
)

// Stream connects an exec to a live client (the interactive WebSocket). The zero value runs the
// command with the request's stdin and only captures output.
type Stream struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Rows, Cols     uint16
	Resize         <-chan sandbox.Resize
	Signal         <-chan syscall.Signal
	// Started is called with the execution ID once the exec is recorded, before it runs.
	Started func(execID string)
}

// Exec runs one command in a live sandbox of the tenant in ctx and returns its result, which is
// recorded before it is returned. Cancelling ctx kills the command (its result is still recorded);
// the sync API passes a context that the client's disconnect does not cancel.
func (m *Manager) Exec(ctx context.Context, id string, req api.ExecRequest, st Stream) (api.ExecResult, error) {
	if err := checkExec(&req); err != nil {
		return api.ExecResult{}, err
	}
	var sp *spool
	if st.Stdout != nil || st.Stderr != nil {
		// The client gets the output through a spool, so that it never holds the command up;
		// what is queued is delivered last, after the sandbox is free again.
		sp = newSpool(st.Stdout, st.Stderr, sandbox.DefaultOutputLimit)
		st.Stdout, st.Stderr = sp.writer(0), sp.writer(1)
		defer func() { sp.close(); sp.flushed() }()
	}
	b, err := m.live(ctx, id, "exec")
	if err != nil {
		return api.ExecResult{}, err
	}
	defer m.cfg.Metrics.ObserveExec(b.level(), time.Now())
	sb, err := b.begin(ctx, "exec", true)
	if err != nil {
		return api.ExecResult{}, err
	}
	defer b.done()

	execID := sandbox.NewID("exec_")
	started := time.Now().UTC()
	if err := m.store.StartExec(ctx, api.Execution{ID: execID, SandboxID: id, Command: req.Command, Status: api.ExecRunning, StartedAt: started}); err != nil {
		return api.ExecResult{}, fmt.Errorf("record exec: %w", err)
	}
	ten := b.owner()
	m.recordEvent(b, ten, api.Event{Type: api.EventExecStarted, Time: started, ExecutionID: execID,
		Message: strings.Join(req.Command, " "), Data: execStartData(req, st)})
	b.execStarted(execID, started)
	defer b.execEnded(execID)
	if st.Started != nil {
		st.Started(execID)
	}

	dreq := sandbox.ExecRequest{
		ID: execID, Command: req.Command, Env: req.Env, Workdir: req.Workdir,
		Stdin: st.Stdin, Capture: req.CaptureOutput == nil || *req.CaptureOutput,
		Stdout: b.logs.writer(id, execID, api.StreamStdout, st.Stdout),
		Stderr: b.logs.writer(id, execID, api.StreamStderr, st.Stderr),
		TTY:    st.TTY, Rows: st.Rows, Cols: st.Cols, Resize: st.Resize, Signal: st.Signal,
	}
	if dreq.Stdin == nil && req.Stdin != "" {
		dreq.Stdin = strings.NewReader(req.Stdin)
	}
	ectx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ectx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout*float64(time.Second)))
		defer cancel()
	}
	scan := m.scanBefore(ctx, b, sb)
	res, err := sb.Exec(ectx, dreq)
	res.ExecutionID = execID // the manager's, whatever the level echoed
	if err != nil {
		// The command could not run at all (the sandbox went away under it): say so in the record.
		res = api.ExecResult{ExecutionID: execID, ExitCode: sandbox.ExitSetupError, Stderr: "airlock: " + err.Error() + "\n", LimitEvents: []api.LimitEvent{}}
	}
	if sp != nil {
		if n := sp.close(); n > 0 {
			res.Truncated = true
			res.LimitEvents = append(res.LimitEvents, api.LimitEvent{Type: sandbox.EventLimitOutput, Count: n, Time: time.Now().UTC(),
				Message: fmt.Sprintf("the client did not take %d bytes of output in time (%d MiB wait at most); they were dropped from its stream", n, sandbox.DefaultOutputLimit>>20)})
		}
	}
	cut := m.closing.Load() && (err != nil || res.ExitCode == 128+int(syscall.SIGKILL))
	if cut {
		// The daemon's shutdown ended the sandbox under the command.
		res.EndedBy, res.ExitCode, res.TimedOut = api.EndedByDaemonShutdown, 128+int(syscall.SIGKILL), false
		res.LimitEvents = dropTimeout(res.LimitEvents)
	}
	if ctx.Err() == context.Canceled && res.TimedOut {
		// Cancelled by the caller (an interactive client went away), not by the timeout.
		res.TimedOut = false
		res.ExitCode = 128 + int(syscall.SIGKILL)
		res.LimitEvents = dropTimeout(res.LimitEvents)
	}
	if ferr := m.finishExec(ctx, execID, res); ferr != nil {
		return api.ExecResult{}, fmt.Errorf("record exec result: %w", ferr)
	}
	m.execRecorded(ten, int64(len(res.Stdout)+len(res.Stderr)))
	if scan {
		m.queueScan(b, scanJob{execID: execID, tenant: ten, end: time.Now()})
	}
	for _, le := range res.LimitEvents {
		m.recordEvent(b, ten, api.Event{Type: le.Type, ExecutionID: execID, Message: le.Message, Data: map[string]any{"count": le.Count, "scope": "exec"}})
	}
	m.recordEvent(b, ten, api.Event{Type: api.EventExecExited, ExecutionID: execID,
		Message: fmt.Sprintf("exit %d", res.ExitCode), Data: execExitData(res)})
	if cut {
		return res, errdefs.New(errdefs.ErrServiceUnavailable, "the daemon shut down while exec %s ran: it was killed (exit %d), recorded with endedBy %s",
			execID, res.ExitCode, api.EndedByDaemonShutdown)
	}
	if err != nil {
		return res, errdefs.New(errdefs.ErrConflict, "exec in sandbox %s: %v", id, err)
	}
	return res, nil
}

// execStartData is what an exec.started event says of the request: the command, its workdir and
// timeout, and the names (never the values) of the variables it set.
func execStartData(req api.ExecRequest, st Stream) map[string]any {
	d := map[string]any{"command": []string(req.Command)}
	if req.Workdir != "" {
		d["workdir"] = req.Workdir
	}
	if req.Timeout > 0 {
		d["timeout"] = req.Timeout
	}
	if len(req.Env) > 0 {
		names := make([]string, 0, len(req.Env))
		for k := range req.Env {
			names = append(names, k)
		}
		slices.Sort(names)
		d["envNames"] = names
	}
	if st.TTY {
		d["tty"] = true
	}
	if st.Stdout != nil {
		d["interactive"] = true
	}
	return d
}

// execExitData is what an exec.exited event says of the result.
func execExitData(res api.ExecResult) map[string]any {
	d := map[string]any{"exitCode": res.ExitCode, "durationMs": res.DurationMs,
		"peakMemoryMb": res.ResourceUsage.PeakMemoryMB, "cpuTimeMs": res.ResourceUsage.CPUTimeMs,
		"networkEgressBytes": res.ResourceUsage.NetworkEgressBytes}
	if res.TimedOut {
		d["timedOut"] = true
	}
	if res.OOMKilled {
		d["oomKilled"] = true
	}
	if res.Truncated {
		d["truncated"] = true
	}
	return d
}

func dropTimeout(evs []api.LimitEvent) []api.LimitEvent {
	out := evs[:0]
	for _, e := range evs {
		if e.Type != sandbox.EventLimitTimeout {
			out = append(out, e)
		}
	}
	return out
}

// checkExec validates an exec request, naming the bad field.
func checkExec(req *api.ExecRequest) error {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return errdefs.Invalid("command", "is required: a string run by /bin/sh -c, or an argv array")
	}
	for _, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return errdefs.Invalid("command", "must not contain NUL bytes")
		}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errdefs.Invalid("env", "invalid variable %q: names must be non-empty without '=' or NUL", k)
		}
	}
	if err := checkExecSize(req); err != nil {
		return err
	}
	if req.Workdir != "" && (!path.IsAbs(req.Workdir) || path.Clean(req.Workdir) != req.Workdir) {
		return errdefs.Invalid("workdir", "path %q must be absolute and clean", req.Workdir)
	}
	if req.Timeout < 0 || req.Timeout > maxExecTimeout {
		return errdefs.Invalid("timeout", "must be between 0 and %d seconds (got %g)", maxExecTimeout, req.Timeout)
	}
	return nil
}

// checkExecSize refuses, as a 413 naming the field, an argv or environment that execve would
// refuse (E2BIG): a string past maxArgString, or all of them past maxExecArgs.
func checkExecSize(req *api.ExecRequest) error {
	total := 0
	for i, a := range req.Command {
		if len(a)+1 > maxArgString {
			return errdefs.TooLarge("command", "argument %d is %d bytes; a command's argument can be at most %d", i, len(a), maxArgString-1)
		}
		total += len(a) + 1 + 8
	}
	argv := total
	for k, v := range req.Env {
		if n := len(k) + 1 + len(v) + 1; n > maxArgString {
			return errdefs.TooLarge("env."+k, "%s=... is %d bytes; a variable can be at most %d with its name", k, n-1, maxArgString-1)
		}
		total += len(k) + 1 + len(v) + 1 + 8
	}
	if total > maxExecArgs {
		field := "env"
		if argv > total-argv {
			field = "command"
		}
		return errdefs.TooLarge(field, "the command and its environment take %d bytes as execve counts them (each string, its NUL and a pointer); at most %d", total, maxExecArgs)
	}
	return nil
}

// Execs returns a sandbox's recorded execs, newest first.
func (m *Manager) Execs(ctx context.Context, id string) ([]api.Execution, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	return m.store.Execs(ctx, id, 1000)
}

// Execution returns one recorded exec.
func (m *Manager) Execution(ctx context.Context, id, execID string) (api.Execution, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return api.Execution{}, err
	}
	e, err := m.store.Exec(ctx, id, execID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return e, fmt.Errorf("execution %s of sandbox %s: %w", execID, id, errdefs.ErrNotFound)
	}
	return e, err
}
