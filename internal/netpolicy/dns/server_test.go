package dns_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/internal/netpolicy/dns"
)

// serveUDP starts s on a loopback UDP socket; the cleanup closes it and checks that ServeUDP
// returned nil.
func serveUDP(t *testing.T, s *dns.Server, sb dns.Sandbox) net.Addr {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeUDP(pc, sb) }()
	t.Cleanup(func() { stop(t, "ServeUDP", pc.Close, done) })
	return pc.LocalAddr()
}

// serveTCP starts s on a loopback TCP listener, like serveUDP.
func serveTCP(t *testing.T, s *dns.Server, sb dns.Sandbox) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeTCP(ln, sb) }()
	t.Cleanup(func() { stop(t, "ServeTCP", ln.Close, done) })
	return ln.Addr()
}

func serve(t *testing.T, network string, s *dns.Server, sb dns.Sandbox) net.Addr {
	t.Helper()
	if network == "tcp" {
		return serveTCP(t, s, sb)
	}
	return serveUDP(t, s, sb)
}

func stop(t *testing.T, what string, closeFn func() error, done <-chan error) {
	t.Helper()
	if err := closeFn(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s returned %v, want nil", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("%s did not return after close", what)
	}
}

// exchange sends query on c and reads one response: raw on UDP, length-prefixed on TCP.
func exchange(t *testing.T, c net.Conn, query []byte) dnsmessage.Message {
	t.Helper()
	must(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, tcp := c.(*net.TCPConn)
	if tcp {
		query = append(binary.BigEndian.AppendUint16(nil, uint16(len(query))), query...)
	}
	if _, err := c.Write(query); err != nil {
		t.Fatal(err)
	}
	return readResponse(t, c)
}

func readResponse(t *testing.T, c net.Conn) dnsmessage.Message {
	t.Helper()
	if _, tcp := c.(*net.TCPConn); tcp {
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("read length: %v", err)
		}
		buf := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatalf("read response: %v", err)
		}
		return unpack(t, buf)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return unpack(t, buf[:n])
}

func TestServe(t *testing.T) {
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			s := &dns.Server{Resolver: &fakeResolver{}}
			sb := &fakeSandbox{pol: testPolicy(t)}
			addr := serve(t, network, s, sb)
			c, err := net.Dial(network, addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			tests := []struct {
				qname string
				rcode dnsmessage.RCode
				addrs []string
			}{
				{qname: "a.test", rcode: noError, addrs: []string{"203.0.113.10"}},
				{qname: "x.b.test", rcode: noError, addrs: []string{"203.0.113.11"}},
				{qname: "evil.test", rcode: nxDomain},
				{qname: "meta.b.test", rcode: nxDomain},
				{qname: "aGk=.b.test", rcode: refused},
			}
			for i, tt := range tests {
				m := exchange(t, c, makeQuery(t, tt.qname, dnsmessage.TypeA, queryOpts{id: uint16(i + 1), rd: true}))
				addrs, _ := answerAddrs(t, m)
				if m.ID != uint16(i+1) || m.RCode != tt.rcode || !slices.Equal(addrs, tt.addrs) {
					t.Errorf("%s: ID %d, %v, %v; want %v, %v", tt.qname, m.ID, m.RCode, addrs, tt.rcode, tt.addrs)
				}
			}
			events := sb.Events()
			if len(events) != len(tests) {
				t.Fatalf("%d events, want %d", len(events), len(tests))
			}
			for i, ev := range events {
				if ev.Proto != network || ev.Name != canonical(tests[i].qname) {
					t.Errorf("event %d: %+v, want proto %s, name %s", i, ev, network, tests[i].qname)
				}
			}
		})
	}
}

// TestServeUDPMalformed checks that garbage gets no response and does not stop the server.
func TestServeUDPMalformed(t *testing.T) {
	sb := &fakeSandbox{pol: testPolicy(t)}
	addr := serveUDP(t, &dns.Server{Resolver: &fakeResolver{}}, sb)
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, junk := range [][]byte{{0}, []byte("GET / HTTP/1.1\r\n\r\n"), {0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{0xff}, 2000)} {
		if _, err := c.Write(junk); err != nil {
			t.Fatal(err)
		}
	}
	// UDP keeps order on loopback: a response to garbage would arrive before this one.
	m := exchange(t, c, makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 42}))
	if m.ID != 42 || m.RCode != noError {
		t.Errorf("got %+v, want the answer to query 42", m.Header)
	}
	if ev := sb.Events(); len(ev) != 1 {
		t.Errorf("%d events, want 1 (garbage makes none)", len(ev))
	}
}

// TestServeTCPPipelined sends several queries in one write.
func TestServeTCPPipelined(t *testing.T) {
	addr := serveTCP(t, &dns.Server{Resolver: &fakeResolver{}}, &fakeSandbox{pol: testPolicy(t)})
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var batch []byte
	for id := range uint16(3) {
		q := makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: id})
		batch = append(binary.BigEndian.AppendUint16(batch, uint16(len(q))), q...)
	}
	must(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	for id := range uint16(3) {
		if m := readResponse(t, c); m.ID != id || m.RCode != noError {
			t.Errorf("response %+v, want ID %d", m.Header, id)
		}
	}
}

// TestServeTCPClose checks when the server closes a connection.
func TestServeTCPClose(t *testing.T) {
	tests := []struct {
		name string
		send []byte
	}{
		{name: "malformed", send: []byte{0, 3, 1, 2, 3}},
		{name: "zero length", send: []byte{0, 0}},
		{name: "idle"},
		{name: "partial then idle", send: []byte{0, 40, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveTCP(t, &dns.Server{Resolver: &fakeResolver{}, IdleTimeout: 100 * time.Millisecond}, &fakeSandbox{pol: testPolicy(t)})
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			must(t, c.SetDeadline(time.Now().Add(5*time.Second)))
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(make([]byte, 10)); !errors.Is(err, io.EOF) {
				t.Errorf("read %d bytes, %v; want EOF", n, err)
			}
		})
	}
}

// TestServeTCPShutdown checks that closing the listener closes open connections and waits
// for them (goleak in TestMain checks that nothing is left).
func TestServeTCPShutdown(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dns.Server{Resolver: &fakeResolver{}}
	done := make(chan error, 1)
	go func() { done <- s.ServeTCP(ln, &fakeSandbox{pol: testPolicy(t)}) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exchange(t, c, makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 1}))
	stop(t, "ServeTCP", ln.Close, done)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read after shutdown: %v, want EOF", err)
	}
}

// TestServeUDPShutdownInFlight closes the socket while a lookup hangs upstream: ServeUDP
// cancels it and returns.
func TestServeUDPShutdownInFlight(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sb := &fakeSandbox{pol: testPolicy(t)}
	s := &dns.Server{Resolver: &fakeResolver{}, Timeout: time.Hour}
	done := make(chan error, 1)
	go func() { done <- s.ServeUDP(pc, sb) }()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(makeQuery(t, "slow.b.test", dnsmessage.TypeA, queryOpts{})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the query reach the resolver
	stop(t, "ServeUDP", pc.Close, done)
}

// TestGoResolver checks that Go's own stub resolver understands the server, over UDP and TCP.
func TestGoResolver(t *testing.T) {
	s := &dns.Server{Resolver: &fakeResolver{}}
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			sb := &fakeSandbox{pol: testPolicy(t)}
			addr := serve(t, network, s, sb)
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr.String()) // loopback only, whatever was asked
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := r.LookupNetIP(ctx, "ip4", "x.b.test.")
			if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("203.0.113.11")}) {
				t.Errorf("x.b.test: %v, %v", got, err)
			}
			_, err = r.LookupNetIP(ctx, "ip4", "evil.test.")
			if de, ok := errors.AsType[*net.DNSError](err); !ok || !de.IsNotFound {
				t.Errorf("evil.test: %v, want not found", err)
			}
		})
	}
}

// TestServeTCPConnLimit checks that connections beyond MaxTCPConns are closed at once.
func TestServeTCPConnLimit(t *testing.T) {
	addr := serveTCP(t, &dns.Server{Resolver: &fakeResolver{}}, &fakeSandbox{pol: testPolicy(t)})
	for i := range dns.MaxTCPConns {
		c, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		exchange(t, c, makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: uint16(i)})) // accepted and served
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("connection %d: read %v, want EOF", dns.MaxTCPConns+1, err)
	}
}

// TestServeUDPInFlightLimit checks that queries beyond MaxUDPInFlight are dropped while the
// others wait upstream.
func TestServeUDPInFlightLimit(t *testing.T) {
	res := &fakeResolver{}
	addr := serveUDP(t, &dns.Server{Resolver: res, Timeout: time.Hour}, &fakeSandbox{pol: testPolicy(t)})
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range dns.MaxUDPInFlight {
		if _, err := c.Write(makeQuery(t, "slow.b.test", dnsmessage.TypeA, queryOpts{})); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(res.Calls()) < dns.MaxUDPInFlight; {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups in flight, want %d", len(res.Calls()), dns.MaxUDPInFlight)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Write(makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 99})); err != nil {
		t.Fatal(err)
	}
	must(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	if n, err := c.Read(make([]byte, 512)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read %d bytes, %v; want no response", n, err)
	}
}
