package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// secret is the credential of the tests; it must never reach the sandbox's side.
const secret = "Bearer s3cret-7f1d2c9a"

var loopback = netip.MustParseAddr("127.0.0.1")

// names is the fake DNS of the tests. Trusted names (testOptions) are never looked up. Every
// address is loopback, link-local or documentation range; the test network (env.dial) reaches
// loopback only.
var names = map[string][]netip.Addr{
	"rebind.test": {loopback},
	"meta.test":   {netip.MustParseAddr("169.254.169.254")},
	"public.test": {netip.MustParseAddr("203.0.113.7")},
	"evil.test":   {netip.MustParseAddr("203.0.113.66")},
	"mixed.test":  {netip.MustParseAddr("10.9.9.9"), loopback},
}

type fakeResolver struct{}

func (fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	if network != "ip4" {
		return nil, fmt.Errorf("fake resolver: network %q", network)
	}
	if a, ok := names[canonical(host)]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// testOptions trusts the names the test servers stand for, so that they may be on loopback.
var testOptions = netpolicy.Options{Trusted: map[string][]netip.Addr{
	"allowed.test": {loopback},
	"other.test":   {loopback},
	"ported.test":  {loopback},
}}

// testDomains is the allowlist of the default policy.
var testDomains = []string{"allowed.test", "other.test", "ported.test:8080", "rebind.test",
	"meta.test", "public.test", "nx.test", "mixed.test"}

func compile(t testing.TB, n api.Network) *netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.Compile(n, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func restricted(domains ...string) api.Network {
	return api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: domains}
}

// fakeSandbox holds a policy that tests change, and the events it received.
type fakeSandbox struct {
	pol    atomic.Pointer[netpolicy.Policy]
	mu     sync.Mutex // guards events
	events []netpolicy.Event
}

func (s *fakeSandbox) Policy() *netpolicy.Policy { return s.pol.Load() }

func (s *fakeSandbox) Event(ev netpolicy.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}

// take waits for n events (allowed ones come when their connection ends) and removes them.
func (s *fakeSandbox) take(t testing.TB, n int) []netpolicy.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		if len(s.events) >= n {
			evs := s.events[:n:n]
			s.events = s.events[n:]
			s.mu.Unlock()
			return evs
		}
		got := len(s.events)
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("got %d events, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// take1 waits for the next event.
func (s *fakeSandbox) take1(t testing.TB) netpolicy.Event { t.Helper(); return s.take(t, 1)[0] }

// checkEvent compares the fields of ev that want sets (Kind and Time always checked).
func checkEvent(t testing.TB, ev, want netpolicy.Event) {
	t.Helper()
	if ev.Kind != netpolicy.KindConnect || ev.Time.IsZero() {
		t.Errorf("event kind %q time %v", ev.Kind, ev.Time)
	}
	if ev.Proto != want.Proto || ev.Name != want.Name || ev.Port != want.Port || ev.Allow != want.Allow || ev.Rule != want.Rule {
		t.Errorf("event = %s %s:%d allow=%t rule=%s (%s); want %s %s:%d allow=%t rule=%s",
			ev.Proto, ev.Name, ev.Port, ev.Allow, ev.Rule, ev.Reason, want.Proto, want.Name, want.Port, want.Allow, want.Rule)
	}
	if want.Addr.IsValid() && ev.Addr != want.Addr {
		t.Errorf("event addr = %v, want %v", ev.Addr, want.Addr)
	}
	if ev.Credential != want.Credential {
		t.Errorf("event credential = %q, want %q", ev.Credential, want.Credential)
	}
	if ev.Reason == "" {
		t.Errorf("event without a reason")
	}
	if ev.Allow && ev.BytesIn == 0 {
		t.Errorf("allowed event with no bytes in")
	}
}

// env is a proxy serving a fake sandbox on four loopback listeners, and the servers its
// trusted names stand for: web on "port 80", tlsWeb on "port 443" of 127.0.0.1.
type env struct {
	t      testing.TB
	sb     *fakeSandbox
	p      *Proxy
	web    *httptest.Server
	tlsWeb *httptest.Server
	roots  *x509.CertPool

	explicit, transHTTP, transTLS, transTCP string // listener addresses

	mu      sync.Mutex // guards routes
	routes  map[string]string
	origDst atomic.Pointer[netip.AddrPort]
	serving sync.WaitGroup
}

// newEnv starts an env whose sandbox has policy n; setup, if any, may change the proxy before
// it serves.
func newEnv(t testing.TB, n api.Network, setup ...func(*Proxy)) *env {
	t.Helper()
	e := &env{t: t, sb: &fakeSandbox{}, routes: map[string]string{}}
	e.sb.pol.Store(compile(t, n))
	cert, roots := testCert(t)
	e.roots = roots
	e.web = httptest.NewServer(http.HandlerFunc(echoHandler))
	e.tlsWeb = httptest.NewUnstartedServer(http.HandlerFunc(echoHandler))
	e.tlsWeb.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	e.tlsWeb.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	e.tlsWeb.StartTLS()
	e.route("127.0.0.1:80", e.web.Listener.Addr().String())
	e.route("127.0.0.1:443", e.tlsWeb.Listener.Addr().String())
	e.route("127.0.0.1:8080", e.web.Listener.Addr().String())
	e.p = &Proxy{Resolver: fakeResolver{}, Dial: e.dial, UpstreamTLS: &tls.Config{RootCAs: roots}}
	for _, f := range setup {
		f(e.p)
	}
	e.explicit = e.listen(func(ln net.Listener) error { return e.p.ServeHTTP(ln, e.sb) })
	e.transHTTP = e.listen(func(ln net.Listener) error { return e.p.ServeTransparentHTTP(ln, e.sb) })
	e.transTLS = e.listen(func(ln net.Listener) error { return e.p.ServeTransparentTLS(ln, e.sb) })
	e.transTCP = e.listen(func(ln net.Listener) error {
		return e.p.ServeTransparentTCP(ln, e.sb, func(net.Conn) (netip.AddrPort, error) {
			if ap := e.origDst.Load(); ap != nil {
				return *ap, nil
			}
			return netip.AddrPort{}, fmt.Errorf("no original destination")
		})
	})
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	e.p.Close()
	e.serving.Wait()
	e.web.Close()
	e.tlsWeb.Close()
	e.sb.mu.Lock()
	defer e.sb.mu.Unlock()
	for _, ev := range e.sb.events {
		e.t.Errorf("event nobody expected: %+v", ev)
	}
}

func (e *env) listen(serve func(net.Listener) error) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	e.serving.Add(1)
	go func() {
		defer e.serving.Done()
		if err := serve(ln); err != nil {
			e.t.Errorf("serve: %v", err)
		}
	}()
	return ln.Addr().String()
}

// route makes the test network take connections for addr to the loopback address to.
func (e *env) route(addr, to string) {
	e.mu.Lock()
	e.routes[addr] = to
	e.mu.Unlock()
}

// dial is the proxy's Dial: only the routes (all on loopback) exist, so that no test sends
// traffic off the machine.
func (e *env) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	e.mu.Lock()
	to, ok := e.routes[addr]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test network: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (e *env) setPolicy(n api.Network) { e.sb.pol.Store(compile(e.t, n)) }

// explicitClient uses the proxy as HTTP_PROXY and HTTPS_PROXY.
func (e *env) explicitClient() *http.Client {
	u := &url.URL{Scheme: "http", Host: e.explicit}
	return e.client(&http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: e.roots}})
}

// transparentClient connects to the transparent listeners whatever the destination, as the
// sandbox's firewall redirects it: port 443 to the TLS one, any other to the HTTP one.
func (e *env) transparentClient() *http.Client {
	return e.client(&http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: e.roots},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			to := e.transHTTP
			if strings.HasSuffix(addr, ":443") {
				to = e.transTLS
			}
			var d net.Dialer
			return d.DialContext(ctx, network, to)
		},
	})
}

func (e *env) client(tr *http.Transport) *http.Client {
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// echoHandler describes the request it got, never repeating a header's value: the host, TLS,
// what became of the credential, and the body's size. /size/N answers N bytes.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	var size int
	if _, err := fmt.Sscanf(r.URL.Path, "/size/%d", &size); err == nil {
		_, _ = w.Write([]byte(strings.Repeat("x", size))) // the client checks what arrives
		return
	}
	cred := "missing"
	switch v := r.Header.Values("Authorization"); {
	case len(v) > 1:
		cred = "several"
	case len(v) == 1 && v[0] == secret:
		cred = "ok"
	case len(v) == 1:
		cred = "other"
	}
	fmt.Fprintf(w, "host=%s tls=%t cred=%s body=%d", r.Host, r.TLS != nil, cred, n)
}

var (
	certOnce  sync.Once
	certPair  tls.Certificate
	certRoots *x509.CertPool
)

// testCert is a self-signed certificate for the test names.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "airlock proxy test"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			DNSNames:              []string{"allowed.test", "other.test", "evil.test", "ported.test"},
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(der)
		certPair = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
		certRoots = x509.NewCertPool()
		certRoots.AddCert(leaf)
	})
	return certPair, certRoots
}

// get fetches u and returns the status, body and the X-Airlock-Denied header.
func get(t testing.TB, c *http.Client, u string, host string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("X-Airlock-Denied")
}
