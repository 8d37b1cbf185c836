package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func TestTransparentTLS(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	c := e.transparentClient()
	status, body, _ := get(t, c, "https://allowed.test/", "")
	if status != 200 || body != "host=allowed.test tls=true cred=missing body=0" {
		t.Errorf("got %d %q", status, body)
	}
	c.Transport.(*http.Transport).CloseIdleConnections()
	ev := e.sb.take1(t)
	checkEvent(t, ev, netpolicy.Event{Proto: ProtoTLS, Name: "allowed.test", Port: 443, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback})
	if ev.BytesOut < 100 {
		t.Errorf("bytes out %d", ev.BytesOut)
	}
}

// TestTransparentTLSFragmented: a ClientHello split into many records, each its own TCP
// segment, is read whole and replayed as it came.
func TestTransparentTLSFragmented(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	raw, err := net.Dial("tcp", e.transTLS)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(&fragmentingConn{Conn: raw}, &tls.Config{RootCAs: e.roots, ServerName: "allowed.test"})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if body := httpsGet(t, tc); !strings.Contains(body, "host=allowed.test tls=true") {
		t.Errorf("body %q", body)
	}
	tc.Close()
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoTLS, Name: "allowed.test", Port: 443, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback})
}

// fragmentingConn splits the first TLS record it writes into records of 40 bytes of payload,
// written one by one.
type fragmentingConn struct {
	net.Conn
	done bool
}

func (c *fragmentingConn) Write(p []byte) (int, error) {
	if c.done || len(p) < 5 || p[0] != recordHandshake {
		return c.Conn.Write(p)
	}
	c.done = true
	n := int(p[3])<<8 | int(p[4])
	for _, rec := range splitRecords(p[5:5+n], 40) {
		if _, err := c.Conn.Write(rec); err != nil {
			return 0, err
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Conn.Write(p[5+n:]); err != nil {
		return 0, err
	}
	return len(p), nil
}

func TestTransparentTLSDenied(t *testing.T) {
	tests := []struct {
		name  string
		hello []byte // a ClientHello to send; nil: Go's, with sni
		sni   string
		alert string // what the client's error says
		ev    netpolicy.Event
	}{
		{name: "not allowed", sni: "evil.test", alert: "access denied",
			ev: netpolicy.Event{Name: "evil.test", Port: 443, Rule: netpolicy.RuleNotListed}},
		{name: "no SNI", alert: "access denied", ev: netpolicy.Event{Rule: RuleNoSNI, Port: 443}},
		{name: "rebinding", sni: "rebind.test", alert: "access denied",
			ev: netpolicy.Event{Name: "rebind.test", Port: 443, Rule: netpolicy.RuleLocal, Addr: loopback}},
		{name: "ip literal", hello: records(helloMsg(sniExt("127.0.0.1")), 1<<14),
			ev: netpolicy.Event{Name: "127.0.0.1", Port: 443, Rule: netpolicy.RuleIPLiteral}},
		{name: "not TLS", hello: []byte("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
			ev: netpolicy.Event{Port: 443, Rule: RuleBadClientHello}},
		{name: "cannot resolve", sni: "nx.test", alert: "internal error",
			ev: netpolicy.Event{Name: "nx.test", Port: 443, Rule: RuleUnresolvable}},
	}
	e := newEnv(t, restricted(testDomains...))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			c, err := net.Dial("tcp", e.transTLS)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if tt.hello == nil {
				cfg := &tls.Config{RootCAs: e.roots, ServerName: tt.sni}
				if tt.sni == "" {
					cfg.InsecureSkipVerify = true
				}
				err := tls.Client(c, cfg).Handshake()
				if err == nil || !strings.Contains(err.Error(), tt.alert) {
					t.Errorf("handshake error %v, want %q", err, tt.alert)
				}
			} else {
				_, _ = c.Write(tt.hello) // a refusal may reset it: what is read says
				got, _ := io.ReadAll(c)
				if !bytes.Equal(got, alertAccessDenied) {
					t.Errorf("got % x, want the access_denied alert", got)
				}
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v", d)
			}
			tt.ev.Proto = ProtoTLS
			checkEvent(t, e.sb.take1(t), tt.ev)
		})
	}
}

func TestTransparentTCP(t *testing.T) {
	echo := echoServer(t)
	blockLocal := func(b bool) api.Network {
		return api.Network{EgressPolicy: api.EgressOpen, BlockLocalNetwork: &b}
	}
	private := netip.MustParseAddrPort("10.0.0.7:7777")
	tests := []struct {
		name string
		n    api.Network
		dst  netip.AddrPort // "self": the listener itself
		ok   bool
		rule string
	}{
		{name: "open, private allowed", n: blockLocal(false), dst: private, ok: true, rule: netpolicy.RuleOpen},
		{name: "open, private blocked", n: blockLocal(true), dst: private, rule: netpolicy.RuleLocal},
		{name: "restricted", n: restricted(testDomains...), dst: private, rule: netpolicy.RuleIPLiteral},
		{name: "none", n: api.Network{EgressPolicy: api.EgressNone}, dst: private, rule: netpolicy.RuleNone},
		{name: "metadata", n: blockLocal(false), dst: netip.MustParseAddrPort("169.254.169.254:80"), rule: netpolicy.RuleMetadata},
		{name: "public, unreachable", n: blockLocal(true), dst: netip.MustParseAddrPort("203.0.113.7:25"), rule: RuleUpstream},
		{name: "loop", n: blockLocal(false), rule: RuleLoop},
	}
	e := newEnv(t, blockLocal(false))
	e.route(private.String(), echo)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.setPolicy(tt.n)
			dst := tt.dst
			if !dst.IsValid() {
				dst = netip.MustParseAddrPort(e.transTCP)
			}
			e.origDst.Store(&dst)
			got, err := tcpExchange(e.transTCP, tt.ok)
			if tt.ok {
				if err != nil || !bytes.Equal(got, payload) {
					t.Errorf("echo: %d bytes, %v", len(got), err)
				}
			} else if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("read: %d bytes, %v; want a reset", len(got), err)
			}
			ev := e.sb.take1(t)
			want := netpolicy.Event{Proto: ProtoTCP, Port: int(dst.Port()), Allow: tt.ok, Rule: tt.rule, Addr: dst.Addr()}
			checkEvent(t, ev, want)
			if tt.ok && (ev.BytesOut != 1000 || ev.BytesIn != 1000) {
				t.Errorf("bytes out %d in %d, want 1000 each", ev.BytesOut, ev.BytesIn)
			}
		})
	}
}

var payload = bytes.Repeat([]byte("0123456789"), 100)

// tcpExchange connects to addr, sends payload (if send) and reads to the end. The proxy's
// reset may come before the connect returns, so it is an error of the connect or of the read.
func tcpExchange(addr string, send bool) ([]byte, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	if send { // (a write that met the reset would take its error from the read)
		go func() {
			_, _ = c.Write(payload)
			_ = c.(*net.TCPConn).CloseWrite()
		}()
	}
	return io.ReadAll(c)
}

// echoServer sends back what it reads, then half-closes.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// An echo: the test's client checks what comes back.
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}
