package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/netns"
	"github.com/airlockrun/airlock/internal/netpolicy/proxy"
)

// fastFail is how soon a refused connect must fail.
const fastFail = 10 * time.Millisecond

// apiAddr is where the trusted name api.test points. Nothing is ever sent to it: the tests
// reach the proxy with bytes that are no TLS ClientHello, so the proxy never dials.
var apiAddr = netip.MustParseAddr("198.51.100.7")

// resolve asks the sandbox's DNS for name's IPv4 addresses from inside its namespace, as a
// program in the sandbox does (the query to 192.0.2.53 is redirected to airlock's server).
func resolve(g *Gateway, name string) ([]netip.Addr, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var c net.Conn
		err := g.Link.Run(func() error {
			var err error
			c, err = net.DialTimeout(network, "192.0.2.53:53", 2*time.Second)
			return err
		})
		return c, err
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return r.LookupNetIP(ctx, "ip4", name)
}

// connect dials addr from inside the sandbox and, once connected, sends bytes that are no
// ClientHello. It returns the connect's error and how long the connect took.
func connect(g *Gateway, addr string) (error, time.Duration) {
	var (
		c    net.Conn
		took time.Duration
	)
	err := g.Link.Run(func() error {
		start := time.Now()
		var err error
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		took = time.Since(start)
		return err
	})
	if err == nil {
		// What the proxy does with it is not measured here: only the connect.
		_, _ = c.Write([]byte("not a ClientHello\r\n\r\n"))
		c.Close()
	}
	return err, took
}

// refusedFast checks that connects to every address on every port are refused at once.
func refusedFast(t *testing.T, g *Gateway, addrs []string, ports ...string) {
	t.Helper()
	for _, a := range addrs {
		for _, p := range ports {
			// Every attempt refused; the fastest of three within fastFail (one may lose the
			// CPU on a busy host).
			best := time.Hour
			for range 3 {
				err, took := connect(g, net.JoinHostPort(a, p))
				t.Logf("connect %s:%s: %v after %v", a, p, err, took)
				if !errors.Is(err, unix.ECONNREFUSED) && !errors.Is(err, unix.EHOSTUNREACH) {
					t.Errorf("connect %s:%s: %v; want ECONNREFUSED or EHOSTUNREACH", a, p, err)
				}
				best = min(best, took)
			}
			if best > fastFail {
				t.Errorf("connect %s:%s: refused after %v at best; want within %v", a, p, best, fastFail)
			}
		}
	}
}

// reachesProxy checks that a connect to addr:443 arrives at the proxy's TLS listener (which
// reports the bytes it got as no ClientHello).
func reachesProxy(t *testing.T, g *Gateway, ev *events, addr netip.Addr) {
	t.Helper()
	ev.mu.Lock()
	before := len(ev.evs)
	ev.mu.Unlock()
	if err, _ := connect(g, net.JoinHostPort(addr.String(), "443")); err != nil {
		t.Fatalf("connect %s:443: %v", addr, err)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ev.mu.Lock()
		found := slices.ContainsFunc(ev.evs[before:], func(e netpolicy.Event) bool {
			return e.Proto == proxy.ProtoTLS && e.Rule == proxy.RuleBadClientHello
		})
		ev.mu.Unlock()
		if found {
			return
		}
	}
	t.Fatalf("connect %s:443: the proxy reported nothing", addr)
}

// TestRestrictedFastFail: in restricted egress the sandbox connects only to what airlock's DNS
// answered it; an IP literal, a private and a metadata address are refused at connect, fast.
// Answers expire, and a policy change forgets them.
func TestRestrictedFastFail(t *testing.T) {
	svc, ev := newService(t, map[string][]netip.Addr{"api.test": {apiAddr}})
	// The trusted answer's TTL is 5 s; a ceiling of 1.5 s makes the admission expire soon.
	svc.admitCeiling = 1500 * time.Millisecond
	g, err := svc.Attach("sbx_f", api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"api.test"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// 10.215.0.5 is another sandbox's gateway, in the pool.
	denied := []string{apiAddr.String(), "203.0.113.9", "10.1.2.3", "10.215.0.5", "169.254.169.254", "100.100.100.200"}

	// Before any lookup, even the allowed name's address is refused.
	refusedFast(t, g, denied, "80", "443")
	// Refusals are reported, with the rule that explains them.
	for _, want := range []struct {
		addr string
		rule string
	}{{"203.0.113.9", netpolicy.RuleIPLiteral}, {"10.1.2.3", netpolicy.RuleLocal}, {"169.254.169.254", netpolicy.RuleMetadata}} {
		ev.wait(t, func(e netpolicy.Event) bool {
			return e.Kind == netpolicy.KindConnect && e.Proto == "tcp" && e.Addr.String() == want.addr && e.Port == 443 && !e.Allow && e.Rule == want.rule
		})
	}
	got, err := resolve(g, "api.test")
	resolved := time.Now()
	if err != nil || !slices.Equal(got, []netip.Addr{apiAddr}) {
		t.Fatalf("resolve api.test: %v, %v", got, err)
	}
	reachesProxy(t, g, ev, apiAddr)
	refusedFast(t, g, denied[1:], "80", "443")
	refusedFast(t, g, []string{apiAddr.String()}, "22", "8443")
	if _, err := resolve(g, "evil.test"); err == nil {
		t.Fatal("evil.test resolved")
	}

	// The admission expires with its timeout.
	time.Sleep(time.Until(resolved.Add(svc.admitCeiling + 100*time.Millisecond)))
	refusedFast(t, g, []string{apiAddr.String()}, "443")
	if _, err := resolve(g, "api.test"); err != nil {
		t.Fatal(err)
	}
	reachesProxy(t, g, ev, apiAddr)

	// A policy without api.test: refused at once, and no longer answered.
	if err := g.Update(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"other.test"}}); err != nil {
		t.Fatal(err)
	}
	refusedFast(t, g, []string{apiAddr.String()}, "443")
	if _, err := resolve(g, "api.test"); err == nil {
		t.Fatal("api.test resolved after it was removed from the policy")
	}
	refusedFast(t, g, []string{apiAddr.String()}, "443")
	// Back: answered and admitted again.
	if err := g.Update(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"api.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(g, "api.test"); err != nil {
		t.Fatal(err)
	}
	reachesProxy(t, g, ev, apiAddr)

	// An answer decided under a policy that has since changed is not admitted.
	old := g.Policy()
	if err := g.Update(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"api.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(old, []netip.Addr{apiAddr}, time.Minute); !errors.Is(err, errPolicyChanged) {
		t.Fatalf("admit under the old policy: %v, want %v", err, errPolicyChanged)
	}
	refusedFast(t, g, []string{apiAddr.String()}, "443")

	// Open egress: private and metadata addresses are refused at connect too (public ones
	// would be dialled by the proxy, so they are not tried here); none: everything.
	if err := g.Update(api.Network{EgressPolicy: api.EgressOpen}); err != nil {
		t.Fatal(err)
	}
	refusedFast(t, g, denied[2:], "80", "443", "5432")
	if err := g.Update(api.Network{EgressPolicy: api.EgressNone}); err != nil {
		t.Fatal(err)
	}
	refusedFast(t, g, denied, "80", "443", strconv.Itoa(int(netns.DefaultPorts.Proxy)))
}
