package netns

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
)

// fastFail is how soon a refused connect must fail: the firewall answers inside the sandbox's
// own namespace, nothing waits on the network.
const fastFail = 10 * time.Millisecond

// dial connects from the sandbox's namespace and returns the error and how long connect took.
func dial(l *Link, addr string) (error, time.Duration) {
	var (
		c       net.Conn
		elapsed time.Duration
	)
	err := l.Run(func() error {
		start := time.Now()
		var err error
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		elapsed = time.Since(start)
		return err
	})
	if c != nil {
		c.Close()
	}
	return err, elapsed
}

// refused checks that a connect to addr is refused at once with one of errnos: every attempt
// with such an errno, the fastest of three within fastFail (one may lose the CPU on a busy host).
func refused(t *testing.T, l *Link, addr string, errnos ...unix.Errno) {
	t.Helper()
	best := time.Hour
	for range 3 {
		err, took := dial(l, addr)
		ok := false
		for _, e := range errnos {
			ok = ok || errors.Is(err, e)
		}
		t.Logf("connect %s: %v after %v", addr, err, took)
		if !ok {
			t.Errorf("connect %s: %v; want %v", addr, err, errnos)
		}
		best = min(best, took)
	}
	if best > fastFail {
		t.Errorf("connect %s: refused after %v at best; want within %v", addr, best, fastFail)
	}
}

// reaches checks that a connect to addr arrives at the listener behind ch.
func reaches(t *testing.T, l *Link, addr, msg string, ch chan string) {
	t.Helper()
	if err := inside(l, "tcp", addr, msg); err != nil {
		t.Errorf("connect %s: %v", addr, err)
		return
	}
	expect(t, ch, msg)
}

var (
	public  = netip.MustParseAddr("203.0.113.9")
	private = "10.1.2.3"
	meta    = "169.254.169.254"
)

// TestRestrictedRefusesAtConnect: in restricted egress only admitted addresses reach the
// proxy; an IP literal, a private or a metadata address is refused at connect, fast.
func TestRestrictedRefusesAtConnect(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}})
	web := listen(t, l, "tcp", DefaultPorts.HTTP)
	tls := listen(t, l, "tcp", DefaultPorts.TLS)
	for _, port := range []string{"80", "443"} {
		for _, a := range []string{public.String(), private, meta} {
			refused(t, l, net.JoinHostPort(a, port), unix.ECONNREFUSED, unix.EHOSTUNREACH)
		}
	}
	refused(t, l, "[2001:db8::1]:443", unix.ENETUNREACH, unix.ECONNREFUSED, unix.EHOSTUNREACH)

	if err := l.Admit([]netip.Addr{public}, time.Minute); err != nil {
		t.Fatal(err)
	}
	reaches(t, l, "203.0.113.9:80", "http", web)
	reaches(t, l, "203.0.113.9:443", "tls", tls)
	// Admitted for 80 and 443 only; other addresses stay refused.
	refused(t, l, "203.0.113.9:22", unix.ECONNREFUSED)
	refused(t, l, "203.0.113.10:443", unix.ECONNREFUSED)
	// Admitted again: no error, still there.
	if err := l.Admit([]netip.Addr{public, netip.MustParseAddr("::1")}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := l.Admitted()
	if err != nil || len(got) != 1 || got[public] <= 50*time.Second {
		t.Fatalf("admitted %v, %v; want %s with about a minute left", got, err, public)
	}

	// A policy change forgets everything.
	if err := l.Forget(); err != nil {
		t.Fatal(err)
	}
	refused(t, l, "203.0.113.9:443", unix.ECONNREFUSED)
	if got, _ := l.Admitted(); len(got) != 0 {
		t.Fatalf("admitted after Forget: %v", got)
	}
}

// TestAdmitExpires: an admitted address is refused again once its timeout passes, unless it
// was admitted again meanwhile (which renews the timeout).
func TestAdmitExpires(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}})
	tls := listen(t, l, "tcp", DefaultPorts.TLS)
	renewed := netip.MustParseAddr("203.0.113.20")
	if err := l.Admit([]netip.Addr{public, renewed}, 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	reaches(t, l, "203.0.113.9:443", "before", tls)
	time.Sleep(300 * time.Millisecond)
	// 100 ms left of 400: less than half of the new timeout, so renewed.
	if err := l.Admit([]netip.Addr{renewed}, time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	refused(t, l, "203.0.113.9:443", unix.ECONNREFUSED)
	reaches(t, l, "203.0.113.20:443", "renewed", tls)
	// Expired from the record too: admitting it again puts it back.
	l.pruned = time.Time{}
	if err := l.Admit([]netip.Addr{public}, time.Second); err != nil {
		t.Fatal(err)
	}
	reaches(t, l, "203.0.113.9:443", "again", tls)
}

// TestReadopt: rewriting the rules of an adopted namespace keeps what was admitted, with the
// time it had left; the rules of an airlock without the set are replaced.
func TestReadopt(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}})
	tls := listen(t, l, "tcp", DefaultPorts.TLS)
	if err := l.Admit([]netip.Addr{public}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Readopt(Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Admitted(); err != nil || got[public] <= 50*time.Second || got[public] > time.Minute {
		t.Fatalf("admitted after Readopt: %v, %v", got, err)
	}
	reaches(t, l, "203.0.113.9:443", "kept", tls)

	// Rules without the set, as an older airlock wrote them: Readopt makes it.
	c, err := l.nft()
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(admitted().Table)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Readopt(Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}); err != nil {
		t.Fatal(err)
	}
	refused(t, l, "203.0.113.9:443", unix.ECONNREFUSED)
	if err := l.Admit([]netip.Addr{public}, time.Minute); err != nil {
		t.Fatal(err)
	}
	reaches(t, l, "203.0.113.9:443", "new set", tls)
}

// TestOpenRefusesLocal: open egress redirects public addresses to the proxy and refuses at
// connect what the policy refuses by address: metadata always, private ranges with
// blockLocalNetwork; loopback stays the sandbox's own.
func TestOpenRefusesLocal(t *testing.T) {
	p := needRoot(t)
	for _, blockLocal := range []bool{true, false} {
		l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressOpen, BlockLocal: blockLocal, Ports: DefaultPorts}})
		tcp := listen(t, l, "tcp", DefaultPorts.TCP)
		reaches(t, l, "203.0.113.9:5432", "public", tcp)
		for _, port := range []string{"80", "443", "8080"} {
			refused(t, l, net.JoinHostPort(meta, port), unix.ECONNREFUSED)
			refused(t, l, net.JoinHostPort("100.100.100.200", port), unix.ECONNREFUSED)
			if blockLocal {
				refused(t, l, net.JoinHostPort(private, port), unix.ECONNREFUSED)
			}
		}
		if !blockLocal {
			reaches(t, l, net.JoinHostPort(private, "443"), "private", tcp)
		}
		// A server on the sandbox's loopback is its own, not the proxy's.
		var ln net.Listener
		if err := l.Run(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:8080"); return err }); err != nil {
			t.Fatal(err)
		}
		if err, _ := dial(l, "127.0.0.1:8080"); err != nil {
			t.Errorf("blockLocal %v: loopback: %v", blockLocal, err)
		}
		ln.Close()
	}
}

// TestWatchRefusals: every refused connection is reported with where it was going.
func TestWatchRefusals(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}})
	got := make(chan Refusal, 64)
	stop, err := l.WatchRefusals(func(r Refusal) { got <- r })
	if err != nil {
		t.Fatal(err)
	}
	refused(t, l, "203.0.113.9:443", unix.ECONNREFUSED)
	refused(t, l, "169.254.169.254:80", unix.ECONNREFUSED)
	_ = inside(l, "udp", "203.0.113.9:123", "x") // refused: the report below is what is checked
	var want []Refusal
	for _, s := range []string{"tcp 203.0.113.9:443", "tcp 169.254.169.254:80", "udp 203.0.113.9:123"} {
		proto, dst, _ := strings.Cut(s, " ")
		want = append(want, Refusal{Proto: proto, Dst: netip.MustParseAddrPort(dst)})
	}
	// Each refused connect is tried three times: each attempt is one refusal.
	seen := map[Refusal]bool{}
	for timeout := time.After(2 * time.Second); len(seen) < len(want); {
		select {
		case r := <-got:
			if !slices.Contains(want, r) {
				t.Errorf("refusal %+v, want one of %+v", r, want)
			}
			seen[r] = true
		case <-timeout:
			t.Fatalf("refusals reported: %v; want %+v", seen, want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
