package dns_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/dns"
)

// admitting is a sandbox whose firewall records what it admits, or refuses with err.
type admitting struct {
	fakeSandbox
	mu   sync.Mutex // guards the fields below
	err  error
	pols []*netpolicy.Policy
	got  []netip.Addr
	ttls []time.Duration
}

var _ dns.Admitter = (*admitting)(nil)

func (a *admitting) Admit(pol *netpolicy.Policy, addrs []netip.Addr, ttl time.Duration) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.pols, a.got, a.ttls = append(a.pols, pol), append(a.got, addrs...), append(a.ttls, ttl)
	return nil
}

// TestAnswerAdmits checks that the addresses of an answer, and only they, are admitted before
// it is sent, for its TTL and under the policy it was decided by; and that an answer the
// firewall could not admit is a SERVFAIL, reported as such.
func TestAnswerAdmits(t *testing.T) {
	s := &dns.Server{Resolver: &fakeResolver{}}
	pol := testPolicy(t)
	sb := &admitting{fakeSandbox: fakeSandbox{pol: pol}}
	ask := func(name string, qtype dnsmessage.Type) dnsmessage.Message {
		t.Helper()
		resp, err := s.Answer(context.Background(), makeQuery(t, name, qtype, queryOpts{}), "udp", sb)
		if err != nil {
			t.Fatal(err)
		}
		return unpack(t, resp)
	}
	for _, c := range []struct {
		name  string
		qtype dnsmessage.Type
		admit []string
		ttl   time.Duration
	}{
		{"a.test", dnsmessage.TypeA, []string{"203.0.113.10"}, 30 * time.Second},
		{"mixed.b.test", dnsmessage.TypeA, []string{"203.0.113.13"}, 30 * time.Second}, // 10.0.0.2 dropped
		{"internal.b.test", dnsmessage.TypeA, []string{"10.1.2.3"}, 5 * time.Second},   // trusted
		{"evil.test", dnsmessage.TypeA, nil, 0},
		{"private.b.test", dnsmessage.TypeA, nil, 0},
		{"meta.b.test", dnsmessage.TypeA, nil, 0},
		{"empty.b.test", dnsmessage.TypeA, nil, 0},
		{"a.test", dnsmessage.TypeAAAA, nil, 0},
	} {
		sb.mu.Lock()
		sb.pols, sb.got, sb.ttls = nil, nil, nil
		sb.mu.Unlock()
		m := ask(c.name, c.qtype)
		got, _ := answerAddrs(t, m)
		sb.mu.Lock()
		admitted := sb.got
		if !slices.Equal(got, c.admit) || !slices.Equal(admitted, parseAddrs(c.admit)) {
			t.Errorf("%s %v: answered %v, admitted %v; want both %v", c.name, c.qtype, got, admitted, c.admit)
		}
		if c.admit != nil && (len(sb.ttls) != 1 || sb.ttls[0] != c.ttl || sb.pols[0] != pol) {
			t.Errorf("%s: admitted for %v under %v; want once for %v under the sandbox's policy", c.name, sb.ttls, sb.pols, c.ttl)
		}
		sb.mu.Unlock()
		sb.Events()
	}

	sb.mu.Lock()
	sb.err = errors.New("set is full")
	sb.mu.Unlock()
	if m := ask("a.test", dnsmessage.TypeA); m.RCode != servFail || len(m.Answers) != 0 {
		t.Errorf("admission failed: %v with %d answers, want SERVFAIL without any", m.RCode, len(m.Answers))
	}
	ev := sb.Events()
	if len(ev) != 1 || ev[0].Allow || ev[0].Rule != dns.RuleFirewall || len(ev[0].Answers) != 0 {
		t.Errorf("admission failed: events %+v, want one denial by rule %s", ev, dns.RuleFirewall)
	}
}
