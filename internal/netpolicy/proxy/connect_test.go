package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// dialConnect opens a CONNECT tunnel through the explicit proxy and returns the connection
// (reading after the response) and the response.
func dialConnect(t testing.TB, proxyAddr, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return &bufConn{Conn: c, r: br}, resp
}

// bufConn reads what a bufio.Reader already holds first.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// httpsGet sends one request over a TLS connection and returns the body.
func httpsGet(t testing.TB, tc *tls.Conn) string {
	t.Helper()
	if err := tc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestConnectHTTPS(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	c := e.explicitClient()
	status, body, _ := get(t, c, "https://allowed.test/", "")
	if status != 200 || body != "host=allowed.test tls=true cred=missing body=0" {
		t.Errorf("got %d %q", status, body)
	}
	c.Transport.(*http.Transport).CloseIdleConnections() // ends the tunnel, and its event comes
	ev := e.sb.take1(t)
	checkEvent(t, ev, netpolicy.Event{Proto: ProtoConnect, Name: "allowed.test", Port: 443, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback})
	if ev.BytesOut < 100 || ev.BytesIn < 100 {
		t.Errorf("bytes out %d in %d", ev.BytesOut, ev.BytesIn)
	}
}

func TestConnectDenied(t *testing.T) {
	tests := []struct {
		target string
		status int
		ev     netpolicy.Event
	}{
		{"evil.test:443", 403, netpolicy.Event{Name: "evil.test", Port: 443, Rule: netpolicy.RuleNotListed}},
		{"allowed.test:22", 403, netpolicy.Event{Name: "allowed.test", Port: 22, Rule: netpolicy.RulePort}},
		{"127.0.0.1:443", 403, netpolicy.Event{Name: "127.0.0.1", Port: 443, Rule: netpolicy.RuleIPLiteral}},
		{"[::1]:443", 403, netpolicy.Event{Name: "::1", Port: 443, Rule: netpolicy.RuleIPLiteral}},
		{"rebind.test:443", 403, netpolicy.Event{Name: "rebind.test", Port: 443, Rule: netpolicy.RuleLocal, Addr: loopback}},
		{"nx.test:443", 502, netpolicy.Event{Name: "nx.test", Port: 443, Rule: RuleUnresolvable}},
		{"allowed.test", 400, netpolicy.Event{Rule: RuleBadRequest}},
	}
	e := newEnv(t, restricted(testDomains...))
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			_, resp := dialConnect(t, e.explicit, tt.target)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), "("+tt.ev.Rule+")") {
				t.Errorf("got %d %q, want %d naming %s", resp.StatusCode, b, tt.status, tt.ev.Rule)
			}
			if tt.status == 403 && resp.Header.Get("X-Airlock-Denied") != tt.ev.Rule {
				t.Errorf("X-Airlock-Denied = %q", resp.Header.Get("X-Airlock-Denied"))
			}
			tt.ev.Proto = ProtoConnect
			checkEvent(t, e.sb.take1(t), tt.ev)
		})
	}
}

func TestConnectSNI(t *testing.T) {
	tests := []struct {
		name, target, sni string
		ok                bool
		rule              string
	}{
		{name: "same name", target: "allowed.test:443", sni: "allowed.test", ok: true, rule: netpolicy.RuleAllowlist},
		{name: "case differs", target: "ALLOWED.test:443", sni: "allowed.TEST", ok: true, rule: netpolicy.RuleAllowlist},
		{name: "no SNI", target: "allowed.test:443", ok: true, rule: netpolicy.RuleAllowlist},
		{name: "mismatch", target: "allowed.test:443", sni: "other.test", rule: RuleSNIMismatch},
		{name: "fronting", target: "allowed.test:443", sni: "evil.test", rule: RuleSNIMismatch},
	}
	e := newEnv(t, restricted(testDomains...))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, resp := dialConnect(t, e.explicit, tt.target)
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %s", resp.Status)
			}
			cfg := &tls.Config{RootCAs: e.roots, ServerName: tt.sni}
			if tt.sni == "" {
				cfg.InsecureSkipVerify = true // no server name to verify; Go then sends no SNI
			}
			tc := tls.Client(c, cfg)
			err := tc.Handshake()
			if tt.ok {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				if body := httpsGet(t, tc); !strings.Contains(body, "tls=true") {
					t.Errorf("body %q", body)
				}
			} else if err == nil {
				t.Fatal("handshake succeeded through a mismatched tunnel")
			}
			tc.Close()
			checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoConnect, Name: "allowed.test", Port: 443, Allow: tt.ok, Rule: tt.rule, Addr: loopback})
		})
	}
}

// TestConnectServerFirst: a protocol whose server speaks first works through CONNECT (the
// proxy waits for the sandbox's first bytes only in the sandbox→server direction).
func TestConnectServerFirst(t *testing.T) {
	e := newEnv(t, restricted("allowed.test:2222"))
	e.route("127.0.0.1:2222", bannerServer(t))
	c, resp := dialConnect(t, e.explicit, "allowed.test:2222")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "SSH-2.0-airlock-test\r\n" {
		t.Fatalf("banner %q, %v", line, err)
	}
	c.Close()
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoConnect, Name: "allowed.test", Port: 2222, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback})
}

// TestCloseEndsTunnels: Close ends live connections at once.
func TestCloseEndsTunnels(t *testing.T) {
	e := newEnv(t, restricted("allowed.test:2222"))
	e.route("127.0.0.1:2222", bannerServer(t))
	c, resp := dialConnect(t, e.explicit, "allowed.test:2222")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	start := time.Now()
	e.p.Close()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("tunnel read: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	e.sb.take1(t)
}

// bannerServer greets every connection with an SSH-like banner and keeps it until the peer
// closes.
func bannerServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			// The test's client checks what arrives.
			_, _ = io.WriteString(c, "SSH-2.0-airlock-test\r\n")
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(conns)
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
