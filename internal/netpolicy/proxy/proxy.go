// Package proxy is airlock's egress proxy, a sandbox's only way out of its network namespace: an
// explicit HTTP proxy (HTTP_PROXY, HTTPS_PROXY) and transparent listeners for ports 80 and 443
// (and, for open egress, every TCP port) that check each destination against the sandbox's
// current policy, connect to the proxy's own resolution of the name (never to the address the
// sandbox connected to), add credentials the sandbox must not see, and report one
// netpolicy.Event per connection or request.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Sandbox is what the proxy needs of the sandbox it serves; the proxy reads the policy per
// connection and per request.
type Sandbox = netpolicy.Sandbox

// Resolver resolves the names the sandbox asks for.
type Resolver = netpolicy.Resolver

// Limits and timeouts. A deadline's error is ignored throughout: setting one fails only on a
// closed connection, whose next read or write then fails too.
const (
	// DefaultMaxConns is the number of connections one Serve handles at once when
	// Proxy.MaxConns is 0; beyond it new connections are refused (503, or closed).
	DefaultMaxConns = 256
	// DialTimeout bounds resolving and connecting to a destination with the default Dial.
	DialTimeout = 10 * time.Second
	// HeaderTimeout bounds reading a request's header once it has begun, and waiting for the
	// first request of a connection.
	HeaderTimeout = 10 * time.Second
	// IdleTimeout bounds the wait for the next request on a kept-alive HTTP connection.
	IdleTimeout = 90 * time.Second
	// HelloTimeout bounds reading a TLS ClientHello.
	HelloTimeout = 5 * time.Second
	// MaxHeaderBytes is the largest request header (request line included) the proxy reads.
	MaxHeaderBytes = 64 << 10
)

// Proxy serves the egress listeners of one sandbox (or several: every Serve names its
// Sandbox). Its zero value is usable; the exported fields must be set before the first Serve.
type Proxy struct {
	// Resolver resolves destination names; nil: net.DefaultResolver.
	Resolver Resolver
	// Dial makes upstream connections to an already-checked address ("ip:port"); nil: a
	// net.Dialer with DialTimeout. Connections it returns as *net.TCPConn are spliced in the
	// kernel.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// UpstreamTLS is the client TLS configuration used when airlock itself speaks TLS
	// upstream (credential injection); nil: the system roots.
	UpstreamTLS *tls.Config
	// Log receives the proxy's diagnostics; nil: discarded.
	Log *slog.Logger
	// MaxConns caps the connections each Serve handles at once; 0: DefaultMaxConns.
	MaxConns int

	mu        sync.Mutex // guards closed, listeners and conns
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*liveConn]struct{}
	wg        sync.WaitGroup // every connection goroutine; Add only under mu while !closed
}

// liveConn is one sandbox connection being served.
type liveConn struct {
	c      net.Conn
	cancel context.CancelFunc // ends its dials and upstream requests
}

// ServeHTTP serves the explicit proxy on ln for sb: absolute-form HTTP requests, forwarded
// after the checks, and CONNECT tunnels. It returns nil once ln is closed; connections in
// flight go on until they end or Close.
func (p *Proxy) ServeHTTP(ln net.Listener, sb Sandbox) error {
	return p.serve(ln, p.rejectHTTP(sb), func(ctx context.Context, c net.Conn) {
		p.serveHTTPConn(ctx, c, sb, false)
	})
}

// ServeTransparentHTTP serves port-80 traffic redirected to ln: origin-form requests whose
// destination is their Host header.
func (p *Proxy) ServeTransparentHTTP(ln net.Listener, sb Sandbox) error {
	return p.serve(ln, p.rejectHTTP(sb), func(ctx context.Context, c net.Conn) {
		p.serveHTTPConn(ctx, c, sb, true)
	})
}

// ServeTransparentTLS serves port-443 traffic redirected to ln: the destination is the server
// name of the ClientHello; TLS is not terminated.
func (p *Proxy) ServeTransparentTLS(ln net.Listener, sb Sandbox) error {
	return p.serve(ln, p.rejectPlain(sb, "tls"), func(ctx context.Context, c net.Conn) {
		p.serveTLSConn(ctx, c, sb)
	})
}

// ServeTransparentTCP serves open egress: every TCP port is redirected to ln, and origDst
// tells where the sandbox was connecting.
func (p *Proxy) ServeTransparentTCP(ln net.Listener, sb Sandbox, origDst func(net.Conn) (netip.AddrPort, error)) error {
	if origDst == nil {
		return errors.New("proxy: ServeTransparentTCP needs origDst")
	}
	return p.serve(ln, p.rejectPlain(sb, "tcp"), func(ctx context.Context, c net.Conn) {
		p.serveTCPConn(ctx, c, sb, origDst)
	})
}

// Close stops every Serve, closes every live connection and waits for their goroutines. The
// Proxy serves nothing afterwards. It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	lns := p.listeners
	conns := p.conns
	p.listeners, p.conns = nil, nil
	p.mu.Unlock()
	for ln := range lns {
		ln.Close()
	}
	for lc := range conns {
		lc.cancel()
		lc.c.Close()
	}
	p.wg.Wait()
}

// serve accepts connections on ln until it is closed, each handled by handle in its own
// goroutine, at most maxConns at once; beyond that, reject handles them.
func (p *Proxy) serve(ln net.Listener, reject, handle func(context.Context, net.Conn)) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil
	}
	if p.listeners == nil {
		p.listeners = map[net.Listener]struct{}{}
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
	}()

	limit := p.MaxConns
	if limit <= 0 {
		limit = DefaultMaxConns
	}
	sem := make(chan struct{}, limit)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if !temporary(err) {
				return fmt.Errorf("proxy: accept on %s: %w", ln.Addr(), err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log().Warn("accept failed; retrying", "addr", ln.Addr().String(), "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		select {
		case sem <- struct{}{}:
			p.start(c, func(ctx context.Context, c net.Conn) {
				defer func() { <-sem }()
				handle(ctx, c)
			})
		default:
			p.start(c, reject)
		}
	}
}

// start runs handle for c in a goroutine that Close can end and waits for.
func (p *Proxy) start(c net.Conn, handle func(context.Context, net.Conn)) {
	ctx, cancel := context.WithCancel(context.Background())
	lc := &liveConn{c: c, cancel: cancel}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cancel()
		c.Close()
		return
	}
	if p.conns == nil {
		p.conns = map[*liveConn]struct{}{}
	}
	p.conns[lc] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() {
			cancel()
			c.Close()
			p.mu.Lock()
			delete(p.conns, lc)
			p.mu.Unlock()
		}()
		handle(ctx, c)
	}()
}

// temporary reports whether an Accept error is worth retrying (out of descriptors or memory, a
// connection aborted before it was accepted).
func temporary(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// noEgress is the policy of a sandbox that has none: nothing leaves.
var noEgress = sync.OnceValue(func() *netpolicy.Policy {
	p, err := netpolicy.Compile(api.Network{EgressPolicy: api.EgressNone}, netpolicy.Options{})
	if err != nil {
		panic(err)
	}
	return p
})

// policyOf returns sb's policy now (nothing allowed if it has none).
func policyOf(sb Sandbox) *netpolicy.Policy {
	if p := sb.Policy(); p != nil {
		return p
	}
	return noEgress()
}

// isListener reports whether ap is the address of a listener the proxy serves: a connection
// to it would come back to the proxy, in a loop.
func (p *Proxy) isListener(ap netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ln := range p.listeners {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			if la := a.AddrPort(); la.Addr().Unmap() == ap.Addr().Unmap() && la.Port() == ap.Port() {
				return true
			}
		}
	}
	return false
}

var discard = slog.New(slog.DiscardHandler)

func (p *Proxy) log() *slog.Logger {
	if p.Log == nil {
		return discard
	}
	return p.Log
}
