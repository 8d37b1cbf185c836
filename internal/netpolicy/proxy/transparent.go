package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// TLS alerts (RFC 8446 §6) the transparent TLS listener ends refused connections with, so that
// the client fails at once with a readable error ("tls: access denied") instead of hanging.
var (
	alertAccessDenied  = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31} // fatal, access_denied (49)
	alertInternalError = []byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x50} // fatal, internal_error (80)
)

// serveTLSConn serves one connection to port 443: the destination is the ClientHello's server
// name, on port 443; the bytes read are replayed upstream and the rest spliced.
func (p *Proxy) serveTLSConn(ctx context.Context, c net.Conn, sb Sandbox) {
	ev := netpolicy.Event{Start: time.Now(), Proto: ProtoTLS, Port: 443}
	_ = c.SetReadDeadline(time.Now().Add(HelloTimeout))
	raw, sni, err := readClientHello(c)
	_ = c.SetReadDeadline(time.Time{})
	refuseTLS := func(alert []byte, d netpolicy.Decision) {
		p.emit(sb, decided(ev, d))
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(alert) // the close below tells the client as well
		closeGently(c, 500*time.Millisecond)
	}
	switch {
	case err != nil:
		refuseTLS(alertAccessDenied, refuse(0, RuleBadClientHello, "no TLS ClientHello airlock can read: %v", err).d)
		return
	case sni == "":
		refuseTLS(alertAccessDenied, refuse(0, RuleNoSNI, "the TLS ClientHello names no server (SNI): airlock cannot tell where it goes").d)
		return
	}
	ev.Name = canonical(sni)
	up, addr, d, err := p.dial(ctx, policyOf(sb), ev.Name, 443)
	if err != nil {
		r, de := dialRefusal(err)
		if de != nil {
			ev.Addr = de.Addr
		}
		alert := alertAccessDenied
		if r.status != http.StatusForbidden {
			alert = alertInternalError
		}
		refuseTLS(alert, r.d)
		return
	}
	ev.Addr = addr
	ev = decided(ev, d)
	ev.BytesOut, ev.BytesIn, _ = tunnel(c, up, func() ([]byte, error) { return raw, nil })
	p.emit(sb, ev)
}

// serveTCPConn serves one connection of open egress, to the address the sandbox connected to:
// any public address (private ones too without blockLocalNetwork), never a metadata one.
// Refused connections are reset.
func (p *Proxy) serveTCPConn(ctx context.Context, c net.Conn, sb Sandbox, origDst func(net.Conn) (netip.AddrPort, error)) {
	ev := netpolicy.Event{Start: time.Now(), Proto: ProtoTCP}
	dst, err := origDst(c)
	if err != nil {
		p.emit(sb, decided(ev, refuse(0, RuleBadRequest, "cannot tell where the connection was going: %v", err).d))
		reset(c)
		return
	}
	ev.Addr, ev.Port = dst.Addr().Unmap(), int(dst.Port())
	up, _, d, err := p.dial(ctx, policyOf(sb), ev.Addr.String(), ev.Port)
	if err != nil {
		r, _ := dialRefusal(err)
		p.emit(sb, decided(ev, r.d))
		reset(c)
		return
	}
	ev = decided(ev, d)
	ev.BytesOut, ev.BytesIn, _ = tunnel(c, up, nil)
	p.emit(sb, ev)
}

// rejectHTTP answers a connection beyond MaxConns with 503.
func (p *Proxy) rejectHTTP(sb Sandbox) func(context.Context, net.Conn) {
	return func(_ context.Context, c net.Conn) {
		r := refuse(http.StatusServiceUnavailable, RuleOverloaded, "the proxy already serves %s connections for this sandbox", p.maxConnsText())
		p.emit(sb, decided(netpolicy.Event{Proto: ProtoHTTP}, r.d))
		body := r.text("", 0)
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		closeGently(c, 100*time.Millisecond)
	}
}

// rejectPlain closes a connection beyond MaxConns with a reset.
func (p *Proxy) rejectPlain(sb Sandbox, proto string) func(context.Context, net.Conn) {
	return func(_ context.Context, c net.Conn) {
		r := refuse(0, RuleOverloaded, "the proxy already serves %s connections for this sandbox", p.maxConnsText())
		p.emit(sb, decided(netpolicy.Event{Proto: proto}, r.d))
		reset(c)
	}
}

func (p *Proxy) maxConnsText() string {
	if p.MaxConns > 0 {
		return fmt.Sprint(p.MaxConns)
	}
	return fmt.Sprint(DefaultMaxConns)
}
