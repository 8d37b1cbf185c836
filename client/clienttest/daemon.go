// Package clienttest runs an in-memory stand-in for the airlock daemon, for tests of programs that
// use package client (and of the airlock CLI). It speaks the routes and envelopes of the HTTP API
// but isolates nothing: commands are interpreted by a toy shell (see Daemon), files live in maps.
package clienttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// Token is the API key a Daemon accepts.
const Token = "test-token"

// Daemon is a fake airlock daemon on a loopback port.
//
// Its toy shell runs an argv, or the words of a "/bin/sh -c LINE" command, and knows:
// echo ARGS (to stdout), warn ARGS (to stderr), cat [FILE] (stdin or a file to stdout),
// sleep SECONDS, exit N, true, false and pwd. Anything else exits 127. A signal frame ends the
// running command with 128+signal.
type Daemon struct {
	// URL is the daemon's base URL, for client.New or AIRLOCK_HOST.
	URL string

	srv *httptest.Server

	mu        sync.Mutex // guards the fields below and every sandbox
	n         int        // IDs handed out
	sandboxes map[string]*sandbox
	order     []string      // sandbox IDs in creation order
	changed   chan struct{} // closed and replaced on every change, to wake log followers
}

// sandbox is the state of one fake sandbox.
type sandbox struct {
	api.Sandbox
	files map[string]*file // by absolute path
	logs  []api.LogEntry
	execs []api.Execution
}

type file struct {
	data    []byte
	mode    uint32
	dir     bool
	modTime time.Time
}

// NewDaemon starts a fake daemon. Close it when done.
func NewDaemon() *Daemon {
	d := &Daemon{sandboxes: map[string]*sandbox{}, changed: make(chan struct{})}
	d.srv = httptest.NewServer(d.routes())
	d.URL = d.srv.URL
	return d
}

// Close stops the daemon and waits for its requests to finish; it ends log streams first.
func (d *Daemon) Close() {
	d.srv.CloseClientConnections()
	d.srv.Close()
}

// Client returns a client of d with the right key that shares d's HTTP transport.
func (d *Daemon) Client() *client.Client {
	c, err := client.New(d.URL, Token, client.WithHTTPClient(d.srv.Client()))
	if err != nil {
		panic(err) // d.URL is always a valid base URL
	}
	return c
}

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		reply(w, http.StatusOK, api.Health{Status: "ok", Version: "fake", Sandboxes: len(d.sandboxes)})
	})
	authed := func(pattern string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+Token {
				fail(w, http.StatusUnauthorized, api.Error{Code: api.CodeUnauthorized, Message: "missing or unknown API key"})
				return
			}
			h(w, r)
		})
	}
	authed("GET /api/v1/capabilities", d.capabilities)
	authed("POST /api/v1/sandboxes", d.create)
	authed("GET /api/v1/sandboxes", d.list)
	authed("GET /api/v1/sandboxes/{id}", d.sandboxOp(nil))
	authed("DELETE /api/v1/sandboxes/{id}", d.sandboxOp(terminate))
	authed("POST /api/v1/sandboxes/{id}/terminate", d.sandboxOp(terminate))
	authed("POST /api/v1/sandboxes/{id}/pause", d.sandboxOp(pause))
	authed("POST /api/v1/sandboxes/{id}/resume", d.sandboxOp(resume))
	authed("POST /api/v1/sandboxes/{id}/start", d.sandboxOp(start))
	authed("GET /api/v1/sandboxes/{id}/metrics", d.metrics)
	authed("POST /api/v1/sandboxes/{id}/exec", d.exec)
	authed("GET /api/v1/sandboxes/{id}/exec", d.execInteractive)
	authed("GET /api/v1/sandboxes/{id}/execs", d.execs)
	authed("GET /api/v1/sandboxes/{id}/execs/{execId}", d.execution)
	authed("GET /api/v1/sandboxes/{id}/logs", d.logs)
	authed("GET /api/v1/sandboxes/{id}/files", d.download)
	authed("PUT /api/v1/sandboxes/{id}/files", d.upload)
	authed("DELETE /api/v1/sandboxes/{id}/files", d.remove)
	authed("GET /api/v1/sandboxes/{id}/files/list", d.listFiles)
	authed("GET /api/v1/sandboxes/{id}/files/stat", d.stat)
	authed("POST /api/v1/sandboxes/{id}/files/mkdir", d.mkdir)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path})
	})
	return mux
}

func reply(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Response[any]{OK: true, Data: data}) // a failure is the client's to see
}

func fail(w http.ResponseWriter, status int, e api.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Response[any]{Error: &e}) // a failure is the client's to see
}

func (d *Daemon) capabilities(w http.ResponseWriter, r *http.Request) {
	caps := api.Capabilities{Version: "fake", DefaultIsolation: api.LevelProcess, Features: map[string]bool{"interactiveExec": true, "logStream": true, "gpu": false},
		Reasons: map[string]string{"gpu": "the fake daemon has no GPU"}}
	for _, l := range []string{api.LevelProcess, api.LevelContainer, api.LevelWasm, api.LevelMicroVM, api.LevelEnclave} {
		lc := api.LevelCapability{Level: l, Available: l == api.LevelProcess || l == api.LevelWasm}
		if !lc.Available {
			lc.Reason = "not offered by the fake daemon"
		}
		caps.Levels = append(caps.Levels, lc)
	}
	reply(w, http.StatusOK, caps)
}

func (d *Daemon) create(w http.ResponseWriter, r *http.Request) {
	var spec api.Spec
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		fail(w, http.StatusBadRequest, api.Error{Code: api.CodeInvalidArgument, Message: "bad JSON: " + err.Error()})
		return
	}
	if e, status := validate(&spec); e != nil {
		fail(w, status, *e)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	now := time.Now().UTC()
	sb := &sandbox{files: map[string]*file{
		"/":          {dir: true, mode: 0o755, modTime: now},
		"/tmp":       {dir: true, mode: 0o1777, modTime: now},
		"/workspace": {dir: true, mode: 0o755, modTime: now},
	}}
	sb.Sandbox = api.Sandbox{
		ID: fmt.Sprintf("sbx_fake%04d", d.n), Status: api.StatusProvisioning, CreatedAt: now, UpdatedAt: now,
		ExpiresAt: now.Add(time.Duration(spec.Timeout.MaxDurationSeconds) * time.Second), Spec: spec,
	}
	// Absolute, as the daemon answers them (on loopback, plain HTTP).
	base := "//" + r.Host + "/api/v1/sandboxes/" + sb.ID
	sb.Endpoints = api.Endpoints{Exec: "ws:" + base + "/exec", Files: "http:" + base + "/files", Logs: "ws:" + base + "/logs", Metrics: "http:" + base + "/metrics"}
	d.transition(sb, api.StatusReady, "created")
	d.sandboxes[sb.ID] = sb
	d.order = append(d.order, sb.ID)
	reply(w, http.StatusCreated, sb.Sandbox)
}

// validate defaults spec and checks a few fields the way the daemon does. The fake's default
// level is process (capabilities' defaultIsolation): it offers no container level, the daemon's
// default.
func validate(spec *api.Spec) (*api.Error, int) {
	if spec.Isolation == "" {
		spec.Isolation = api.LevelProcess
	}
	if spec.Resources.GPUEnabled {
		return &api.Error{Code: api.CodeGPUUnavailable, Field: "resources.gpuEnabled", Message: "no GPU: the fake daemon has none"}, http.StatusUnprocessableEntity
	}
	if spec.Isolation != api.LevelProcess && spec.Isolation != api.LevelWasm {
		return &api.Error{Code: api.CodeIsolationUnavailable, Field: "isolation",
			Message: fmt.Sprintf("isolation %q is not available on this host", spec.Isolation)}, http.StatusUnprocessableEntity
	}
	r := &spec.Resources
	if r.CPU > 8 {
		return &api.Error{Code: api.CodeInvalidArgument, Field: "resources.cpu", Message: "must be between 0.01 and 8 vCPUs"}, http.StatusBadRequest
	}
	if r.MemoryMB > 32768 {
		return &api.Error{Code: api.CodeInvalidArgument, Field: "resources.memoryMb", Message: "must be between 16 and 32768 MiB"}, http.StatusBadRequest
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if r.CPU == 0 {
		r.CPU = 1
	}
	def(&r.MemoryMB, 2048)
	def(&r.DiskMB, 5120)
	def(&r.NetworkMbps, 100)
	def(&r.MaxProcesses, 64)
	def(&r.MaxOpenFiles, 1024)
	def(&spec.Timeout.MaxDurationSeconds, 3600)
	def(&spec.Timeout.IdleTimeoutSeconds, 300)
	if spec.User == "" {
		spec.User = api.UserAgent
	}
	if spec.Workdir == "" {
		spec.Workdir = "/workspace"
	}
	if spec.Network.EgressPolicy == "" {
		spec.Network.EgressPolicy = api.EgressNone
	}
	return nil, 0
}

// transition moves sb to status; d.mu must be held.
func (d *Daemon) transition(sb *sandbox, to, reason string) {
	now := time.Now().UTC()
	sb.Transitions = append(sb.Transitions, api.Transition{From: sb.Status, To: to, Reason: reason, At: now})
	sb.Status, sb.Reason, sb.UpdatedAt = to, reason, now
	d.logLocked(sb, api.LogEntry{Stream: api.StreamEvent, Event: &api.Event{Type: api.EventSandboxStatus,
		SandboxID: sb.ID, Message: to, Data: map[string]any{"to": to, "reason": reason}}})
}

// logLocked appends a log entry and wakes followers; d.mu must be held.
func (d *Daemon) logLocked(sb *sandbox, e api.LogEntry) {
	e.Seq = int64(len(sb.logs) + 1)
	e.Time = time.Now().UTC()
	e.Timestamp, e.Message = e.Time, e.Data
	if e.Event != nil {
		e.Event.ID = fmt.Sprintf("evt_%d", e.Seq)
		e.Event.Time = e.Time
		e.Message = e.Event.Message
	}
	sb.logs = append(sb.logs, e)
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *Daemon) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []api.Sandbox{}
	for _, id := range d.order {
		sb := d.sandboxes[id]
		if st := q["status"]; len(st) > 0 && !slices.Contains(st, sb.Status) {
			continue
		}
		if a := q.Get("agentId"); a != "" && sb.AgentID != a {
			continue
		}
		match := true
		for _, kv := range q["metadata"] {
			k, v, _ := strings.Cut(kv, "=")
			if sb.Metadata[k] != v {
				match = false
			}
		}
		if match {
			s := sb.Sandbox
			s.Transitions = nil
			out = append(out, s)
		}
	}
	reply(w, http.StatusOK, out)
}

// lookup finds the sandbox of the request, or answers 404; d.mu must be held.
func (d *Daemon) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	sb := d.sandboxes[r.PathValue("id")]
	if sb == nil {
		fail(w, http.StatusNotFound, api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("sandbox %q not found", r.PathValue("id"))})
	}
	return sb
}

// live answers 409 unless sb can run commands; d.mu must be held.
func live(w http.ResponseWriter, sb *sandbox) bool {
	if sb.Status == api.StatusReady || sb.Status == api.StatusRunning {
		return true
	}
	fail(w, http.StatusConflict, api.Error{Code: api.CodeConflict, Status: sb.Status,
		Message: fmt.Sprintf("sandbox %s is %s", sb.ID, sb.Status)})
	return false
}

// A lifecycle operation changes sb, or returns the conflict that forbids it.
type lifecycleOp func(d *Daemon, sb *sandbox) *api.Error

func terminate(d *Daemon, sb *sandbox) *api.Error {
	if sb.Status != api.StatusTerminated {
		d.transition(sb, api.StatusTerminated, "requested")
	}
	return nil
}

func pause(d *Daemon, sb *sandbox) *api.Error {
	if sb.Status != api.StatusReady && sb.Status != api.StatusRunning {
		return &api.Error{Code: api.CodeConflict, Status: sb.Status, Message: "only a ready or running sandbox can be paused"}
	}
	d.transition(sb, api.StatusPaused, "requested")
	return nil
}

func resume(d *Daemon, sb *sandbox) *api.Error {
	if sb.Status != api.StatusPaused {
		return &api.Error{Code: api.CodeConflict, Status: sb.Status, Message: "only a paused sandbox can be resumed"}
	}
	d.transition(sb, api.StatusReady, "requested")
	return nil
}

// start starts the sandbox's agent, which the fake never runs: it stays running until terminated.
func start(d *Daemon, sb *sandbox) *api.Error {
	switch {
	case sb.Spec.Agent == nil && sb.Spec.Image == "":
		return &api.Error{Code: api.CodeConflict, Status: sb.Status, Field: "agent", Message: "the sandbox has no agent to start"}
	case sb.Status != api.StatusReady && sb.Status != api.StatusRunning:
		return &api.Error{Code: api.CodeConflict, Status: sb.Status, Message: "only a ready or running sandbox can start its agent"}
	}
	if sb.Status == api.StatusReady {
		d.transition(sb, api.StatusRunning, "agent_started")
	}
	return nil
}

func (d *Daemon) sandboxOp(op lifecycleOp) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		sb := d.lookup(w, r)
		if sb == nil {
			return
		}
		if op != nil {
			if e := op(d, sb); e != nil {
				fail(w, http.StatusConflict, *e)
				return
			}
		}
		reply(w, http.StatusOK, sb.Sandbox)
	}
}

func (d *Daemon) metrics(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sb := d.lookup(w, r)
	if sb == nil {
		return
	}
	cur := api.MetricsSample{Time: time.Now().UTC(), MemoryLimit: sb.Resources.MemoryMB << 20, PidsLimit: sb.Resources.MaxProcesses}
	reply(w, http.StatusOK, api.Metrics{SandboxID: sb.ID, Current: cur, Recent: []api.MetricsSample{cur}})
}
