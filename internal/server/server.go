// Package server is airlock's HTTP API (docs/api.md#http-api): routes, authentication, strict decoding, and
// the one mapping from errors to HTTP statuses. It holds no sandbox logic; the manager does.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/compat"
	"github.com/airlockrun/airlock/internal/console"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/manager"
	airmetrics "github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tenant"
	"github.com/airlockrun/airlock/internal/tools"
	"github.com/airlockrun/airlock/internal/webhook"
)

// Config tunes the API; zero values mean the defaults.
type Config struct {
	// MaxBodyBytes caps JSON request bodies (HTTP 413 beyond). Default 1 MiB.
	MaxBodyBytes int64
	// MaxUploadBytes caps one file upload. Default 1 GiB (the sandbox's diskMb caps it too).
	MaxUploadBytes int64
	// Version is reported by /healthz and the capabilities.
	Version string
	// PublicURL is the daemon's address as clients reach it (config publicUrl), in front of a
	// sandbox's endpoints; "" takes each request's Host and scheme (endpoints.go).
	PublicURL string
	// Metrics serves GET /metrics (internal/metrics' Handler), without a key; nil answers 503.
	Metrics http.Handler
	// Webhooks serves the webhook routes; nil answers 503.
	Webhooks *webhook.Dispatcher
	// ReadTimeout and WriteTimeout are the http.Server's: the API lifts them for a key holder's
	// request and bounds its progress by them instead (deadlines.go). Zero: no deadlines.
	ReadTimeout, WriteTimeout time.Duration
	// Unauthenticated, when set, counts a request refused with 401, by reason (metrics'
	// Unauthenticated). Such requests are counted, never recorded.
	Unauthenticated func(reason string)
	// RateLimited, when set, counts a request refused with 429 for its tenant's request rate;
	// such requests are not recorded either, or a tenant past its rate would grow the store.
	RateLimited func()
	// Tools is the tool gateway the tool routes and /mcp serve; nil answers 503.
	Tools *tools.Gateway
}

// Images is the daemon's image store, which the image API serves: Store, or Err saying why
// there is none (the image API then answers 503 with it).
type Images struct {
	Store *image.Store
	Err   error
}

// Server serves the API.
type Server struct {
	cfg     Config
	m       *manager.Manager
	store   *store.Store
	drivers *driver.Registry
	images  Images
	log     *slog.Logger
	mux     *http.ServeMux
	rates   *rateLimits
	chain   chainCheck // GET /api/v1/audit/verify's walks

	inflight sync.WaitGroup // requests being handled (Wait)
	cutOff   atomic.Bool    // CutOff was called: answers from now on reach no one

	mcpOnce  sync.Once     // makes mcp at the first request of /mcp
	mcp      http.Handler  // the MCP endpoint (tools.go)
	stopping chan struct{} // closed by EndStreams
	stopOnce sync.Once
}

// EndStreams ends the idle streams (MCP sessions' server-message streams) as the daemon begins
// to stop, so that they do not hold its stop for the shutdown grace.
func (s *Server) EndStreams() { s.stopOnce.Do(func() { close(s.stopping) }) }

// CutOff tells the server that the daemon is closing every connection: requests that end
// from now on are recorded as closed by the daemon's shutdown, not as answered.
func (s *Server) CutOff() { s.cutOff.Store(true) }

// Wait waits up to d for the requests being handled to end, and reports whether they did.
func (s *Server) Wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// route is one API route: its pattern, whether it needs a key, its handler and its documentation
// (the OpenAPI document is built from this table, so it cannot miss a route).
type route struct {
	method, path string
	public       bool
	handle       func(s *Server, w http.ResponseWriter, r *http.Request) (any, error)
	doc          opDoc
}

// New returns the API over a manager, its store and levels, and the host's image store (the
// same one the levels use).
func New(cfg Config, m *manager.Manager, st *store.Store, drivers *driver.Registry, images Images, log *slog.Logger) *Server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = 1 << 30
	}
	s := &Server{cfg: cfg, m: m, store: st, drivers: drivers, images: images, log: log, mux: http.NewServeMux(), stopping: make(chan struct{})}
	s.rates = newRateLimits(func(string) api.Quota { return api.Quota{} })
	if m != nil {
		s.rates = newRateLimits(m.Grants().QuotaOf)
	}
	for _, rt := range routes() {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	// The web console: a page of the daemon's that talks to the API above with its user's key,
	// like any other client (docs/console.md); its files need no key.
	ui := console.Handler()
	s.mux.Handle("GET /ui", ui)
	s.mux.Handle("GET "+console.Prefix, ui)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorAs(w, nil, errNoRoute(r), strings.HasPrefix(r.URL.Path, compat.Prefix))
	})
	return s
}

func errNoRoute(r *http.Request) error {
	return errdefs.New(errdefs.ErrNotFound, "no route %s %s", r.Method, r.URL.Path)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// wrap authenticates, calls the handler and writes its answer in the envelope.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		t0 := time.Now()
		log := s.log.With("method", r.Method, "path", r.URL.Path)
		var keyID string
		if !rt.public {
			who, err := s.authenticate(r, rt)
			if err != nil {
				// Not recorded (docs/security.md#who-is-trusted-with-what): what a stranger sends must not grow the store. The
				// refusal is counted in the metrics (authenticate).
				w.Header().Set("WWW-Authenticate", `Bearer realm="airlock"`)
				writeErrorAs(w, log, err, rt.doc.bare)
				return
			}
			keyID = who.KeyID
			ctx := tenant.WithKey(tenant.With(r.Context(), who.Tenant), who.KeyID)
			if who.Admin {
				ctx = tenant.WithAdmin(ctx)
			}
			r = s.lift(w, r.WithContext(ctx), rt.doc.rawBody)
			log = log.With("tenant", who.Tenant)
		}
		var data any
		var err error
		if !rt.public {
			if err := s.rateLimit(w, r); err != nil {
				writeErrorAs(w, log, err, rt.doc.bare)
				if s.cfg.RateLimited != nil {
					s.cfg.RateLimited()
				}
				return
			}
			err = s.checkRole(r, rt)
			if err == nil {
				err = s.toolsOnly(r, rt)
			}
		}
		handled := err == nil
		if handled {
			data, err = rt.handle(s, w, r)
		}

		status := rt.doc.successStatus(r.Method)
		if a, ok := data.(accepted); ok {
			status, data = http.StatusAccepted, a.data
		}
		switch {
		case errors.Is(err, written):
		case err != nil:
			s.writeDeadline(w)
			writeErrorAs(w, log, err, rt.doc.bare)
		case status == http.StatusNoContent:
			s.writeDeadline(w)
			w.WriteHeader(status)
		case rt.doc.bare:
			s.writeDeadline(w)
			writeBare(w, status, data)
		default:
			s.writeDeadline(w)
			writeJSON(w, status, s.absolute(r, data))
		}
		if rt.doc.ownEvents && handled {
			// recorded by the handler (tool.call events)
		} else if r.Method != http.MethodGet && r.Method != http.MethodHead || err != nil && !errors.Is(err, written) {
			id := r.PathValue("id")
			if id == "" { // a create: the call belongs to the new sandbox
				switch sb := data.(type) {
				case api.Sandbox:
					id = sb.ID
				case api.CompatSandbox:
					id = sb.ID
				}
			}
			s.audit(r, id, keyID, t0, err, status)
		}
		log.Debug("request", "took", time.Since(t0), "err", err)
	})
}

// audit records an API call of a key holder that changed something or was refused (the audit
// log's "who did what, from where"): ok calls give their status, refusals their error. Calls
// without a valid key are only counted (wrap).
func (s *Server) audit(r *http.Request, sandboxID, keyID string, t0 time.Time, err error, status int) {
	if s.m == nil {
		return // a server of the image API alone (tests)
	}
	req := manager.Request{Method: r.Method, Path: r.URL.Path, SandboxID: sandboxID, KeyID: keyID,
		Remote: r.RemoteAddr, UserAgent: r.UserAgent(), Status: status, Duration: time.Since(t0)}
	if err != nil && !errors.Is(err, written) {
		st, e := errorStatus(err)
		req.Status, req.Code = st, e.Code
	}
	if s.cutOff.Load() {
		req.ClosedBy = api.EndedByDaemonShutdown
	}
	s.m.RecordRequest(r.Context(), req)
}

// rateLimit refuses an authenticated request its tenant's rate quota does not allow (429 with
// Retry-After).
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request) error {
	ten := tenant.From(r.Context())
	if ok, wait := s.rates.allow(ten, time.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return &errdefs.FieldError{Field: "quota.requestsPerSecond", Kind: errdefs.ErrQuota,
			Message: fmt.Sprintf("tenant %q is sending requests faster than its quota allows; retry after %s", ten, wait.Round(time.Millisecond))}
	}
	return nil
}

// checkRole refuses a request of an admin route made with a tenant key (403).
func (s *Server) checkRole(r *http.Request, rt route) error {
	if rt.doc.admin && !tenant.IsAdmin(r.Context()) {
		return errdefs.New(errdefs.ErrPermissionDenied, "%s %s changes a daemon-wide resource: it needs an admin key (the operator's: airlock keys create --admin), not a tenant key",
			r.Method, rt.path)
	}
	return nil
}

// authenticate checks the bearer key and returns who it acts for. The key is the Authorization
// header's, or a browser's WebSocket's subprotocol airlock.bearer.<key> (browser.go).
func (s *Server) authenticate(r *http.Request, rt route) (store.Principal, error) {
	if v, ok := tenant.VouchedFrom(r.Context()); ok { // a Kubernetes node's front route (tenant.Vouched)
		return store.Principal{Tenant: v.Tenant, KeyID: v.By}, nil
	}
	h := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || key == "" {
		pk, err := s.protocolKey(r, rt)
		switch {
		case err != nil:
			s.unauthenticated(airmetrics.UnauthenticatedProtocol)
			return store.Principal{}, err
		case pk == "":
			s.unauthenticated(airmetrics.UnauthenticatedMissing)
			return store.Principal{}, errdefs.New(errdefs.ErrUnauthenticated, "an API key is required: Authorization: Bearer <key> (create one with `airlock keys create --tenant NAME`)")
		}
		key = pk
	}
	who, err := s.store.Authenticate(r.Context(), strings.TrimSpace(key))
	if err != nil {
		if errors.Is(err, errdefs.ErrUnauthenticated) {
			s.unauthenticated(airmetrics.UnauthenticatedInvalid)
			return store.Principal{}, errdefs.New(errdefs.ErrUnauthenticated, "the API key is unknown or revoked")
		}
		return store.Principal{}, err
	}
	return who, nil
}

func (s *Server) unauthenticated(reason string) {
	if s.cfg.Unauthenticated != nil {
		s.cfg.Unauthenticated(reason)
	}
}

func health(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	h := api.Health{Status: "ok", Version: s.cfg.Version, Sandboxes: s.m.Live()}
	if sh := s.store.Probe(r.Context()); sh.Degraded {
		h.Status, h.Reason = "degraded", fmt.Sprintf("the daemon's store cannot be written since %s: %s", sh.Since.Format(time.RFC3339), sh.Reason)
	}
	return h, nil
}

func capabilities(s *Server, w http.ResponseWriter, r *http.Request) (any, error) {
	c := api.Capabilities{Version: s.cfg.Version, DefaultIsolation: s.m.DefaultIsolation(), Features: map[string]bool{
		"exec": true, "execInteractive": true, "pty": true, "files": true, "logs": true,
		"metrics": true, "pauseResume": true, "snapshots": s.m.SnapshotsAvailable(), "networkPolicy": true, "liveNetworkPolicy": true,
		"networkCredentials": true, "events": true, "webhooks": s.cfg.Webhooks != nil, "gpu": false,
		"tools": s.cfg.Tools != nil, "mcp": s.cfg.Tools != nil,
	}, Reasons: map[string]string{"gpu": sandbox.GPUUnavailableReason}}
	// Which levels save what is in each level's features: snapshot:filesystem, snapshot:memory
	// (and snapshot:prepared-restore, restores made ready ahead).
	for _, dc := range s.drivers.Report() {
		c.Levels = append(c.Levels, api.LevelCapability{Level: dc.Level, Available: dc.Available, Reason: dc.Reason, Fix: dc.Fix, Features: dc.Features, Detail: dc.Detail})
	}
	return c, nil
}

// accepted is a handler's answer that is 202 Accepted rather than the route's success status:
// work started, to be polled (an asynchronous create).
type accepted struct{ data any }

// syncCtx is the context of work that must finish and be recorded even if the client hangs up.
func syncCtx(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }
