// Package daemon wires airlock serve together: configuration → drivers → store → manager → HTTP
// server, with crash recovery at start and a graceful stop.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/levels"
	"github.com/airlockrun/airlock/internal/manager"
	"github.com/airlockrun/airlock/internal/server"
	"github.com/airlockrun/airlock/internal/store"
)

// ShutdownGrace bounds how long a stopping daemon waits for requests in flight.
const ShutdownGrace = 30 * time.Second

// Daemon is a running airlock serve.
type Daemon struct {
	cfg   config.Config
	log   *slog.Logger
	lock  *os.File
	store *store.Store
	m     *manager.Manager
	srv   *http.Server
	ln    net.Listener
}

// Start opens the data dir (one daemon per data dir), recovers what a previous daemon left, and
// starts listening. Serve then answers requests until Stop.
func Start(ctx context.Context, cfg config.Config, version string, log *slog.Logger) (*Daemon, error) {
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
	if d.store, err = store.Open(ctx, cfg.DatabasePath(), store.Options{Sync: cfg.Database.Sync}, log.With("component", "store")); err != nil {
		return nil, err
	}
	network, err := levels.Network(cfg, log)
	if err != nil {
		return nil, err
	}
	// One image store for the levels (image: on create) and the image API.
	images, imagesErr := levels.Images(cfg, log)
	drivers := levels.Registry(cfg, network, images, log)
	d.m = manager.New(manager.Config{MaxSandboxesPerTenant: cfg.Limits.MaxSandboxesPerTenant,
		SnapshotDir: filepath.Join(cfg.DataDir, "snapshots")}, drivers, d.store, log.With("component", "manager"))
	network.SetSink(d.m.NetworkEvent)
	if err := d.m.Recover(ctx); err != nil {
		return nil, err
	}
	if err := d.m.StartPools(ctx, cfg.Pools); err != nil {
		return nil, err
	}
	api := server.New(server.Config{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxUploadBytes: cfg.Limits.MaxUploadBytes, Version: version},
		d.m, d.store, drivers, server.Images{Store: images, Err: imagesErr}, log.With("component", "api"))
	d.srv = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		d.ln = tls.NewListener(d.ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	ok = true
	return d, nil
}

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

// Stop stops accepting requests, waits up to ShutdownGrace for those in flight, ends every live
// sandbox (reason daemon_shutdown) and closes the store.
func (d *Daemon) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	d.close()
	return err
}

func (d *Daemon) close() {
	if d.m != nil {
		d.m.Close()
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
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}
