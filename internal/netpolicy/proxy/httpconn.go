package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// maxDrain is how much of a request body the proxy reads and discards, after answering
// without it, to keep the connection; beyond it the connection is closed.
const maxDrain = 256 << 10

var errHeadTooLarge = errors.New("request header too large")

// httpConn is one sandbox connection to the explicit or the transparent HTTP listener.
type httpConn struct {
	p           *Proxy
	sb          Sandbox
	ctx         context.Context
	c           net.Conn
	br          *bufio.Reader
	transparent bool

	wmu         sync.Mutex // guards writes to c and respStarted: a 100 Continue may race the response
	respStarted bool
	tr          *http.Transport                  // this connection's upstream connections; never shared between sandboxes
	pol         atomic.Pointer[netpolicy.Policy] // the policy of the request in flight, for tr's dials
	lastPol     *netpolicy.Policy                // the policy tr's idle connections were checked under
	continued   atomic.Bool                      // a 100 Continue was sent for the request in flight
}

func (p *Proxy) serveHTTPConn(ctx context.Context, c net.Conn, sb Sandbox, transparent bool) {
	h := &httpConn{p: p, sb: sb, ctx: ctx, c: c, br: bufio.NewReaderSize(c, MaxHeaderBytes), transparent: transparent}
	defer func() {
		if h.tr != nil {
			h.tr.CloseIdleConnections()
		}
	}()
	for n := 0; ; n++ {
		wait := IdleTimeout
		if n == 0 {
			wait = HeaderTimeout
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		if _, err := h.br.Peek(1); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(HeaderTimeout))
		hosts, err := h.readHead()
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				h.refuse(nil, netpolicy.Event{Proto: ProtoHTTP}, refuse(http.StatusRequestHeaderFieldsTooLarge, RuleBadRequest, "request header larger than %d bytes", MaxHeaderBytes))
			}
			return
		}
		req, err := http.ReadRequest(h.br)
		if err != nil {
			h.refuse(nil, netpolicy.Event{Proto: ProtoHTTP}, refuse(http.StatusBadRequest, RuleBadRequest, "malformed request: %v", err))
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if !h.serveRequest(req, hosts) {
			return
		}
	}
}

// readHead waits for a whole request header in the buffer (so that http.ReadRequest, which
// drops the Host header of absolute-form requests, consumes it in one go) and returns the
// values of its Host header lines.
func (h *httpConn) readHead() ([]string, error) {
	for {
		buf, _ := h.br.Peek(h.br.Buffered())
		if end := headEnd(buf); end >= 0 {
			tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(buf[:end])))
			if _, err := tp.ReadLine(); err != nil {
				return nil, nil
			}
			hdr, err := tp.ReadMIMEHeader()
			if err != nil {
				return nil, nil // http.ReadRequest reports it
			}
			return hdr.Values("Host"), nil
		}
		if h.br.Buffered() >= h.br.Size() {
			return nil, errHeadTooLarge
		}
		if _, err := h.br.Peek(h.br.Buffered() + 1); err != nil {
			return nil, err
		}
	}
}

// headEnd returns the length of the request header at the start of b (the empty line
// included), -1 if b does not hold all of it. Lines may end in CRLF or LF, as net/http allows.
func headEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// serveRequest answers one request and reports whether the connection may carry another.
func (h *httpConn) serveRequest(req *http.Request, hosts []string) bool {
	defer req.Body.Close()
	h.continued.Store(false)
	pol := policyOf(h.sb)
	if req.Method == http.MethodConnect {
		if h.transparent {
			h.refuse(req, netpolicy.Event{Proto: ProtoHTTP}, refuse(http.StatusBadRequest, RuleBadRequest, "CONNECT goes to the proxy (HTTPS_PROXY), not to port 80"))
			return false
		}
		h.connect(req, pol)
		return false
	}
	host, port, r := h.target(req, hosts)
	ev := netpolicy.Event{Start: time.Now(), Proto: ProtoHTTP, Name: host, Port: port}
	if r != nil {
		return h.refuse(req, ev, *r)
	}
	d, refused := h.p.check(pol, host, port)
	if !d.Allow {
		ev.Addr = refused
		return h.refuse(req, ev, refusal{status: http.StatusForbidden, d: d})
	}
	return h.forward(req, pol, host, port, d, ev)
}

// target returns the destination of a request: the URL's host in absolute form (where a Host
// header, if any, must agree), else the Host header (transparent listener only).
func (h *httpConn) target(req *http.Request, hosts []string) (string, int, *refusal) {
	bad := func(format string, a ...any) (string, int, *refusal) {
		r := refuse(http.StatusBadRequest, RuleBadRequest, format, a...)
		return "", 0, &r
	}
	if len(hosts) > 1 {
		return bad("%d Host headers", len(hosts))
	}
	if req.URL.Host == "" {
		if !h.transparent {
			return bad("not a proxy request: the request line must carry an absolute http:// URL")
		}
		if len(hosts) == 0 || hosts[0] == "" {
			return bad("request without a Host header: airlock cannot tell where it goes")
		}
		host, port, err := splitHostPort(hosts[0], 80)
		if err != nil {
			return bad("Host header: %v", err)
		}
		return host, port, nil
	}
	if !strings.EqualFold(req.URL.Scheme, "http") {
		return bad("scheme %q: the proxy forwards http:// URLs (use CONNECT for https)", req.URL.Scheme)
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		return bad("URL: %v", err)
	}
	if len(hosts) == 1 {
		hh, hp, err := splitHostPort(hosts[0], 80)
		if err != nil || hh != host || hp != port {
			r := refuse(http.StatusForbidden, RuleHostMismatch, "the Host header %q does not name the request's host %s", hosts[0], hostPort(host, port))
			return host, port, &r
		}
	}
	return host, port, nil
}

// refuse answers req (nil: the request could not be read) with r, reports it, and says whether
// the connection may carry on.
func (h *httpConn) refuse(req *http.Request, ev netpolicy.Event, r refusal) bool {
	h.p.emit(h.sb, decided(ev, r.d))
	keep := req != nil && !req.Close && r.status == http.StatusForbidden && req.ContentLength <= maxDrain && h.drain(req)
	h.reply(r, ev.Name, ev.Port, keep)
	return keep
}

// reply writes one of airlock's own short answers.
func (h *httpConn) reply(r refusal, name string, port int, keep bool) {
	body := r.text(name, port)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", r.status, http.StatusText(r.status), len(body))
	if r.status == http.StatusForbidden {
		fmt.Fprintf(&b, "X-Airlock-Denied: %s\r\n", r.d.Rule)
	}
	if !keep {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	h.wmu.Lock()
	_ = h.c.SetWriteDeadline(time.Now().Add(HeaderTimeout))
	_, _ = h.c.Write([]byte(b.String())) // on a failure, the connection's next read fails
	_ = h.c.SetWriteDeadline(time.Time{})
	h.wmu.Unlock()
	if !keep {
		closeGently(h.c, 500*time.Millisecond)
	}
}

// drain reads what is left of req's body, reporting whether it ended (so the next request
// can be read).
func (h *httpConn) drain(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	if expectsContinue(req) && !h.continued.Load() {
		return false // the client waits for a 100 Continue it did not get: its body may never come
	}
	_, err := io.CopyN(io.Discard, req.Body, maxDrain)
	return errors.Is(err, io.EOF)
}

// connect serves a CONNECT request: a tunnel to the checked destination, closed at once if
// the ClientHello sent through it names another host.
func (h *httpConn) connect(req *http.Request, pol *netpolicy.Policy) {
	ev := netpolicy.Event{Start: time.Now(), Proto: ProtoConnect}
	req.Close = true // a refused CONNECT ends the connection
	host, port, err := splitHostPort(req.URL.Host, 0)
	if err != nil {
		h.refuse(req, ev, refuse(http.StatusBadRequest, RuleBadRequest, "CONNECT needs host:port: %v", err))
		return
	}
	ev.Name, ev.Port = host, port
	up, addr, d, err := h.p.dial(h.ctx, pol, host, port)
	if err != nil {
		r, de := dialRefusal(err)
		if de != nil {
			ev.Addr = de.Addr
		}
		h.refuse(req, ev, r)
		return
	}
	ev.Addr = addr
	ev = decided(ev, d)
	h.wmu.Lock()
	_, err = io.WriteString(h.c, "HTTP/1.1 200 Connection established\r\n\r\n")
	h.wmu.Unlock()
	if err != nil {
		up.Close()
		h.p.emit(h.sb, ev)
		return
	}
	out, in, err := tunnel(h.c, up, func() ([]byte, error) { return h.connectFirst(host) })
	if err != nil {
		var r refusal
		if errors.As(err, &r) {
			ev = decided(ev, r.d)
		}
	}
	ev.BytesOut, ev.BytesIn = out, in
	h.p.emit(h.sb, ev)
}

// connectFirst waits for the sandbox's first bytes in a tunnel to host; when they are a TLS
// ClientHello, its server name must be host (or absent). It returns the bytes read, to send.
func (h *httpConn) connectFirst(host string) ([]byte, error) {
	b, err := h.br.Peek(1)
	if err != nil {
		return nil, nil // the client sent nothing: the copy sees the end too
	}
	var raw []byte
	if b[0] == recordHandshake {
		_ = h.c.SetReadDeadline(time.Now().Add(HelloTimeout))
		var sni string
		raw, sni, err = readClientHello(h.br)
		_ = h.c.SetReadDeadline(time.Time{})
		if err != nil {
			return nil, refuse(0, RuleBadClientHello, "the tunnel to %s began with a TLS record airlock cannot read: %v", host, err)
		}
		if sni != "" && canonical(sni) != host {
			return nil, refuse(0, RuleSNIMismatch, "the TLS ClientHello names %q, not %s, the host of the CONNECT", sni, host)
		}
	}
	rest, _ := h.br.Peek(h.br.Buffered())
	raw = append(raw, rest...)
	_, _ = h.br.Discard(len(rest)) // what is buffered: it cannot fail
	return raw, nil
}

// Error makes a refusal an error, for tunnel's first function.
func (r refusal) Error() string { return r.d.Rule + ": " + r.d.Reason }
