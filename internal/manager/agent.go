package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// The agent of a sandbox (SPEC §5): the process the sandbox is for, its spec's agent (or its
// image's entrypoint and cmd), started by POST .../start or at create (start: true). It runs as
// a long exec beside the others: the sandbox is running while it runs (and busy, so never idle);
// its stdout and stderr go to the sandbox's log; its stdin is a queue that POST .../agent/stdin
// appends to. When it exits by itself the sandbox ends: completed with 0, failed (reason
// agent_exit) otherwise, the exit code in the transition's event; its host resources are
// released, and its record, log, events and execs stay readable until it is terminated. An
// agent that the sandbox's end kills (terminate, a timeout, the daemon's stop) or a restore
// replaces ends without moving the sandbox; after a restore it may be started again.

// maxAgentStdin bounds what the agent's stdin holds unread: a write past it is refused (429)
// until the agent reads.
const maxAgentStdin = 1 << 20

// agentRun is one run of a sandbox's agent.
type agentRun struct {
	execID string
	stdin  *stdinQueue
	done   chan struct{} // closed once runAgent has recorded the agent's end (and ended b by it)
}

// agentOf is the agent of spec: its agent's command, or its image's entrypoint and cmd when it
// names none. A sandbox without either has no agent: a 409 naming the field.
func (m *Manager) agentOf(id string, spec sandbox.Spec) (api.Agent, error) {
	var ag api.Agent
	if spec.Agent != nil {
		ag = *spec.Agent
	}
	if len(ag.Command) == 0 && spec.Image != "" {
		ag.Command = m.cfg.ImageCommand(spec.Image)
	}
	if len(ag.Command) == 0 {
		what := "no agent.command"
		if spec.Image != "" {
			what += " and its image " + spec.Image + " has no entrypoint or cmd"
		}
		return ag, &errdefs.FieldError{Field: "agent", Kind: errdefs.ErrConflict,
			Message: fmt.Sprintf("sandbox %s has no agent to start: %s; create it with agent: {command, env, workdir}, or run commands with exec", id, what)}
	}
	return ag, nil
}

// checkAgent validates a create's agent (its fields named agent.command, agent.env,
// agent.workdir) and refuses start: true without one.
func checkAgent(spec sandbox.Spec) error {
	if spec.Agent != nil {
		req := api.ExecRequest{Command: spec.Agent.Command, Env: spec.Agent.Env, Workdir: spec.Agent.Workdir}
		if len(req.Command) == 0 && spec.Image != "" {
			req.Command = api.Command{"image-entrypoint"} // the image's, checked when it starts
		}
		if err := checkExec(&req); err != nil {
			if fe, ok := errors.AsType[*errdefs.FieldError](err); ok {
				fe.Field = "agent." + fe.Field
			}
			return err
		}
	}
	if spec.Start && spec.Agent == nil && spec.Image == "" {
		return errdefs.Invalid("start", "the sandbox has no agent to start: give agent.command (or an image with an entrypoint)")
	}
	return nil
}

// Start starts the agent of a sandbox of the tenant in ctx, waiting for it to be ready if it is
// provisioning, and returns the sandbox, running.
func (m *Manager) Start(ctx context.Context, id string) (api.Sandbox, error) {
	b, err := m.live(ctx, id, "start")
	if err != nil {
		return api.Sandbox{}, err
	}
	if err := m.startAgent(ctx, b); err != nil {
		return api.Sandbox{}, err
	}
	return b.view(), nil
}

// startAgent starts b's agent, which runs in the background until it exits.
func (m *Manager) startAgent(ctx context.Context, b *box) error {
	ag, err := m.agentOf(b.id, b.specNow())
	if err != nil {
		return err
	}
	run := &agentRun{execID: sandbox.NewID("exec_"), stdin: newStdinQueue(), done: make(chan struct{})}
	sb, err := b.beginAgent(ctx, run)
	if err != nil {
		return err
	}
	d := map[string]any{"command": []string(ag.Command)}
	if ag.Workdir != "" {
		d["workdir"] = ag.Workdir
	}
	m.recordEvent(b, b.owner(), api.Event{Type: api.EventAgentStarted, ExecutionID: run.execID, Message: strings.Join(ag.Command, " "), Data: d})
	if !m.agents.do(func() { defer close(run.done); m.runAgent(b, sb, run, ag) }) {
		close(run.done)
		b.endAgent(run)
		return errdefs.New(errdefs.ErrServiceUnavailable, "the daemon is stopping: the agent of sandbox %s was not started", b.id)
	}
	return nil
}

// runAgent runs b's agent in sb until it exits, then ends b by its exit code, unless b's end or
// a restore killed it.
func (m *Manager) runAgent(b *box, sb driver.Sandbox, run *agentRun, ag api.Agent) {
	started := time.Now()
	res, err := sb.Exec(m.agents.ctx, sandbox.ExecRequest{
		ID: run.execID, Command: ag.Command, Env: ag.Env, Workdir: ag.Workdir, Stdin: run.stdin,
		Stdout: b.logs.writer(b.id, run.execID, api.StreamStdout, nil),
		Stderr: b.logs.writer(b.id, run.execID, api.StreamStderr, nil),
	})
	run.stdin.close()
	b.endAgent(run)
	code := res.ExitCode
	if err != nil {
		code = sandbox.ExitSetupError // it could not run at all
	}
	data := map[string]any{"exitCode": code, "durationMs": time.Since(started).Milliseconds()}
	if err != nil {
		data["error"] = err.Error()
	}
	if res.OOMKilled {
		data["oomKilled"] = true
	}
	// The limits the agent hit are in the sandbox's events, as an exec's are.
	for _, le := range res.LimitEvents {
		m.recordEvent(b, b.owner(), api.Event{Type: le.Type, ExecutionID: run.execID, Message: le.Message, Data: map[string]any{"count": le.Count, "scope": "agent"}})
	}
	byItself := b.runs(sb)
	if !byItself {
		data["endedBy"] = "sandbox" // its sandbox ended, or a restore replaced it
	}
	m.recordEvent(b, b.owner(), api.Event{Type: api.EventAgentExited, ExecutionID: run.execID, Message: fmt.Sprintf("exit %d", code), Data: data})
	if !byItself {
		return
	}
	end := api.StatusCompleted
	if code != 0 {
		end = api.StatusFailed
	}
	b.agentExited(code)
	if err := m.release(b, end, sandbox.ReasonAgentExit); err != nil {
		m.log.Error("end a sandbox whose agent exited", "sandbox", b.id, "err", err)
	}
}

// AgentStdin appends what body holds to the stdin of the running agent of a sandbox of the
// tenant in ctx; eof closes it after that.
func (m *Manager) AgentStdin(ctx context.Context, id string, body io.Reader, eof bool) (api.AgentStdin, error) {
	b, err := m.live(ctx, id, "write to the agent of")
	if err != nil {
		return api.AgentStdin{}, err
	}
	run := b.runningAgent()
	if run == nil {
		return api.AgentStdin{}, errdefs.New(errdefs.ErrConflict, "sandbox %s has no agent running: start it first (POST /api/v1/sandboxes/%s/start)", id, id)
	}
	data, err := io.ReadAll(io.LimitReader(body, maxAgentStdin+1))
	if err != nil {
		return api.AgentStdin{}, errdefs.Invalid("body", "read: %v", err)
	}
	if len(data) > maxAgentStdin {
		return api.AgentStdin{}, errdefs.TooLarge("body", "at most %d bytes go to the agent's stdin at once", maxAgentStdin)
	}
	if err := run.stdin.write(data, eof); err != nil {
		return api.AgentStdin{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return api.AgentStdin{Bytes: len(data), EOF: eof}, nil
}

// beginAgent marks run as b's agent: b running (for reason agent_started when it was ready) and
// busy until endAgent. A sandbox whose agent runs already is refused.
func (b *box) beginAgent(ctx context.Context, run *agentRun) (driver.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agent != nil {
		return nil, &errdefs.FieldError{Field: "agent", Kind: errdefs.ErrConflict, Message: fmt.Sprintf("sandbox %s: its agent is running already", b.id)}
	}
	sb, err := b.beginLocked(ctx, "start", true, sandbox.ReasonAgentStarted)
	if err != nil {
		return nil, err
	}
	b.agent = run
	return sb, nil
}

// endAgent ends what beginAgent started.
func (b *box) endAgent(run *agentRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.agent == run {
		b.agent = nil
	}
	b.busy--
	b.lastActive = time.Now()
}

// runningAgent is b's agent while it runs, or nil.
func (b *box) runningAgent() *agentRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.agent
}

// agentExited notes b's agent's exit code, for the transition its exit makes.
func (b *box) agentExited(code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.agentRC = &code
}

// stdinQueue is an agent's stdin: what clients wrote and it has not read, up to maxAgentStdin.
// Its Read blocks until there is data, its end (eof) or its close (the agent exited).
type stdinQueue struct {
	mu     sync.Mutex // guards everything below
	cond   *sync.Cond
	buf    []byte
	eof    bool // no more writes; Read returns io.EOF once buf is empty
	closed bool // the agent exited: Read returns io.EOF, writes are refused
}

func newStdinQueue() *stdinQueue {
	q := &stdinQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *stdinQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.eof && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) == 0 || q.closed {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	if len(q.buf) == 0 {
		q.buf = nil
	}
	return n, nil
}

// write appends p, then ends the stream when eof is set.
func (q *stdinQueue) write(p []byte, eof bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return errdefs.New(errdefs.ErrConflict, "its agent has exited")
	case q.eof:
		return errdefs.New(errdefs.ErrConflict, "its agent's stdin is closed (eof=true was sent)")
	case len(q.buf)+len(p) > maxAgentStdin:
		return errdefs.New(errdefs.ErrQuota, "its agent has %d bytes of stdin unread; %d more would pass %d: retry once it has read them", len(q.buf), len(p), maxAgentStdin)
	}
	q.buf = append(q.buf, p...)
	q.eof = eof
	q.cond.Broadcast()
	return nil
}

// close ends the queue: the agent exited.
func (q *stdinQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}
