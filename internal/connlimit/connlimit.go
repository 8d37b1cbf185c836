// Package connlimit caps a listener's open connections, in all and per client address, so that
// clients holding connections open (idle keep-alives, slow requests) cannot exhaust a server's
// file descriptors and shut everyone else out.
package connlimit

import (
	"io"
	"net"
	"net/netip"
	"sync"
)

// Why a connection was refused: the cap it was over.
const (
	ReasonClient = "client" // Config.PerClient, from its address
	ReasonTotal  = "total"  // Config.Max
)

// Config sets the caps.
type Config struct {
	// Max caps the open connections; past it a new connection is closed at once.
	Max int
	// PerClient caps the open connections from one client (an IPv4 address, an IPv6 /64);
	// below Max, so that one client cannot take every place.
	PerClient int
	// OnRefuse, when set, is called with the reason of each refused connection (ReasonClient,
	// ReasonTotal). It must not block: it runs in the accept loop.
	OnRefuse func(reason string)
}

// Listener is a net.Listener whose Accept only returns connections within the caps; those over
// them are closed as soon as they are accepted (with a reset, so they leave nothing behind),
// and Accept goes on to the next. A returned connection holds its place until it is closed.
type Listener struct {
	net.Listener
	cfg Config

	mu       sync.Mutex // guards open and byClient
	open     int
	byClient map[netip.Prefix]int
}

var _ net.Listener = (*Listener)(nil)

// New wraps ln with the caps of cfg.
func New(ln net.Listener, cfg Config) *Listener {
	return &Listener{Listener: ln, cfg: cfg, byClient: map[netip.Prefix]int{}}
}

// Accept returns the next connection within the caps. Its errors are ln's, unchanged: a
// temporary one (EMFILE when the process is out of file descriptors) must stay a net.Error
// whose Temporary is true, which net/http's Serve backs off on and retries, instead of ending.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := client(c.RemoteAddr())
		if reason := l.take(key); reason != "" {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset: no TIME_WAIT kept for a refused client
			}
			c.Close()
			if l.cfg.OnRefuse != nil {
				l.cfg.OnRefuse(reason)
			}
			continue
		}
		return &conn{Conn: c, l: l, key: key}, nil
	}
}

// Open is the number of connections open now (for the metrics).
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// take counts a new connection from key, or says which cap it is over.
func (l *Listener) take(key netip.Prefix) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byClient[key] >= l.cfg.PerClient:
		return ReasonClient
	case l.open >= l.cfg.Max:
		return ReasonTotal
	}
	l.open++
	l.byClient[key]++
	return ""
}

// release gives back the place of a connection from key.
func (l *Listener) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byClient[key]--; l.byClient[key] <= 0 {
		delete(l.byClient, key) // the map holds only clients with open connections
	}
}

// client is the address a connection counts against: its IPv4 address, or its IPv6 /64 (one
// host usually has a whole /64). Connections without an IP address (a Unix socket) are one
// client.
func client(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// What net/http looks for on a connection, kept through the wrapper.
var (
	_ interface{ CloseWrite() error } = (*conn)(nil)
	_ io.ReaderFrom                   = (*conn)(nil)
)

// conn is an accepted connection; closing it gives its place back, once.
type conn struct {
	net.Conn
	l    *Listener
	key  netip.Prefix
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// CloseWrite keeps the connection's half-close, which net/http uses to end an answer it closes
// the connection after (a 431, a 400): without it the client waits for the full close, half a
// second later.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the connection's own ReadFrom (sendfile, splice) for net/http's responses,
// which use it when the connection has one: a download goes from the file to the socket
// without a copy through user space.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
