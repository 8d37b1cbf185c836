// Package dns is the DNS server of a sandbox: it answers A queries for the names the sandbox's
// netpolicy.Policy allows, with only the addresses the policy lets it connect to, refuses names
// shaped for DNS tunnelling, and reports one netpolicy.Event per query.
package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Sandbox is what the server needs of the sandbox it serves: one event per query.
type Sandbox = netpolicy.Sandbox

// Admitter is an optional ability of a Sandbox: a firewall that lets the sandbox connect only to
// addresses airlock's DNS gave out. The server admits the addresses of an answer, for at least
// its TTL, before sending it, so that the connection that follows the lookup is let through.
// pol is the policy the answer was decided under: an Admitter whose policy has changed since
// refuses (the server then answers SERVFAIL, and the client asks again).
type Admitter interface {
	Admit(pol *netpolicy.Policy, addrs []netip.Addr, ttl time.Duration) error
}

// Resolver resolves allowed names upstream. The server asks for network "ip4" and a rooted
// host ("example.com.") so that no search domain applies.
type Resolver = netpolicy.Resolver

// Limits of one server.
const (
	DefaultTimeout     = 5 * time.Second  // per upstream lookup
	DefaultIdleTimeout = 10 * time.Second // of a TCP connection between queries
	MaxUDPInFlight     = 64               // UDP queries answered at once; more are dropped
	MaxTCPConns        = 16               // TCP connections at once; more are closed
)

// Server answers a sandbox's DNS queries. The zero value is usable; one Server may serve many
// sandboxes, each on its own socket.
type Server struct {
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// Log receives the server's own problems (upstream failures, dropped queries); nil
	// discards them. Decisions go to Sandbox.Event, not here.
	Log *slog.Logger
	// Timeout bounds each upstream lookup; zero means DefaultTimeout.
	Timeout time.Duration
	// IdleTimeout closes a TCP connection that sends nothing for this long; zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

func (s *Server) resolver() Resolver {
	if s.Resolver == nil {
		return net.DefaultResolver
	}
	return s.Resolver
}

func (s *Server) timeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout <= 0 {
		return DefaultIdleTimeout
	}
	return s.IdleTimeout
}

// ServeUDP answers queries on pc until pc is closed (returns nil then), each in its own
// goroutine, at most MaxUDPInFlight at once. Malformed packets are ignored. It returns after
// the queries in flight are done; their upstream lookups are cancelled.
func (s *Server) ServeUDP(pc net.PacketConn, sb Sandbox) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sem := make(chan struct{}, MaxUDPInFlight)
	buf := make([]byte, 65535)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dns: read udp: %w", err)
		}
		select {
		case sem <- struct{}{}:
		default:
			s.log().Debug("dropped dns query: too many in flight", "from", addr)
			continue
		}
		query := append([]byte(nil), buf[:n]...)
		wg.Go(func() {
			defer func() { <-sem }()
			defer s.recoverPanic("udp")
			resp, err := s.Answer(ctx, query, "udp", sb)
			if err != nil {
				s.log().Debug("ignored dns query", "from", addr, "err", err)
				return
			}
			if _, err := pc.WriteTo(resp, addr); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log().Debug("dns response not sent", "to", addr, "err", err)
			}
		})
	}
}

// ServeTCP answers queries (2-byte length-prefixed, several per connection, in order) on ln
// until ln is closed (returns nil then), at most MaxTCPConns connections at once. A connection
// is closed after a malformed query or IdleTimeout without one. Closing ln closes them all.
func (s *Server) ServeTCP(ln net.Listener, sb Sandbox) error {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		conns connSet
	)
	defer wg.Wait()
	defer conns.closeAll()
	defer cancel()
	sem := make(chan struct{}, MaxTCPConns)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				// As net/http does: e.g. out of file descriptors; wait and try again.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log().Warn("dns accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("dns: accept tcp: %w", err)
		}
		backoff = 0
		select {
		case sem <- struct{}{}:
		default:
			s.log().Debug("closed dns connection: too many open", "from", c.RemoteAddr())
			c.Close()
			continue
		}
		conns.add(c)
		wg.Go(func() {
			defer func() { <-sem }()
			defer conns.remove(c)
			defer s.recoverPanic("tcp")
			s.serveConn(ctx, c, sb)
		})
	}
}

// serveConn answers the queries of one TCP connection until it is closed, idle or malformed.
func (s *Server) serveConn(ctx context.Context, c net.Conn, sb Sandbox) {
	var size [2]byte
	for {
		if err := c.SetReadDeadline(time.Now().Add(s.idleTimeout())); err != nil {
			return
		}
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		resp, err := s.Answer(ctx, query, "tcp", sb)
		if err != nil {
			s.log().Debug("closed dns connection after a malformed query", "from", c.RemoteAddr(), "err", err)
			return
		}
		if len(resp) > 0xffff {
			return // cannot happen: answers are capped at maxAnswers records
		}
		if err := c.SetWriteDeadline(time.Now().Add(s.idleTimeout())); err != nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

// recoverPanic keeps a bug in answering one query from taking down the daemon, as net/http does.
func (s *Server) recoverPanic(proto string) {
	if r := recover(); r != nil {
		s.log().Error("panic answering dns query", "proto", proto, "panic", r, "stack", string(debug.Stack()))
	}
}

// connSet is the open TCP connections of one ServeTCP, closed all at once when it returns.
type connSet struct {
	mu     sync.Mutex // guards conns and closed
	conns  map[net.Conn]struct{}
	closed bool
}

func (cs *connSet) add(c net.Conn) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		c.Close()
		return
	}
	if cs.conns == nil {
		cs.conns = map[net.Conn]struct{}{}
	}
	cs.conns[c] = struct{}{}
}

func (cs *connSet) remove(c net.Conn) {
	cs.mu.Lock()
	delete(cs.conns, c)
	cs.mu.Unlock()
	c.Close()
}

func (cs *connSet) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for c := range cs.conns {
		c.Close()
	}
}
