package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func TestHTTP(t *testing.T) {
	meta := netip.MustParseAddr("169.254.169.254")
	tests := []struct {
		name        string
		transparent bool
		url, host   string // host: req.Host (Go's client then puts it in the URL too)
		status      int
		body        string // a substring of the body
		ev          netpolicy.Event
	}{
		{name: "allowed explicit", url: "http://allowed.test/", status: 200, body: "host=allowed.test tls=false cred=missing",
			ev: netpolicy.Event{Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "allowed transparent", transparent: true, url: "http://allowed.test/", status: 200, body: "host=allowed.test tls=false",
			ev: netpolicy.Event{Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "allowed port", url: "http://ported.test:8080/", status: 200, body: "host=ported.test:8080",
			ev: netpolicy.Event{Name: "ported.test", Port: 8080, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "case and trailing dot", url: "http://Allowed.Test./", status: 200, body: "host=allowed.test",
			ev: netpolicy.Event{Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback}},
		{name: "denied name", url: "http://evil.test/", status: 403,
			body: "airlock: egress to evil.test:80 denied (not_in_allowlist): evil.test is not in the sandbox's allowedDomains\n",
			ev:   netpolicy.Event{Name: "evil.test", Port: 80, Rule: netpolicy.RuleNotListed}},
		{name: "denied name transparent", transparent: true, url: "http://evil.test/", status: 403, body: "denied (not_in_allowlist)",
			ev: netpolicy.Event{Name: "evil.test", Port: 80, Rule: netpolicy.RuleNotListed}},
		{name: "ip literal", url: "http://127.0.0.1/", status: 403, body: "denied (ip_literal)",
			ev: netpolicy.Event{Name: "127.0.0.1", Port: 80, Rule: netpolicy.RuleIPLiteral}},
		{name: "public ip literal", url: "http://203.0.113.9:80/", status: 403, body: "denied (ip_literal)",
			ev: netpolicy.Event{Name: "203.0.113.9", Port: 80, Rule: netpolicy.RuleIPLiteral}},
		{name: "rebinding to loopback", url: "http://rebind.test/", status: 403, body: "rebind.test resolved to 127.0.0.1",
			ev: netpolicy.Event{Name: "rebind.test", Port: 80, Rule: netpolicy.RuleLocal, Addr: loopback}},
		{name: "rebinding to metadata", transparent: true, url: "http://meta.test/", status: 403, body: "denied (metadata)",
			ev: netpolicy.Event{Name: "meta.test", Port: 80, Rule: netpolicy.RuleMetadata, Addr: meta}},
		{name: "port not allowed", url: "http://allowed.test:8081/", status: 403, body: "denied (port)",
			ev: netpolicy.Event{Name: "allowed.test", Port: 8081, Rule: netpolicy.RulePort}},
		{name: "host with default port", url: "http://allowed.test/", host: "ALLOWED.test:80", status: 200, body: "tls=false",
			ev: netpolicy.Event{Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist}},
		{name: "cannot resolve", url: "http://nx.test/", status: 502, body: "failed (cannot_resolve): cannot resolve nx.test",
			ev: netpolicy.Event{Name: "nx.test", Port: 80, Rule: RuleUnresolvable}},
		{name: "upstream unreachable", url: "http://public.test/", status: 502, body: "failed (upstream_error)",
			ev: netpolicy.Event{Name: "public.test", Port: 80, Rule: RuleUpstream}},
		{name: "every address refused", url: "http://mixed.test/", status: 403, body: "mixed.test resolved to 10.9.9.9",
			ev: netpolicy.Event{Name: "mixed.test", Port: 80, Rule: netpolicy.RuleLocal, Addr: netip.MustParseAddr("10.9.9.9")}},
		{name: "first allowed address", url: "http://mixed.test/", status: 502, body: "no route to 10.9.9.9:80",
			ev: netpolicy.Event{Name: "mixed.test", Port: 80, Rule: RuleUpstream}},
	}
	e := newEnv(t, restricted(testDomains...))
	explicit, transparent := e.explicitClient(), e.transparentClient()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := explicit
			if tt.transparent {
				c = transparent
			}
			if tt.name == "first allowed address" {
				// mixed.test is 10.9.9.9 (refused: blockLocalNetwork) then 127.0.0.1 (refused
				// too): with blockLocalNetwork off, 10.9.9.9 is tried and has no route.
				e.setPolicy(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: testDomains, BlockLocalNetwork: new(false)})
				defer e.setPolicy(restricted(testDomains...))
			}
			status, body, denied := get(t, c, tt.url, tt.host)
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("got %d %q, want %d with %q", status, body, tt.status, tt.body)
			}
			if status == 403 && denied != tt.ev.Rule {
				t.Errorf("X-Airlock-Denied = %q, want %q", denied, tt.ev.Rule)
			}
			tt.ev.Proto = ProtoHTTP
			checkEvent(t, e.sb.take1(t), tt.ev)
		})
	}
}

// TestHTTPRaw covers what Go's client never sends.
func TestHTTPRaw(t *testing.T) {
	tests := []struct {
		name        string
		transparent bool
		req         string
		status      int
		body        string
		rule        string
	}{
		{name: "no host", transparent: true, req: "GET / HTTP/1.0\r\n\r\n", status: 400, body: "without a Host header", rule: RuleBadRequest},
		{name: "two hosts", transparent: true, req: "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n", status: 400, body: "Host headers", rule: RuleBadRequest},
		{name: "forged host", req: "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", status: 403, body: "denied (host_mismatch): the Host header \"evil.test\" does not name the request's host allowed.test:80", rule: RuleHostMismatch},
		{name: "host with another port", req: "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n", status: 403, body: "host_mismatch", rule: RuleHostMismatch},
		{name: "host with the default port", req: "GET http://allowed.test/ HTTP/1.1\r\nHost: Allowed.Test.:80\r\n\r\n", status: 200, body: "host=allowed.test"},
		{name: "origin form to the explicit proxy", req: "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", status: 400, body: "not a proxy request", rule: RuleBadRequest},
		{name: "https URL", req: "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", status: 400, body: "use CONNECT", rule: RuleBadRequest},
		{name: "absolute form, forged host", transparent: true, req: "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", status: 403, body: "host_mismatch", rule: RuleHostMismatch},
		{name: "absolute form without host", req: "GET http://allowed.test/ HTTP/1.0\r\n\r\n", status: 200, body: "host=allowed.test"},
		{name: "bare LF", transparent: true, req: "GET / HTTP/1.1\nHost: allowed.test\n\n", status: 200, body: "host=allowed.test"},
		{name: "CONNECT to port 80", transparent: true, req: "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n", status: 400, body: "CONNECT goes to the proxy", rule: RuleBadRequest},
		{name: "garbage", req: "\x00\x01 nonsense\r\n\r\n", status: 400, body: "malformed request", rule: RuleBadRequest},
		{name: "header too large", req: "GET http://allowed.test/ HTTP/1.1\r\nX: " + strings.Repeat("a", MaxHeaderBytes) + "\r\n\r\n", status: 431, rule: RuleBadRequest},
	}
	e := newEnv(t, restricted(testDomains...))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := e.explicit
			if tt.transparent {
				addr = e.transHTTP
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go func() { _, _ = io.WriteString(c, tt.req) }() // may fail once the proxy has answered
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.body) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, b, tt.status, tt.body)
			}
			if ct := resp.Header.Get("Content-Type"); tt.status != 200 && !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q", ct)
			}
			ev := e.sb.take1(t)
			if ev.Allow != (tt.status == 200) || (tt.rule != "" && ev.Rule != tt.rule) {
				t.Errorf("event %+v, want rule %q", ev, tt.rule)
			}
		})
	}
}

// TestHTTPBytes checks the byte counts of a request's event: its body and its answer's.
func TestHTTPBytes(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	c := e.explicitClient()
	resp, err := c.Post("http://allowed.test/size/2345", "text/plain", strings.NewReader(strings.Repeat("y", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 2345 {
		t.Fatalf("body of %d bytes", len(b))
	}
	ev := e.sb.take1(t)
	checkEvent(t, ev, netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist, Addr: loopback})
	if ev.BytesOut != 1000 || ev.BytesIn != 2345 {
		t.Errorf("bytes out %d in %d, want 1000 and 2345", ev.BytesOut, ev.BytesIn)
	}
}

// TestLivePolicy changes the policy between two requests of one kept-alive connection.
func TestLivePolicy(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	c := e.explicitClient()
	reused := make([]bool, 0, 3)
	do := func(want int) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = append(reused, i.Reused) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "http://allowed.test/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("status %d, want %d", resp.StatusCode, want)
		}
	}
	do(200)
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist})
	e.setPolicy(restricted("other.test"))
	do(403)
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Rule: netpolicy.RuleNotListed})
	e.setPolicy(api.Network{EgressPolicy: api.EgressNone})
	do(403)
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Rule: netpolicy.RuleNone})
	e.setPolicy(restricted("allowed.test"))
	do(200)
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist})
	for i, r := range reused[1:] {
		if !r {
			t.Errorf("request %d did not reuse the connection", i+2)
		}
	}
}

// TestStreaming checks that a response is forwarded as it comes, not when it ends.
func TestStreaming(t *testing.T) {
	e := newEnv(t, restricted(testDomains...))
	release := make(chan struct{})
	stream := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n") // the client checks what arrives
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "data: last\n\n")
	}))
	e.route("127.0.0.1:80", stream)
	resp, err := e.explicitClient().Get("http://allowed.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: last\n\n" {
		t.Errorf("rest %q", rest)
	}
	if resp.TransferEncoding == nil || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v", resp.TransferEncoding)
	}
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: "allowed.test", Port: 80, Allow: true, Rule: netpolicy.RuleAllowlist})
}

// TestMaxConns: beyond MaxConns, the explicit proxy answers 503 at once.
func TestMaxConns(t *testing.T) {
	e := newEnv(t, restricted(testDomains...), func(p *Proxy) { p.MaxConns = 1 })
	first, err := net.Dial("tcp", e.explicit)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	time.Sleep(50 * time.Millisecond) // let the proxy accept it
	second, err := net.Dial("tcp", e.explicit)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d", resp.StatusCode)
	}
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Rule: RuleOverloaded})
}

// httptestServer serves h on loopback until the test ends and returns its address.
func httptestServer(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }() // until the cleanup closes it
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String()
}

// TestLoop: a request for one of the proxy's own listeners is refused, not forwarded back to
// the proxy again and again.
func TestLoop(t *testing.T) {
	e := newEnv(t, api.Network{EgressPolicy: api.EgressOpen, BlockLocalNetwork: new(false)})
	status, body, denied := get(t, e.explicitClient(), "http://"+e.transHTTP+"/", "")
	if status != 403 || denied != RuleLoop || !strings.Contains(body, "is the egress proxy itself") {
		t.Errorf("got %d %q (%s)", status, body, denied)
	}
	ap := netip.MustParseAddrPort(e.transHTTP)
	checkEvent(t, e.sb.take1(t), netpolicy.Event{Proto: ProtoHTTP, Name: ap.Addr().String(), Port: int(ap.Port()), Rule: RuleLoop, Addr: ap.Addr()})
}
