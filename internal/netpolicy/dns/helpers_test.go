package dns_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream is what the fake resolver answers for one name.
type upstream struct {
	addrs []string
	err   error
	block bool // wait for the lookup's context to end
}

// world is the fake upstream DNS of the tests, keyed by rooted name. Names missing from it do
// not exist. Every address is in a documentation range or is one that rebinding would use.
var world = map[string]upstream{
	"a.test.":               {addrs: []string{"203.0.113.10"}},
	"x.a.test.":             {addrs: []string{"203.0.113.20"}},
	"evil-a.test.":          {addrs: []string{"203.0.113.21"}},
	"a.test.evil.test.":     {addrs: []string{"203.0.113.22"}},
	"evil.test.":            {addrs: []string{"203.0.113.23"}},
	"b.test.":               {addrs: []string{"203.0.113.24"}},
	"x.b.test.":             {addrs: []string{"203.0.113.11"}},
	"x.y.b.test.":           {addrs: []string{"203.0.113.12"}},
	"private.b.test.":       {addrs: []string{"10.0.0.1"}},
	"loop.b.test.":          {addrs: []string{"127.0.0.1"}},
	"meta.b.test.":          {addrs: []string{"169.254.169.254"}},
	"alibaba.b.test.":       {addrs: []string{"100.100.100.200"}},
	"mixed.b.test.":         {addrs: []string{"203.0.113.13", "10.0.0.2"}},
	"mapped.b.test.":        {addrs: []string{"::ffff:203.0.113.14"}},
	"empty.b.test.":         {},
	"fail.b.test.":          {err: errors.New("connection refused")},
	"timeout.b.test.":       {err: &net.DNSError{Err: "i/o timeout", IsTimeout: true}},
	"slow.b.test.":          {block: true},
	"internal.b.test.":      {addrs: []string{"203.0.113.99"}}, // trusted: never asked
	"open.example.":         {addrs: []string{"198.51.100.1"}},
	"version.bind.":         {addrs: []string{"198.51.100.2"}},
	"many.b.test.":          {addrs: manyAddrs(40)},
	"4.3.2.1.in-addr.arpa.": {addrs: []string{"198.51.100.3"}},
}

func manyAddrs(n int) []string {
	var s []string
	for i := range n {
		s = append(s, netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)}).String())
	}
	return s
}

// fakeResolver answers from world and records what it was asked.
type fakeResolver struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls = append(r.calls, network+" "+host)
	r.mu.Unlock()
	u, ok := world[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if u.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var addrs []netip.Addr
	for _, a := range u.addrs {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	return addrs, u.err
}

func (r *fakeResolver) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// fakeSandbox holds a policy that tests may replace and collects events.
type fakeSandbox struct {
	mu     sync.Mutex // guards pol and events
	pol    *netpolicy.Policy
	events []netpolicy.Event
}

func (sb *fakeSandbox) Policy() *netpolicy.Policy {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.pol
}

func (sb *fakeSandbox) SetPolicy(p *netpolicy.Policy) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.pol = p
}

func (sb *fakeSandbox) Event(e netpolicy.Event) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.events = append(sb.events, e)
}

// Events returns the events so far and forgets them.
func (sb *fakeSandbox) Events() []netpolicy.Event {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	e := sb.events
	sb.events = nil
	return e
}

// trusted are the operator's trusted hosts of the test policies.
var trusted = map[string][]netip.Addr{
	"internal.b.test":     {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::3")},
	"meta-trusted.b.test": {netip.MustParseAddr("169.254.169.254")},
	"other.test":          {netip.MustParseAddr("10.9.9.9")},
	"v6.b.test":           {netip.MustParseAddr("fd00::6")},
}

func compile(t testing.TB, egress string, domains ...string) *netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.Compile(api.Network{EgressPolicy: egress, AllowedDomains: domains}, netpolicy.Options{Trusted: trusted})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

// testPolicy allows a.test and any name below b.test.
func testPolicy(t testing.TB) *netpolicy.Policy {
	return compile(t, api.EgressRestricted, "a.test", "*.b.test")
}

// queryOpts are the parts of a test query that vary.
type queryOpts struct {
	id     uint16
	class  dnsmessage.Class // 0: IN
	rd     bool
	opcode dnsmessage.OpCode
	edns   int // EDNS payload size; 0: no OPT record
}

// makeQuery builds a query for name (made rooted if it is not).
func makeQuery(t testing.TB, name string, qtype dnsmessage.Type, o queryOpts) []byte {
	t.Helper()
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	n, err := dnsmessage.NewName(name)
	if err != nil {
		t.Fatalf("name %q: %v", name, err)
	}
	if o.class == 0 {
		o.class = dnsmessage.ClassINET
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: o.id, RecursionDesired: o.rd, OpCode: o.opcode})
	must(t, b.StartQuestions())
	must(t, b.Question(dnsmessage.Question{Name: n, Type: qtype, Class: o.class}))
	if o.edns > 0 {
		must(t, b.StartAdditionals())
		var h dnsmessage.ResourceHeader
		must(t, h.SetEDNS0(o.edns, dnsmessage.RCodeSuccess, false))
		must(t, b.OPTResource(h, dnsmessage.OPTResource{}))
	}
	q, err := b.Finish()
	must(t, err)
	return q
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func unpack(t testing.TB, resp []byte) dnsmessage.Message {
	t.Helper()
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		t.Fatalf("unpack response: %v", err)
	}
	return m
}

// answerAddrs returns the A records of m, as strings, and their TTLs.
func answerAddrs(t testing.TB, m dnsmessage.Message) (addrs []string, ttls []uint32) {
	t.Helper()
	for _, rr := range m.Answers {
		a, ok := rr.Body.(*dnsmessage.AResource)
		if !ok {
			t.Fatalf("answer %v is not an A record", rr.Header)
		}
		if rr.Header.Name != m.Questions[0].Name {
			t.Errorf("answer name %q, question %q", rr.Header.Name, m.Questions[0].Name)
		}
		addrs = append(addrs, netip.AddrFrom4(a.A).String())
		ttls = append(ttls, rr.Header.TTL)
	}
	return addrs, ttls
}
