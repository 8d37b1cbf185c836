package netns

import (
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/testutil"
)

// testPool is a pool away from the default, so tests do not meet a running daemon's sandboxes.
var testPool = netip.MustParsePrefix("10.213.0.0/22")

func needRoot(t testing.TB) *Pool {
	t.Helper()
	testutil.RequiresRoot(t, "network namespaces, veth, nftables")
	p, err := NewPool(testPool)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newLink(t testing.TB, p *Pool, cfg Config) *Link {
	t.Helper()
	l, err := p.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// listen opens a listener on the gateway that counts what arrives.
func listen(t *testing.T, l *Link, network string, port uint16) chan string {
	t.Helper()
	got := make(chan string, 16)
	addr := net.JoinHostPort(l.Gateway.String(), strconv.Itoa(int(port)))
	if network == "udp" {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 512)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				got <- string(buf[:n])
			}
		}()
		return got
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Close()
			got <- string(b)
		}
	}()
	return got
}

// inside dials from the sandbox's namespace and sends msg.
func inside(l *Link, network, addr, msg string) error {
	var c net.Conn
	err := l.Run(func() error {
		var err error
		c, err = net.DialTimeout(network, addr, 2*time.Second)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	if network == "udp" {
		// A rejected datagram comes back as an ICMP error on the next operation.
		time.Sleep(50 * time.Millisecond)
		_, err = c.Write(nil)
	}
	return err
}

func expect(t *testing.T, ch chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got == "" { // the empty probe datagram of inside
			expect(t, ch, want)
			return
		}
		if got != want {
			t.Errorf("listener got %q, want %q", got, want)
		}
	case <-time.After(3 * time.Second):
		t.Errorf("listener got nothing, want %q", want)
	}
}

func TestFirewall(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}})
	dns := listen(t, l, "udp", DefaultPorts.DNS)
	web := listen(t, l, "tcp", DefaultPorts.HTTP)
	tls := listen(t, l, "tcp", DefaultPorts.TLS)
	proxy := listen(t, l, "tcp", DefaultPorts.Proxy)
	gw := l.Gateway.String()
	// As airlock's DNS does when it answers a name.
	if err := l.Admit([]netip.Addr{netip.MustParseAddr("203.0.113.9")}, time.Minute); err != nil {
		t.Fatal(err)
	}

	// Allowed paths: everything ends at the gateway's listeners, whatever address was dialled.
	// None of these packets leaves the namespace with a foreign destination.
	for _, c := range []struct {
		network, addr, msg string
		ch                 chan string
	}{
		{"udp", "203.0.113.9:53", "dns-any-server", dns},
		{"udp", p.Resolver().String() + ":53", "dns-resolver", dns},
		{"tcp", "203.0.113.9:80", "plain-http", web},
		{"tcp", "203.0.113.9:443", "tls", tls},
		{"tcp", gw + ":3128", "proxy", proxy},
	} {
		if err := inside(l, c.network, c.addr, c.msg); err != nil {
			t.Errorf("%s %s: %v", c.network, c.addr, err)
			continue
		}
		expect(t, c.ch, c.msg)
	}
	// Everything else fails at once.
	for _, c := range []struct{ network, addr string }{
		{"tcp", "203.0.113.9:22"},
		{"tcp", "203.0.113.8:443"}, // not admitted
		{"tcp", gw + ":22"},
		{"tcp", gw + ":3000"}, // the open-mode port, closed in restricted
		{"udp", "203.0.113.9:123"},
		{"tcp", "[2001:db8::1]:443"},
	} {
		start := time.Now()
		err := inside(l, c.network, c.addr, "x")
		if err == nil {
			t.Errorf("%s %s: allowed", c.network, c.addr)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s %s: took %v to fail (%v); want a fast reject", c.network, c.addr, d, err)
		}
	}
}

func TestLiveRules(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressNone, Ports: DefaultPorts}})
	open := listen(t, l, "tcp", DefaultPorts.TCP)
	if err := inside(l, "tcp", "203.0.113.9:5432", "x"); err == nil {
		t.Fatal("egress none: connection allowed")
	}
	if err := l.SetRules(Rules{Egress: api.EgressOpen, Ports: DefaultPorts}); err != nil {
		t.Fatal(err)
	}
	if err := inside(l, "tcp", "203.0.113.9:5432", "open"); err != nil {
		t.Fatal(err)
	}
	expect(t, open, "open")
	if err := l.SetRules(Rules{Egress: api.EgressNone, Ports: DefaultPorts}); err != nil {
		t.Fatal(err)
	}
	if err := inside(l, "tcp", "203.0.113.9:5432", "x"); err == nil {
		t.Fatal("back to none: connection allowed")
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(l.NS.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTables()
	if err != nil || len(tables) != 1 || tables[0].Name != tableName {
		t.Fatalf("tables after two replacements: %v, %v", tables, err)
	}
}

func TestNoLeftovers(t *testing.T) {
	p := needRoot(t)
	before, _ := HostLinks()
	var names []string
	for range 5 {
		l, err := p.Create(Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}, Mbps: 100})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, l.HostIf)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Only this test's links count: another airlock (or another package's test) on the host
	// makes and removes its own meanwhile.
	after, _ := HostLinks()
	for _, n := range names {
		if slices.Contains(after, n) && !slices.Contains(before, n) {
			t.Errorf("veth %s left behind", n)
		}
	}
}

func TestSlotsAreExclusive(t *testing.T) {
	p := needRoot(t)
	a := newLink(t, p, Config{Rules: Rules{Egress: api.EgressNone}})
	// A second pool over the same prefix (another airlock process) must not take a's slot.
	p2, _ := NewPool(testPool)
	b := newLink(t, p2, Config{Rules: Rules{Egress: api.EgressNone}})
	if a.Slot == b.Slot || a.Gateway == b.Gateway {
		t.Fatalf("two sandboxes share slot %d", a.Slot)
	}
	o, err := p.Open(os.Getpid(), a.Slot)
	if err == nil {
		o.Close()
		t.Fatal("Open accepted a process that is not in the sandbox's namespace")
	}
}

func TestShaping(t *testing.T) {
	p := needRoot(t)
	const mbps = 40
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}, Mbps: mbps})
	ln, err := net.Listen("tcp", net.JoinHostPort(l.Gateway.String(), "3128"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- n
	}()
	var c net.Conn
	if err := l.Run(func() error {
		c, err = net.Dial("tcp", net.JoinHostPort(l.Gateway.String(), "3128"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const size = 10 << 20
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n := <-done
	got := float64(n*8) / time.Since(start).Seconds() / 1e6
	t.Logf("shaped to %d Mbit/s: measured %.1f Mbit/s", mbps, got)
	if n != size || got > mbps*1.15 || got < mbps*0.5 {
		t.Fatalf("sent %d bytes at %.1f Mbit/s; want %d bytes near %d Mbit/s", n, got, size, mbps)
	}
	st, err := l.Stats()
	if err != nil || st.TxBytes < size {
		t.Fatalf("stats %+v, %v: want at least %d bytes sent", st, err, size)
	}
}

func TestPoolValidation(t *testing.T) {
	for _, s := range []string{"fd00::/64", "10.0.0.0/31", "10.0.0.0/4"} {
		if _, err := NewPool(netip.MustParsePrefix(s)); err == nil {
			t.Errorf("NewPool(%s) accepted", s)
		}
	}
	p, err := NewPool(netip.MustParsePrefix("10.1.2.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if gw, sb := p.addrs(3); gw.String() != "10.1.2.13" || sb.String() != "10.1.2.14" {
		t.Errorf("slot 3: %s %s", gw, sb)
	}
	if p.slots != 64 || p.Resolver().String() != "10.1.2.1" {
		t.Errorf("slots %d resolver %s", p.slots, p.Resolver())
	}
}

// BenchmarkCreate measures a sandbox network's setup: namespace, veth, addresses, routes,
// firewall and shaping (the teardown is outside the timer).
func BenchmarkCreate(b *testing.B) {
	p := needRoot(b)
	for b.Loop() {
		l, err := p.Create(Config{Rules: Rules{Egress: api.EgressRestricted, Ports: DefaultPorts}, Mbps: 100})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
}

func TestOriginalDst(t *testing.T) {
	p := needRoot(t)
	l := newLink(t, p, Config{Rules: Rules{Egress: api.EgressOpen, Ports: DefaultPorts}})
	ln, err := net.Listen("tcp", net.JoinHostPort(l.Gateway.String(), strconv.Itoa(int(DefaultPorts.TCP))))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan netip.AddrPort, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		d, err := l.OriginalDst(c.RemoteAddr().(*net.TCPAddr).AddrPort())
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	// Redirected inside the namespace: nothing is sent to 203.0.113.77.
	if err := inside(l, "tcp", "203.0.113.77:8765", "x"); err != nil {
		t.Fatal(err)
	}
	if d := <-got; d.String() != "203.0.113.77:8765" {
		t.Fatalf("original destination %s", d)
	}
}
