package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/internal/config"
	"github.com/airlockrun/airlock/internal/connlimit"
	"github.com/airlockrun/airlock/internal/metrics"
)

// listen opens the API's listener: TCP, capped in open connections (in all and per client,
// counted in the metrics), then TLS. The caps wrap the TCP listener, under TLS, so that a
// refused connection costs no handshake.
func listen(cfg config.Config, mx *metrics.Metrics, log *slog.Logger) (net.Listener, error) {
	limit, err := raiseOpenFiles()
	if err != nil {
		log.Warn("cannot read or raise the open-file limit", "err", err)
	} else if need := uint64(cfg.Server.MaxConnections) + 1024; limit < need {
		// The connections, the store, the sandboxes' pipes and namespaces share this limit.
		log.Warn("the open-file limit leaves little room above server.maxConnections: raise it (LimitNOFILE=, ulimit -Hn) or lower the cap",
			"limit", limit, "maxConnections", cfg.Server.MaxConnections)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	capped := connlimit.New(ln, connlimit.Config{Max: cfg.Server.MaxConnections, PerClient: cfg.Server.MaxConnectionsPerClient,
		OnRefuse: mx.ConnectionRefused})
	mx.SetConnectionSource(capped.Open)
	if cfg.TLS.Cert == "" {
		return capped, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("tls: %w", err)
	}
	return tls.NewListener(capped, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// raiseOpenFiles sets the soft RLIMIT_NOFILE to the hard one and returns it: every API
// connection is a file descriptor. Go's runtime already does so at start (since Go 1.19, and
// gives children the original limit back); this makes it explicit whatever started the daemon,
// and says what it has. Sandboxes set their own (maxOpenFiles).
func raiseOpenFiles() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// seconds is a config field's duration.
func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
