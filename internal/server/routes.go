package server

import (
	"net/http"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/manager"
)

// opDoc documents a route for the OpenAPI document.
type opDoc struct {
	summary string
	// admin routes change a daemon-wide resource: only an admin key may call them (docs/security.md#who-is-trusted-with-what).
	admin   bool
	body    any // request body type (JSON), nil for none
	resp    any // the "data" of the success envelope, nil for none
	created bool
	query   []param
	path    []param // descriptions of path parameters beyond "an ID"
	// raw request/response bodies and streams, instead of JSON
	rawBody, rawResp bool
	rawType          string // the raw response's media type; application/octet-stream when ""
	stream           string // "websocket", "sse+websocket"
	// bare answers the object itself, and errors as {"error": {...}}, without the envelope (the
	// compatibility surface, seed 002).
	bare bool
	// status is the success status when it is neither 200 nor created's 201: 204 answers no
	// body; 202 marks a route that may also answer 202 (an async run), for the document.
	status int
	// toolRoute is a route a key bound by a toolsOnly policy may use (docs/tools.md#policies).
	toolRoute bool
	// ownEvents: the handler records the call itself (a tool.call event), so the request is not
	// also an api.request event once the handler ran.
	ownEvents bool
}

// successStatus is the status of a successful answer to method.
func (d opDoc) successStatus(method string) int {
	switch {
	case d.status == http.StatusNoContent:
		return d.status
	case method == http.MethodPost && d.created:
		return http.StatusCreated
	}
	return http.StatusOK
}

type param struct{ name, typ, desc string }

const (
	sbx = "/api/v1/sandboxes/{id}"
	// imageRef takes the rest of the path, so that a reference's slashes need no escaping:
	// /api/v1/images/ghcr.io/org/app:v1.
	imageRef = "/api/v1/images/{ref...}"
	poolPath = "/api/v1/pools/{name}"
	hookPath = "/api/v1/webhooks/{webhookId}"
	snapPath = "/api/v1/snapshots/{snapshotId}"
)

// refParam documents the image routes' {ref}.
var refParam = []param{{"ref", "string", "an image reference as pulled (python:3.12-slim, ghcr.io/org/app:v1, repo@sha256:...) " +
	"or a manifest digest (sha256:...): the rest of the path, where its slashes need no escaping"}}

// poolParam documents the pool routes' {name}.
var poolParam = []param{{"name", "string", "a warm pool's name: 1-64 letters, digits, '.', '_' or '-'"}}

// snapParam documents the snapshot routes' {snapshotId}.
var snapParam = []param{{"snapshotId", "string", "a snapshot's ID (snap_...)"}}

// hookParam documents the webhook routes' {webhookId}.
var hookParam = []param{{"webhookId", "string", "a webhook's ID (whk_...)"}}

// routes is the whole API.
func routes() []route {
	pathQ := []param{{"path", "string", "a path inside the sandbox; relative paths start at its workdir"}}
	return append([]route{
		{"GET", "/healthz", true, health, opDoc{summary: "Health of the daemon (no key needed)", resp: api.Health{}}},
		{"GET", "/api/v1/openapi.json", true, openapi, opDoc{summary: "This document (no key needed)"}},
		{"GET", "/metrics", true, promMetrics, opDoc{summary: "Prometheus metrics, daemon-wide, in the text exposition format (no key needed; 503 when the daemon exports none)",
			rawResp: true, rawType: "text/plain"}},
		{"GET", "/api/v1/capabilities", false, capabilities, opDoc{summary: "Isolation levels and features this host offers, with reasons", resp: api.Capabilities{}}},

		{"POST", "/api/v1/sandboxes", false, createSandbox, opDoc{summary: "Create a sandbox. It answers at once, 202 with status provisioning while the daemon makes it " +
			"(poll GET .../{id}: ready, or failed with the reason; operations sent meanwhile wait for it), or 201 ready when a warm pool served it; " +
			"with wait=true it answers 201 once the sandbox is ready (running when start is set), or the failure. Its level is the daemon's default " +
			"(capabilities' defaultIsolation: container unless the operator configured another) when isolation is left out", body: api.Spec{}, resp: api.Sandbox{}, created: true,
			status: http.StatusAccepted, query: []param{{"wait", "boolean", "answer once the sandbox is ready (201), or with the error that failed it"}}}},
		{"GET", "/api/v1/sandboxes", false, listSandboxes, opDoc{summary: "List the tenant's sandboxes, newest first", resp: []api.Sandbox{}, query: []param{
			{"status", "string", "repeatable; keep sandboxes in these statuses"},
			{"agentId", "string", "keep sandboxes of this agent"},
			{"metadata", "string", "repeatable key=value; keep sandboxes whose metadata has all of them"},
		}}},
		{"GET", sbx, false, getSandbox, opDoc{summary: "One sandbox, with its recorded transitions", resp: api.Sandbox{}}},
		{"DELETE", sbx, false, terminateSandbox, opDoc{summary: "Terminate a sandbox (the record is kept)", resp: api.Sandbox{}}},
		{"POST", sbx + "/terminate", false, terminateSandbox, opDoc{summary: "Terminate a sandbox (the record is kept)", resp: api.Sandbox{}}},
		{"POST", sbx + "/pause", false, pauseSandbox, opDoc{summary: "Freeze every process of the sandbox", resp: api.Sandbox{}}},
		{"POST", sbx + "/resume", false, resumeSandbox, opDoc{summary: "Thaw a paused sandbox", resp: api.Sandbox{}}},
		{"POST", sbx + "/start", false, startSandbox, opDoc{summary: "Start the sandbox's agent (its agent.command, or its image's entrypoint and cmd), waiting for a provisioning " +
			"sandbox to be ready: running while it runs, completed when it exits 0, failed (reason agent_exit) otherwise; its output is the sandbox's log. " +
			"409 naming agent when the sandbox has none, or its agent runs already", resp: api.Sandbox{}}},
		{"POST", sbx + "/agent/stdin", false, agentStdin, opDoc{summary: "Append the body's bytes (at most 1 MiB unread) to the stdin of the sandbox's running agent; " +
			"409 when none runs, 429 while it has 1 MiB unread", rawBody: true, resp: api.AgentStdin{}, query: []param{
			{"eof", "boolean", "close the agent's stdin after the body's bytes"}}}},

		{"POST", sbx + "/exec", false, execSync, opDoc{summary: "Run a command and wait for its result", body: api.ExecRequest{}, resp: api.ExecResult{}}},
		{"GET", sbx + "/exec", false, execInteractive, opDoc{summary: "Interactive exec over WebSocket: JSON frames (start, stdin, resize, eof, signal → started, stdout, stderr, exit)", resp: api.Frame{}, stream: "websocket"}},
		{"GET", sbx + "/execs", false, listExecs, opDoc{summary: "The sandbox's recorded execs, newest first", resp: []api.Execution{}}},
		{"GET", sbx + "/execs/{execId}", false, getExec, opDoc{summary: "One recorded exec", resp: api.Execution{}}},
		{"GET", sbx + "/logs", false, logs, opDoc{summary: "The sandbox's output and events; with follow=true streamed as SSE (Accept: text/event-stream) or WebSocket", resp: []api.LogEntry{}, stream: "sse+websocket", query: []param{
			{"follow", "boolean", "keep streaming until the sandbox ends"},
			{"since", "integer", "only entries with a greater seq"},
		}}},
		{"GET", sbx + "/events", false, events, opDoc{summary: "The sandbox's audit events (lifecycle, API calls, execs, files, network, limits, policy), oldest first, " +
			"a page at a time or followed", resp: api.EventPage{}, stream: "sse", query: eventQuery}},
		{"GET", sbx + "/replay", false, replay, opDoc{summary: "The sandbox's whole recorded history ordered for display: each event with its offset from creation, execs with their output", resp: api.Replay{}}},
		{"GET", "/api/v1/events", false, events, opDoc{summary: "The tenant's audit events across its sandboxes and API calls, oldest first, a page at a time or followed", resp: api.EventPage{},
			stream: "sse", query: append([]param{{"sandboxId", "string", "keep events of this sandbox"}}, eventQuery...)}},
		{"GET", "/api/v1/audit/verify", false, verifyAudit, opDoc{summary: "Walk the audit log's hash chain (every tenant's events: one chain) and say whether it is whole, " +
			"or where it first breaks. A tenant key's answer may be up to a minute old and names no other tenant's event; an admin key's is fresh", resp: api.AuditVerification{}}},
		{"PUT", sbx + "/network", false, updateNetwork, opDoc{summary: "Change the network policy live; credentials sent without value or secret keep theirs", body: api.Network{}, resp: api.Sandbox{}}},
		{"GET", sbx + "/metrics", false, metrics, opDoc{summary: "Current and recent CPU, memory, pids, disk and network counters", resp: api.Metrics{}}},

		{"GET", sbx + "/files", false, downloadFile, opDoc{summary: "Download a file", rawResp: true, query: pathQ}},
		{"PUT", sbx + "/files", false, uploadFile, opDoc{summary: "Upload a file (the body is its content), replacing it atomically", rawBody: true, resp: api.FileInfo{}, query: append(pathQ,
			param{"mode", "string", "permission bits in octal (default 0644)"}, param{"parents", "boolean", "create missing parent directories"})}},
		{"DELETE", sbx + "/files", false, removeFile, opDoc{summary: "Remove a file or directory", resp: api.FileInfo{}, query: append(pathQ,
			param{"recursive", "boolean", "remove a directory tree"})}},
		{"GET", sbx + "/files/list", false, listFiles, opDoc{summary: "List a directory", resp: []api.FileInfo{}, query: pathQ}},
		{"GET", sbx + "/files/stat", false, statFile, opDoc{summary: "Describe a file (a final symlink is not followed)", resp: api.FileInfo{}, query: pathQ}},
		{"POST", sbx + "/files/mkdir", false, mkdir, opDoc{summary: "Create a directory", resp: api.FileInfo{}, created: true, query: append(pathQ,
			param{"parents", "boolean", "create missing parents, like mkdir -p"})}},

		{"POST", sbx + "/snapshots", false, snapshotSandbox, opDoc{summary: "Save the sandbox's state: its writable layer, environment and workdir, and its memory and processes " +
			"where the level can. The body may be left out (no name or description)", body: api.SnapshotRequest{}, resp: api.Snapshot{}, created: true}},
		{"GET", sbx + "/snapshots", false, listSandboxSnapshots, opDoc{summary: "The sandbox's snapshots, newest first", resp: []api.Snapshot{}}},
		{"POST", sbx + "/restore", false, restoreSandbox, opDoc{summary: "Put the sandbox back in the state of one of its tenant's snapshots; it answers {id, state: ready, restoredFrom, restoredAt} " +
			"and the sandbox's other fields", body: api.RestoreRequest{}, resp: api.Restore{}}},
		{"POST", sbx + "/fork", false, forkSandbox, opDoc{summary: "Snapshot the sandbox and start count new sandboxes from that snapshot, which is kept until deleted. " +
			"The body may be left out (one sandbox, no name)", body: api.ForkRequest{}, resp: api.Fork{}, created: true}},
		{"GET", "/api/v1/snapshots", false, listSnapshots, opDoc{summary: "The tenant's snapshots, those of ended sandboxes included, newest first", resp: []api.Snapshot{}}},
		{"GET", snapPath, false, getSnapshot, opDoc{summary: "One snapshot", resp: api.Snapshot{}, path: snapParam}},
		{"DELETE", snapPath, false, deleteSnapshot, opDoc{summary: "Delete a snapshot; answers it as it was", resp: api.Snapshot{}, path: snapParam}},

		{"GET", "/api/v1/images", false, listImages, opDoc{summary: "List the host's images (one store, shared by every tenant), sorted by ref", resp: []api.Image{}}},
		{"POST", "/api/v1/images", false, pullImage, opDoc{admin: true, summary: "Pull an image from an allowed registry (with the daemon host's registry credentials); answers once it is unpacked",
			body: api.PullRequest{}, resp: api.Image{}, created: true}},
		{"POST", "/api/v1/images/prune", false, pruneImages, opDoc{admin: true, summary: "Delete the layers no image refers to; those a live sandbox uses are kept", resp: api.ImageRemoval{}}},
		{"GET", imageRef, false, getImage, opDoc{summary: "One image", resp: api.Image{}, path: refParam}},
		{"DELETE", imageRef, false, removeImage, opDoc{admin: true, summary: "Remove an image (by digest: every ref of it) and the layers only it used; a live sandbox keeps the layers it uses until it ends",
			resp: api.ImageRemoval{}, path: refParam}},

		{"GET", "/api/v1/pools", false, listPools, opDoc{summary: "List the warm pools (daemon-wide, shared by every tenant) with their counters, sorted by name", resp: []api.PoolStatus{}}},
		{"GET", poolPath, false, getPool, opDoc{summary: "One warm pool with its counters", resp: api.PoolStatus{}, path: poolParam}},
		{"PUT", poolPath, false, putPool, opDoc{admin: true, summary: "Make or replace a warm pool (replacing ends its unclaimed sandboxes); the body's name may be left out. " +
			"A create whose spec has the pool's shape claims one of its ready sandboxes", body: api.Pool{}, resp: api.PoolStatus{}, path: poolParam}},
		{"DELETE", poolPath, false, deletePool, opDoc{admin: true, summary: "Remove a warm pool made through the API and end its unclaimed sandboxes; answers its last status",
			resp: api.PoolStatus{}, path: poolParam}},

		{"GET", "/api/v1/volumes", false, listVolumes, opDoc{summary: "The operator's volumes the tenant may mount (volumes: [{name, path}]); an admin key sees every one with its host path and tenants",
			resp: []api.VolumeInfo{}}},
		{"GET", "/api/v1/templates", false, listTemplates, opDoc{summary: "The root filesystem templates the tenant may name (template: NAME): host, and the operator's directories", resp: []api.TemplateInfo{}}},
		{"GET", "/api/v1/tenants", false, listTenants, opDoc{summary: "The tenant's quota and what it uses of it; an admin key sees every tenant", resp: []api.Tenant{}}},

		{"POST", "/api/v1/webhooks", false, createWebhook, opDoc{summary: "Register a webhook: the tenant's events it selects (default sandbox. and limit.) are POSTed to its URL, " +
			"signed with HMAC-SHA256 over the timestamp and the body, retried with backoff. The answer holds the secret, the only time it is shown",
			body: api.WebhookRequest{}, resp: api.Webhook{}, created: true}},
		{"GET", "/api/v1/webhooks", false, listWebhooks, opDoc{summary: "The tenant's webhooks with their counters, oldest first", resp: []api.Webhook{}}},
		{"GET", hookPath, false, getWebhook, opDoc{summary: "One webhook with its counters", resp: api.Webhook{}, path: hookParam}},
		{"DELETE", hookPath, false, deleteWebhook, opDoc{summary: "Remove a webhook and its delivery log (pending deliveries are not sent); answers it as it was",
			resp: api.Webhook{}, path: hookParam}},
		{"GET", hookPath + "/deliveries", false, webhookDeliveries, opDoc{summary: "The webhook's delivery log, newest first (the last 1000 finished deliveries and every pending one)",
			resp: []api.WebhookDelivery{}, path: hookParam, query: []param{{"limit", "integer", "at most this many (default 100, at most 1000)"}}}},
		{"POST", hookPath + "/test", false, testWebhook, opDoc{summary: "Send a webhook.test event now, once, and answer with the delivery (also logged): delivered, or failed with the receiver's answer",
			resp: api.WebhookDelivery{}, path: hookParam}},

		{"POST", "/api/sandbox/create", false, compatCreate, opDoc{summary: "Compatibility (seed 002, bare objects): create a sandbox; mode container (the daemon's default level) or wasm; " +
			"a plan's concurrent sandboxes are a 429 beyond (free: 3)", body: api.CompatCreateRequest{}, resp: api.CompatSandbox{}, created: true, bare: true}},
		{"GET", "/api/sandbox/{id}", false, compatGet, opDoc{summary: "Compatibility: one sandbox; status provisioning, ready, running, destroyed or error", resp: api.CompatSandbox{}, bare: true}},
		{"DELETE", "/api/sandbox/{id}", false, compatDelete, opDoc{summary: "Compatibility: destroy a sandbox (204, no body); its record stays, status destroyed", bare: true, status: http.StatusNoContent}},
		{"POST", "/api/sandbox/{id}/run", false, compatRun, opDoc{summary: "Compatibility: run Python code (timeout default 30 s, at most 600); async answers 202 with a run to poll",
			body: api.CompatRunRequest{}, resp: api.CompatRun{}, bare: true, status: http.StatusAccepted}},
		{"GET", "/api/sandbox/{id}/run/{runId}", false, compatGetRun, opDoc{summary: "Compatibility: poll an async run", resp: api.CompatRun{}, bare: true}},
	}, toolRoutes()...)
}

func createSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var spec api.Spec
	if err := decode(w, r, s.cfg.MaxBodyBytes, &spec); err != nil {
		return nil, err
	}
	if wait, err := boolQuery(r, "wait"); err != nil || wait {
		if err != nil {
			return nil, err
		}
		return s.m.Create(syncCtx(r), spec)
	}
	sb, err := s.m.CreateAsync(syncCtx(r), spec)
	if err == nil && sb.Status == api.StatusProvisioning {
		return accepted{sb}, nil // 202: being provisioned, to be polled (or ?wait=true)
	}
	return sb, err
}

func listSandboxes(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	o := manager.ListOptions{AgentID: q.Get("agentId")}
	for _, v := range q["status"] {
		o.Status = append(o.Status, strings.Split(v, ",")...)
	}
	for _, kv := range q["metadata"] {
		k, v, _ := strings.Cut(kv, "=")
		if o.Metadata == nil {
			o.Metadata = map[string]string{}
		}
		o.Metadata[k] = v
	}
	return s.m.List(r.Context(), o)
}

func updateNetwork(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var n api.Network
	if err := decode(w, r, s.cfg.MaxBodyBytes, &n); err != nil {
		return nil, err
	}
	return s.m.UpdateNetwork(syncCtx(r), r.PathValue("id"), n)
}

func getSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Get(r.Context(), r.PathValue("id"))
}

func terminateSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Terminate(syncCtx(r), r.PathValue("id"))
}

func pauseSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Pause(syncCtx(r), r.PathValue("id"))
}

func resumeSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Resume(syncCtx(r), r.PathValue("id"))
}

func startSandbox(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Start(syncCtx(r), r.PathValue("id"))
}

func agentStdin(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	eof, err := boolQuery(r, "eof")
	if err != nil {
		return nil, err
	}
	return s.m.AgentStdin(syncCtx(r), r.PathValue("id"), r.Body, eof)
}

func execSync(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.ExecRequest
	if err := decode(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return nil, err
	}
	// The command runs to its end (or timeout) and is recorded even if the client hangs up.
	return s.m.Exec(syncCtx(r), r.PathValue("id"), req, manager.Stream{})
}

func listExecs(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Execs(r.Context(), r.PathValue("id"))
}

func getExec(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Execution(r.Context(), r.PathValue("id"), r.PathValue("execId"))
}

func metrics(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	return s.m.Metrics(r.Context(), r.PathValue("id"))
}
