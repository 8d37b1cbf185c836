// Package daemon wires airlock serve together: configuration → drivers → store → manager → HTTP
// server, with crash recovery at start and a graceful stop.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/audit"
	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/driver"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/metrics"
	"github.com/airlockrun/airlock/internal/server"
	"github.com/airlockrun/airlock/internal/store"
	"github.com/airlockrun/airlock/internal/tools"
	"github.com/airlockrun/airlock/internal/webhook"
)

// Daemon is a running airlock serve.
type Daemon struct {
	cfg   levels.Config
	log   *slog.Logger
	lock  *os.File
	store *store.Store
	m     *manager.Manager
	// drivers are closed after the manager, once their sandboxes are gone.
	drivers *driver.Registry
	hooks   *webhook.Dispatcher
	tools   *tools.Gateway // nil when the operator turned it off
	api     *server.Server
	srv     *http.Server
	ln      net.Listener
}

// Start opens the data dir (one daemon per data dir), recovers what a previous daemon left, and
// starts listening. Serve then answers requests until Stop.
func Start(ctx context.Context, cfg levels.Config, version string, log *slog.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	d := &Daemon{cfg: cfg, log: log}
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	d.lock = lock
	seal, err := store.LoadSealKey(cfg.SealKeyPath())
	if err != nil {
		return nil, err
	}
	if d.store, err = store.Open(ctx, cfg.DatabasePath(), store.Options{Sync: cfg.Database.Sync, SealKey: seal}, log.With("component", "store")); err != nil {
		return nil, err
	}
	network, err := levels.Network(cfg, log)
	if err != nil {
		return nil, err
	}
	// One image store for the levels (image: on create) and the image API.
	images, imagesErr := levels.Images(cfg, true, log)
	drivers := levels.Registry(cfg, network, images, log)
	d.drivers = drivers
	// One set of metrics: the manager times creates and execs, GET /metrics serves them, and the
	// sandbox and pool gauges are read from the manager at each scrape.
	mx := metrics.New()
	// Webhooks get every event from the audit log: started before the manager (whose recovery
	// already publishes), stopped after it (so that its last events are recorded).
	d.hooks = webhook.New(d.store, webhookConfig(cfg.Webhooks, mx), log.With("component", "webhook"))
	if err := d.hooks.Start(ctx); err != nil {
		return nil, err
	}
	inStore := func(ref string) bool {
		if images == nil {
			return false
		}
		_, err := images.Get(ref)
		return err == nil
	}
	imageCommand := func(ref string) []string {
		if images == nil {
			return nil
		}
		img, err := images.Get(ref)
		if err != nil {
			return nil
		}
		return append(slices.Clone(img.Config.Entrypoint), img.Config.Cmd...)
	}
	d.m = manager.New(manager.Config{MaxSandboxesPerTenant: cfg.Limits.MaxSandboxesPerTenant,
		MaxPools: cfg.Limits.MaxPools, MaxPoolSandboxes: cfg.Limits.MaxPoolSandboxes, Grants: cfg.Grants(), ImageInStore: inStore, ImageCommand: imageCommand,
		SnapshotDir: filepath.Join(cfg.DataDir, "snapshots"), Metrics: mx, Audit: auditConfig(cfg.Audit, mx),
		Sinks: []audit.Sink{d.hooks}, DefaultIsolation: cfg.Defaults.Isolation}, drivers, d.store, log.With("component", "manager"))
	d.store.OnHealth(func(h store.Health) {
		mx.StoreDegraded(h.Degraded)
		d.m.StoreHealth(h)
	})
	mx.SetSandboxSource(d.m.SandboxCounts)
	mx.SetPoolSource(d.m.Pools)
	network.SetSink(d.m.NetworkEvent)
	if err := d.m.Recover(ctx); err != nil {
		return nil, err
	}
	if err := d.m.StartPools(ctx, cfg.Pools); err != nil {
		return nil, err
	}
	if !cfg.Tools.Disabled {
		if d.tools, err = tools.New(ctx, toolsConfig(cfg.Tools, mx), d.m, d.store, log.With("component", "tools")); err != nil {
			return nil, err
		}
	}
	read, write := seconds(cfg.Server.ReadTimeoutSeconds), seconds(cfg.Server.WriteTimeoutSeconds)
	d.api = server.New(server.Config{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxUploadBytes: cfg.Limits.MaxUploadBytes, Version: version, PublicURL: cfg.PublicURL,
		Metrics: mx.Handler(), Webhooks: d.hooks, Unauthenticated: mx.Unauthenticated, RateLimited: mx.RateLimited, ReadTimeout: read, WriteTimeout: write,
		Tools: d.tools},
		d.m, d.store, drivers, server.Images{Store: images, Err: imagesErr}, log.With("component", "api"))
	// Every bound holds for a request without a key; the API lifts the read and write timeouts
	// for a key holder's long work and bounds its progress instead (internal/server/deadlines.go).
	d.srv = &http.Server{
		Handler:           d.api,
		ReadHeaderTimeout: min(10*time.Second, read),
		ReadTimeout:       read,
		WriteTimeout:      write,
		IdleTimeout:       seconds(cfg.Server.IdleTimeoutSeconds),
		MaxHeaderBytes:    cfg.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if d.ln, err = listen(cfg.Config, mx, log); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// Manager is the daemon's sandbox manager: what a Kubernetes node (airlock serve --kubeconfig)
// makes its Pods' sandboxes with, as the host's own API does.
func (d *Daemon) Manager() *manager.Manager { return d.m }

// API is the daemon's /api/v1 handler: a Kubernetes node serves it to the front API on its
// authenticated kubelet port as well (docs/kubernetes.md#the-front-api).
func (d *Daemon) API() http.Handler { return d.api }

// Levels are the host's levels, as GET /api/v1/capabilities reports them.
func (d *Daemon) Levels() []driver.Capabilities { return d.drivers.Report() }

// Addr is the address the daemon listens on.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// Serve answers requests until Stop; it returns nil after a Stop.
func (d *Daemon) Serve() error {
	scheme := "http"
	if d.cfg.TLS.Cert != "" {
		scheme = "https"
	}
	d.log.Info("airlock serving", "url", scheme+"://"+d.ln.Addr().String(), "dataDir", d.cfg.DataDir)
	if err := d.srv.Serve(d.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Grace is how long Stop waits for requests in flight (config server.shutdownGraceSeconds).
func (d *Daemon) Grace() time.Duration {
	return time.Duration(d.cfg.Server.ShutdownGraceSeconds) * time.Second
}

// Stop stops accepting requests, waits up to Grace for those in flight, ends every live
// sandbox (reason daemon_shutdown) and closes the store. Requests still in flight after the
// grace have their connections closed first (their clients get a connection error, and their
// records and audit events say daemon_shutdown), then their sandboxes end under them.
func (d *Daemon) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), d.Grace())
	defer cancel()
	d.api.EndStreams()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.log.Warn("requests still in flight after the shutdown grace: their connections are closed", "grace", d.Grace())
		d.api.CutOff()
		d.srv.Close()
		d.m.EndSandboxes() // their execs end; their handlers record what happened
		if !d.api.Wait(10 * time.Second) {
			d.log.Warn("requests still in flight after their sandboxes ended")
		}
	}
	d.close()
	return nil
}

func (d *Daemon) close() {
	if d.tools != nil {
		d.tools.Close() // its upstream servers' execs end before their sandboxes do
	}
	if d.m != nil {
		d.m.Close()
	}
	if d.drivers != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.drivers.Close(ctx); err != nil {
			d.log.Warn("a level did not release all it holds", "err", err)
		}
		cancel()
	}
	if d.hooks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := d.hooks.Close(ctx); err != nil {
			d.log.Warn("webhooks did not stop in time", "err", err)
		}
		cancel()
	}
	if d.store != nil {
		d.store.Close()
	}
	if d.lock != nil {
		d.lock.Close()
	}
}

// lockDataDir takes an exclusive lock on the data dir: a second daemon on the same data would
// "recover" (tear down) the first one's sandboxes.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another airlock serve (%w)", dir, err)
	}
	// The pid is for whoever looks at the file; the lock is what keeps a second daemon out.
	_ = f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// auditConfig is the audit log's configuration: the operator's retention, and the metrics as a
// sink of every event (limit hits, egress decisions) and a counter of what was written.
func auditConfig(c config.AuditConfig, mx *metrics.Metrics) audit.Config {
	return audit.Config{Disabled: c.Disabled, Retention: time.Duration(c.RetentionDays) * 24 * time.Hour, MaxEvents: c.MaxEvents,
		Written: mx.AuditWritten, Dropped: mx.AuditDropped,
		Sinks: []audit.Sink{audit.SinkFunc(func(evs []store.TenantEvent) {
			for _, e := range evs {
				mx.Observe(e.Event)
			}
		})}}
}

// webhookConfig is the webhook dispatcher's configuration, its outcomes counted in the metrics.
func webhookConfig(c config.WebhooksConfig, mx *metrics.Metrics) webhook.Config {
	return webhook.Config{AllowPrivateNetworks: c.AllowPrivateNetworks, MaxAttempts: c.MaxAttempts,
		Timeout: time.Duration(c.TimeoutSeconds) * time.Second, QueueSize: c.QueueSize, OnDelivery: mx.WebhookDelivery}
}

// toolsConfig is the tool gateway's configuration, its calls counted in the metrics.
func toolsConfig(c config.ToolsConfig, mx *metrics.Metrics) tools.Config {
	tc := tools.Config{Policies: c.Policies, Workspace: c.Workspace, Metrics: mx, Builtins: map[string]tools.BuiltinConfig{},
		Limits: tools.Limits{MaxToolsPerTenant: c.Limits.MaxToolsPerTenant, MaxServersPerTenant: c.Limits.MaxServersPerTenant,
			MaxPoliciesPerTenant: c.Limits.MaxPoliciesPerTenant, MaxSchemaBytes: c.Limits.MaxSchemaBytes, MaxResultBytes: c.Limits.MaxResultBytes}}
	for _, t := range c.Tools {
		tc.Tools = append(tc.Tools, tools.ConfigTool{ToolDefinition: t.ToolDefinition, Tenants: t.Tenants})
	}
	for _, s := range c.Servers {
		tc.Servers = append(tc.Servers, tools.ConfigServer{ToolServer: s.ToolServer, Headers: s.Headers, Tenants: s.Tenants})
	}
	for n, b := range c.Builtins {
		tc.Builtins[n] = tools.BuiltinConfig{Disabled: b.Disabled, Sandbox: b.Sandbox, RateLimit: b.RateLimit}
	}
	return tc
}
