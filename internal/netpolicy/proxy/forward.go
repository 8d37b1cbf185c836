package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// forward sends req to host:port, or over HTTPS to host:443 with the policy's credentials
// added when it has some for host (the sandbox speaks plain HTTP to airlock only; the secret
// travels between airlock and the host only), copies the answer back and reports it. d is
// the decision that allowed host. It returns whether the connection may carry on.
//
// BytesOut and BytesIn of its event count the request's and the response's bodies.
func (h *httpConn) forward(req *http.Request, pol *netpolicy.Policy, host string, port int, d netpolicy.Decision, ev netpolicy.Event) bool {
	out := req.Clone(h.ctx)
	upType := upgradeType(req.Header)
	removeHopByHop(out.Header)
	out.Header.Del("Expect") // airlock answers 100-continue itself, when the body is wanted
	if upType != "" {
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", upType)
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // not Go's default
	}
	scheme, authority := "http", host
	if port != 80 {
		authority = hostPort(host, port)
	}
	if creds := credentials(pol, host, port); len(creds) > 0 {
		scheme, authority = "https", host
		var names []string
		for _, c := range creds {
			out.Header.Del(c.Name) // what the sandbox sent in their place
			if n := http.CanonicalHeaderKey(c.Name); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		for _, c := range creds {
			out.Header.Add(c.Name, c.Value)
		}
		ev.Credential = strings.Join(names, ", ")
		d = netpolicy.Decision{Allow: true, Rule: netpolicy.RuleCredential,
			Reason: fmt.Sprintf("%s added, forwarded over HTTPS to %s:443 (%s)", ev.Credential, host, d.Reason)}
	}
	out.URL = &url.URL{Scheme: scheme, Host: authority, Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	out.Host = authority
	out.RequestURI = ""
	out.Close = false
	out.TransferEncoding = nil
	body := &countingBody{h: h, rc: req.Body, expect: expectsContinue(req)}
	if req.Body != nil && req.Body != http.NoBody {
		out.Body = body
	}
	var addr netip.Addr
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { addr = connAddr(i.Conn) }}
	out = out.WithContext(httptrace.WithClientTrace(h.ctx, trace))

	h.wmu.Lock()
	h.respStarted = false
	h.wmu.Unlock()
	resp, err := h.transport(pol).RoundTrip(out)
	if err != nil {
		body.stop()
		r, de := dialRefusal(err)
		if de != nil {
			ev.Addr = de.Addr
		}
		return h.refuse(req, ev, r)
	}
	ev.Addr = addr
	ev = decided(ev, d)
	keep, in, upOut := h.writeResponse(req, resp, upType)
	body.stop()
	ev.BytesOut, ev.BytesIn = body.n.Load()+upOut, in
	h.p.emit(h.sb, ev)
	return keep && h.drain(req)
}

// credentials returns the headers to add to a plain-HTTP request for host:port: the policy's,
// for the default port.
func credentials(pol *netpolicy.Policy, host string, port int) []netpolicy.Header {
	if port != 80 {
		return nil
	}
	return pol.Credentials(host)
}

// transport returns the connection's upstream transport, its dials checked under pol.
func (h *httpConn) transport(pol *netpolicy.Policy) *http.Transport {
	h.pol.Store(pol)
	if h.tr == nil {
		h.tr = &http.Transport{
			DialContext:            h.dialUpstream,
			TLSClientConfig:        h.p.UpstreamTLS.Clone(),
			TLSHandshakeTimeout:    DialTimeout,
			DisableCompression:     true, // pass bodies through as they are
			MaxIdleConnsPerHost:    2,
			IdleConnTimeout:        IdleTimeout,
			MaxResponseHeaderBytes: 1 << 20,
		}
	} else if pol != h.lastPol {
		h.tr.CloseIdleConnections() // their addresses were checked under another policy
	}
	h.lastPol = pol
	return h.tr
}

// dialUpstream is the transport's dial: the same checks as every other connection.
func (h *httpConn) dialUpstream(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := splitHostPort(addr, 0)
	if err != nil {
		return nil, err
	}
	c, a, _, err := h.p.dial(ctx, h.pol.Load(), host, port)
	if err != nil {
		return nil, err
	}
	return &upstreamConn{Conn: c, addr: a}, nil
}

// upstreamConn is a transport's connection, with the address it reached for the events.
type upstreamConn struct {
	net.Conn
	addr netip.Addr
}

func connAddr(c net.Conn) netip.Addr {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if uc, ok := c.(*upstreamConn); ok {
		return uc.addr
	}
	return netip.Addr{}
}

// writeResponse copies resp to the sandbox, streaming its body (each piece is sent as it
// arrives, for server-sent events). It returns whether the connection may carry on and the
// bytes sent each way (after an upgrade, a tunnel's).
func (h *httpConn) writeResponse(req *http.Request, resp *http.Response, upType string) (keep bool, in, out int64) {
	defer resp.Body.Close()
	respUp := upgradeType(resp.Header)
	hdr := resp.Header
	removeHopByHop(hdr)
	keep = !req.Close
	noBody := req.Method == http.MethodHead || resp.StatusCode/100 == 1 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	chunked := false
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols:
		if _, ok := resp.Body.(io.ReadWriteCloser); !ok || upType == "" || respUp == "" {
			return false, 0, 0
		}
		hdr.Set("Connection", "Upgrade")
		hdr.Set("Upgrade", respUp)
	case noBody:
	case resp.ContentLength >= 0:
		hdr.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	case req.ProtoAtLeast(1, 1):
		chunked = true
		hdr.Del("Content-Length")
		hdr.Set("Transfer-Encoding", "chunked")
		if len(resp.Trailer) > 0 {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range resp.Trailer {
					if !yield(k) {
						return
					}
				}
			})
			hdr.Set("Trailer", strings.Join(keys, ", "))
		}
	default:
		keep = false // an HTTP/1.0 client: the end of the body is the end of the connection
	}
	if !keep && resp.StatusCode != http.StatusSwitchingProtocols {
		hdr.Set("Connection", "close")
	}

	bw := bufio.NewWriterSize(h.c, 4<<10)
	status := resp.Status
	if !strings.HasPrefix(status, strconv.Itoa(resp.StatusCode)+" ") {
		status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	h.wmu.Lock()
	h.respStarted = true
	// bw keeps its first write error, which Flush returns.
	fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", status)
	_ = hdr.Write(bw)
	_, _ = bw.WriteString("\r\n")
	err := bw.Flush()
	h.wmu.Unlock()
	if err != nil {
		return false, 0, 0
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		out, in, _ := tunnel(h.c, resp.Body.(io.ReadWriteCloser), func() ([]byte, error) {
			b, _ := h.br.Peek(h.br.Buffered())
			b = slices.Clone(b)
			_, _ = h.br.Discard(len(b)) // what is buffered: it cannot fail
			return b, nil
		})
		return false, in, out
	}
	if noBody {
		return keep, 0, 0
	}
	var dst io.Writer = bw
	var cw io.WriteCloser
	if chunked {
		cw = httputil.NewChunkedWriter(bw)
		dst = cw
	}
	in, err = copyFlush(dst, bw, resp.Body)
	if err != nil {
		return false, in, 0 // a truncated body: the connection cannot carry on
	}
	if chunked {
		cw.Close()
		_ = resp.Trailer.Write(bw) // as the header's: Flush says
		_, _ = bw.WriteString("\r\n")
		if bw.Flush() != nil {
			return false, in, 0
		}
	}
	return keep, in, 0
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFlush copies src to dst, flushing bw after every read so that nothing waits in a buffer.
func copyFlush(dst io.Writer, bw *bufio.Writer, src io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var n int64
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
			if err := bw.Flush(); err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// countingBody is a request body on its way upstream: it counts, sends the sandbox the
// 100 Continue it waits for when the transport first wants the body, and ends (stop) when
// the exchange is over, while the serving goroutine keeps the real body to drain it.
type countingBody struct {
	h       *httpConn
	rc      io.ReadCloser
	expect  bool
	once    sync.Once
	n       atomic.Int64
	stopped atomic.Bool // set under h.wmu
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.expect {
		b.once.Do(func() {
			b.h.wmu.Lock()
			defer b.h.wmu.Unlock()
			if b.stopped.Load() || b.h.respStarted {
				return
			}
			_ = b.h.c.SetWriteDeadline(time.Now().Add(HeaderTimeout))
			if _, err := io.WriteString(b.h.c, "HTTP/1.1 100 Continue\r\n\r\n"); err == nil {
				b.h.continued.Store(true)
			}
			_ = b.h.c.SetWriteDeadline(time.Time{})
		})
	}
	if b.stopped.Load() {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// Close does nothing: the serving goroutine owns the body.
func (b *countingBody) Close() error { return nil }

func (b *countingBody) stop() {
	b.h.wmu.Lock()
	b.stopped.Store(true)
	b.h.wmu.Unlock()
}

// hopHeaders are the headers of one connection (RFC 9110 §7.6.1), never forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop deletes hop-by-hop headers, those the Connection header names, and every
// Proxy-* header.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Proxy-") {
			delete(h, k)
		}
	}
}

// upgradeType returns the protocol a message upgrades to ("" if none).
func upgradeType(h http.Header) string {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}

func expectsContinue(req *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue")
}
