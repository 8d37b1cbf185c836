package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func TestCredentials(t *testing.T) {
	n := restricted(testDomains...)
	n.Credentials = []api.Credential{{Host: "allowed.test", Header: "Authorization", Value: secret}}
	tests := []struct {
		name        string
		transparent bool
		url         string
		sent        string // an Authorization header the sandbox sends
		body        string
		ev          netpolicy.Event
	}{
		{name: "explicit", url: "http://allowed.test/", body: "host=allowed.test tls=true cred=ok",
			ev: netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleCredential, Addr: loopback, Credential: "Authorization"}},
		{name: "sandbox's header replaced", url: "http://allowed.test/", sent: "Bearer fake", body: "host=allowed.test tls=true cred=ok",
			ev: netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleCredential, Addr: loopback, Credential: "Authorization"}},
		{name: "transparent", transparent: true, url: "http://allowed.test/", sent: "Bearer fake", body: "host=allowed.test tls=true cred=ok",
			ev: netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleCredential, Addr: loopback, Credential: "Authorization"}},
		{name: "other host", url: "http://other.test/", body: "host=other.test tls=false cred=missing",
			ev: netpolicy.Event{Proto: ProtoHTTP, Name: "other.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "CONNECT passes through", url: "https://allowed.test/", sent: "Bearer mine", body: "tls=true cred=other",
			ev: netpolicy.Event{Proto: ProtoConnect, Name: "allowed.test", Port: 443, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "transparent TLS passes through", transparent: true, url: "https://allowed.test/", body: "tls=true cred=missing",
			ev: netpolicy.Event{Proto: ProtoTLS, Name: "allowed.test", Port: 443, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
	}
	e := newEnv(t, n)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			to := e.explicit
			if tt.transparent {
				to = e.transHTTP
				if strings.HasPrefix(tt.url, "https") {
					to = e.transTLS
				}
			}
			tr := &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: e.roots},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					c, err := d.DialContext(ctx, network, to)
					return &recConn{Conn: c, rec: rec}, err
				},
			}
			if !tt.transparent {
				tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: e.explicit})
			}
			req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
			if tt.sent != "" {
				req.Header.Set("Authorization", tt.sent)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
			if resp.StatusCode != 200 || !strings.Contains(string(b), tt.body) {
				t.Errorf("got %d %q, want %q", resp.StatusCode, b, tt.body)
			}
			ev := e.sb.take1(t)
			checkEvent(t, ev, tt.ev)
			if rec.contains(secret) || rec.contains(strings.TrimPrefix(secret, "Bearer ")) {
				t.Errorf("the secret went through the sandbox's connection")
			}
			if strings.Contains(fmt.Sprintf("%#v", ev), "s3cret") {
				t.Errorf("the secret is in the event")
			}
		})
	}
}

// recorder keeps every byte a client connection wrote and read.
type recorder struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (r *recorder) add(p []byte) {
	r.mu.Lock()
	r.buf.Write(p)
	r.mu.Unlock()
}

func (r *recorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.buf.Bytes(), []byte(s))
}

type recConn struct {
	net.Conn
	rec *recorder
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.add(p[:n])
	return n, err
}

func (c *recConn) Write(p []byte) (int, error) {
	c.rec.add(p)
	return c.Conn.Write(p)
}
