package dns_test

import (
	"cmp"
	"context"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/dns"
)

const (
	noError  = dnsmessage.RCodeSuccess
	nxDomain = dnsmessage.RCodeNameError
	servFail = dnsmessage.RCodeServerFailure
	refused  = dnsmessage.RCodeRefused
	typeNULL = dnsmessage.Type(10)
	classCH  = dnsmessage.Class(3)
)

func TestAnswer(t *testing.T) {
	restricted := testPolicy(t)
	open := compile(t, api.EgressOpen)
	none := compile(t, api.EgressNone)
	long := strings.Repeat(strings.Repeat("a", 39)+".", 5) + "b.test" // 206 characters

	tests := []struct {
		name   string
		qname  string
		qtype  dnsmessage.Type // 0: A
		class  dnsmessage.Class
		pol    *netpolicy.Policy // nil: restricted
		noPol  bool              // the sandbox has no policy at all
		rcode  dnsmessage.RCode
		addrs  []string
		ttl    uint32
		lookup bool // upstream must be asked (else it must not be)
		allow  bool
		rule   string
		reason string // a part of the event's reason
	}{
		// Allowed names.
		{name: "allowed", qname: "a.test", rcode: noError, addrs: []string{"203.0.113.10"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist, reason: `"a.test"`},
		{name: "case and root", qname: "A.Test.", rcode: noError, addrs: []string{"203.0.113.10"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "wildcard one level", qname: "x.b.test", rcode: noError, addrs: []string{"203.0.113.11"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist, reason: `"*.b.test"`},
		{name: "wildcard two levels", qname: "x.y.b.test", rcode: noError, addrs: []string{"203.0.113.12"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "ipv4-mapped upstream", qname: "mapped.b.test", rcode: noError, addrs: []string{"203.0.113.14"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "upstream empty", qname: "empty.b.test", rcode: noError, lookup: true, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "open any name", qname: "open.example", pol: open, rcode: noError, addrs: []string{"198.51.100.1"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleOpen},

		// The operator's trusted hosts.
		{name: "trusted private", qname: "internal.b.test", rcode: noError, addrs: []string{"10.1.2.3"}, ttl: 5, allow: true, rule: netpolicy.RuleTrusted},
		{name: "trusted metadata", qname: "meta-trusted.b.test", rcode: nxDomain, rule: netpolicy.RuleMetadata, reason: "169.254.169.254"},
		{name: "trusted IPv6 only", qname: "v6.b.test", rcode: noError, allow: true, rule: netpolicy.RuleTrusted},
		{name: "trusted not allowed", qname: "other.test", rcode: nxDomain, rule: netpolicy.RuleNotListed},

		// Denied names.
		{name: "denied", qname: "evil.test", rcode: nxDomain, rule: netpolicy.RuleNotListed, reason: "evil.test"},
		{name: "exact not wildcard", qname: "x.a.test", rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "wildcard not apex", qname: "b.test", rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "suffix not label", qname: "evil-a.test", rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "allowed as prefix", qname: "a.test.evil.test", rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "egress none", qname: "a.test", pol: none, rcode: nxDomain, rule: netpolicy.RuleNone},
		{name: "no policy", qname: "a.test", noPol: true, rcode: nxDomain, rule: netpolicy.RuleNone},

		// Tunnelling shapes are refused before the policy is asked, even below allowed names.
		{name: "long label", qname: strings.Repeat("x", 41) + ".b.test", rcode: refused, rule: netpolicy.RuleBadName, reason: "label of 41"},
		{name: "ten labels", qname: "1.2.3.4.5.6.7.8.b.test", rcode: refused, rule: netpolicy.RuleBadName, reason: "10 labels"},
		{name: "200 characters", qname: long, rcode: refused, rule: netpolicy.RuleBadName, reason: "206 characters"},
		{name: "base64 plus", qname: "aGk+dA.b.test", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "base64 slash", qname: "aGk/dA.b.test", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "base64 padding", qname: "aGk=.b.test", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "NUL byte", qname: "a\x00b.b.test", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "space", qname: "a b.b.test", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "root", qname: ".", rcode: refused, rule: netpolicy.RuleBadName},
		{name: "TXT tunnel", qname: "aGk=.b.test", qtype: dnsmessage.TypeTXT, rcode: refused, rule: netpolicy.RuleBadName},
		{name: "open tunnel", qname: "aGk=.open.example", pol: open, rcode: refused, rule: netpolicy.RuleBadName},

		// DNS rebinding: an allowed name resolving to an address the sandbox may not reach.
		{name: "rebind private", qname: "private.b.test", rcode: nxDomain, lookup: true, rule: netpolicy.RuleLocal, reason: "10.0.0.1"},
		{name: "rebind loopback", qname: "loop.b.test", rcode: nxDomain, lookup: true, rule: netpolicy.RuleLocal, reason: "127.0.0.1"},
		{name: "rebind metadata", qname: "meta.b.test", rcode: nxDomain, lookup: true, rule: netpolicy.RuleMetadata, reason: "169.254.169.254"},
		{name: "rebind alibaba metadata", qname: "alibaba.b.test", rcode: nxDomain, lookup: true, rule: netpolicy.RuleMetadata, reason: "100.100.100.200"},
		{name: "rebind open", qname: "private.b.test", pol: open, rcode: nxDomain, lookup: true, rule: netpolicy.RuleLocal},
		{name: "rebind partly", qname: "mixed.b.test", rcode: noError, addrs: []string{"203.0.113.13"}, ttl: 30, lookup: true, allow: true, rule: netpolicy.RuleAllowlist, reason: "1 address(es) dropped"},

		// Query types other than A.
		{name: "TXT allowed", qname: "a.test", qtype: dnsmessage.TypeTXT, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist, reason: "TXT gets no records"},
		{name: "TXT denied", qname: "evil.test", qtype: dnsmessage.TypeTXT, rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "MX allowed", qname: "a.test", qtype: dnsmessage.TypeMX, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "NULL allowed", qname: "x.b.test", qtype: typeNULL, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist, reason: "NULL"},
		{name: "ANY allowed", qname: "a.test", qtype: dnsmessage.TypeALL, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist, reason: "ANY"},
		{name: "SRV allowed", qname: "_http._tcp.x.b.test", qtype: dnsmessage.TypeSRV, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "CNAME allowed", qname: "a.test", qtype: dnsmessage.TypeCNAME, rcode: noError, allow: true, rule: netpolicy.RuleAllowlist},
		{name: "AAAA allowed", qname: "a.test", qtype: dnsmessage.TypeAAAA, rcode: noError, allow: true, rule: netpolicy.RuleIPv6, reason: "IPv6 is not routed"},
		{name: "AAAA trusted", qname: "internal.b.test", qtype: dnsmessage.TypeAAAA, rcode: noError, allow: true, rule: netpolicy.RuleIPv6},
		{name: "AAAA denied", qname: "evil.test", qtype: dnsmessage.TypeAAAA, rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{name: "PTR reverse", qname: "4.3.2.1.in-addr.arpa", qtype: dnsmessage.TypePTR, rcode: nxDomain, rule: dns.RuleReverse},
		{name: "A reverse open", qname: "4.3.2.1.in-addr.arpa", pol: open, rcode: nxDomain, rule: dns.RuleReverse},
		{name: "class CH", qname: "version.bind", qtype: dnsmessage.TypeTXT, class: classCH, pol: open, rcode: refused, rule: dns.RuleQuery, reason: "class 3"},

		// Upstream trouble.
		{name: "upstream no such name", qname: "gone.b.test", rcode: nxDomain, lookup: true, rule: dns.RuleUpstream, reason: "no such name"},
		{name: "upstream error", qname: "fail.b.test", rcode: servFail, lookup: true, rule: dns.RuleUpstream, reason: "connection refused"},
		{name: "upstream timeout error", qname: "timeout.b.test", rcode: servFail, lookup: true, rule: dns.RuleUpstream, reason: "timeout"},
		{name: "upstream too slow", qname: "slow.b.test", rcode: servFail, lookup: true, rule: dns.RuleUpstream, reason: "deadline"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &fakeResolver{}
			s := &dns.Server{Resolver: res, Timeout: 50 * time.Millisecond}
			sb := &fakeSandbox{pol: tt.pol}
			if sb.pol == nil && !tt.noPol {
				sb.pol = restricted
			}
			qtype := cmp.Or(tt.qtype, dnsmessage.TypeA)
			opts := queryOpts{id: uint16(1000 + i), class: tt.class, rd: i%2 == 0}
			q := makeQuery(t, tt.qname, qtype, opts)

			resp, err := s.Answer(context.Background(), q, "udp", sb)
			if err != nil {
				t.Fatalf("Answer: %v", err)
			}
			m := unpack(t, resp)
			checkHeader(t, q, m, tt.rcode)
			addrs, ttls := answerAddrs(t, m)
			if !slices.Equal(addrs, tt.addrs) {
				t.Errorf("answers %v, want %v", addrs, tt.addrs)
			}
			for _, ttl := range ttls {
				if ttl != tt.ttl {
					t.Errorf("TTL %d, want %d", ttl, tt.ttl)
				}
			}
			calls := res.Calls()
			switch {
			case tt.lookup && !slices.Equal(calls, []string{"ip4 " + canonical(tt.qname) + "."}):
				t.Errorf("upstream asked %q, want one ip4 lookup of the rooted name", calls)
			case !tt.lookup && len(calls) > 0:
				t.Errorf("upstream asked %q, want no lookup", calls)
			}

			checkEvent(t, sb.Events(), netpolicy.Event{
				Kind: netpolicy.KindDNS, Proto: "udp", Name: canonical(tt.qname), QType: typeString(qtype),
				Allow: tt.allow, Rule: tt.rule, Reason: tt.reason, Answers: parseAddrs(tt.addrs),
			})
		})
	}
}

// TestAnswerProtocol covers messages that are not plain queries.
func TestAnswerProtocol(t *testing.T) {
	valid := makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 7})
	twoQuestions := func() []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
		must(t, b.StartQuestions())
		for _, n := range []string{"a.test.", "x.b.test."} {
			must(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}))
		}
		q, err := b.Finish()
		must(t, err)
		return q
	}()
	noQuestion, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: 7}}).Pack()
	must(t, err)
	response := append([]byte(nil), valid...)
	response[2] |= 0x80 // QR
	withHeader := func(b ...byte) []byte { return append([]byte{0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, b...) }

	tests := []struct {
		name  string
		query []byte
		err   bool // malformed: no response, no event
		rcode dnsmessage.RCode
		echo  bool // the response echoes the question
	}{
		{name: "empty", query: nil, err: true},
		{name: "short header", query: valid[:5], err: true},
		{name: "truncated question", query: valid[:len(valid)-2], err: true},
		{name: "response", query: response, err: true},
		{name: "label with a dot", query: withHeader(3, 'a', '.', 'b', 0, 0, 1, 0, 1), err: true},
		{name: "pointer loop", query: withHeader(0xc0, 12, 0, 1, 0, 1), err: true},
		{name: "reserved label type", query: withHeader(0x40, 0, 0, 1, 0, 1), err: true},
		{name: "answer count lies", query: func() []byte { q := append([]byte(nil), valid...); q[7] = 1; return q }(), err: true},
		{name: "opcode status", query: makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 7, opcode: 2}), rcode: dnsmessage.RCodeNotImplemented, echo: true},
		{name: "opcode update", query: makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: 7, opcode: 5}), rcode: dnsmessage.RCodeNotImplemented, echo: true},
		{name: "no question", query: noQuestion, rcode: dnsmessage.RCodeFormatError},
		{name: "two questions", query: twoQuestions, rcode: dnsmessage.RCodeFormatError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &fakeResolver{}
			s := &dns.Server{Resolver: res}
			sb := &fakeSandbox{pol: testPolicy(t)}
			resp, err := s.Answer(context.Background(), tt.query, "tcp", sb)
			events := sb.Events()
			if tt.err {
				if err == nil || resp != nil || len(events) != 0 {
					t.Fatalf("got %d bytes, err %v, %d events; want an error only", len(resp), err, len(events))
				}
				return
			}
			if err != nil {
				t.Fatalf("Answer: %v", err)
			}
			m := unpack(t, resp)
			if m.ID != 7 || !m.Response || m.RCode != tt.rcode || len(m.Answers) != 0 {
				t.Errorf("response %+v, want ID 7, %v, no answer", m.Header, tt.rcode)
			}
			if echoed := len(m.Questions) == 1; echoed != tt.echo {
				t.Errorf("questions %v, want echoed %v", m.Questions, tt.echo)
			}
			if len(res.Calls()) != 0 {
				t.Errorf("upstream asked %q", res.Calls())
			}
			checkEvent(t, events, netpolicy.Event{Kind: netpolicy.KindDNS, Proto: "tcp", Rule: dns.RuleQuery})
		})
	}
}

// TestAnswerSize checks truncation of UDP responses and EDNS.
func TestAnswerSize(t *testing.T) {
	tests := []struct {
		name    string
		proto   string
		edns    int
		tc      bool
		answers int
	}{
		{name: "udp without EDNS", proto: "udp", tc: true},
		{name: "udp EDNS too small", proto: "udp", edns: 256, tc: true},
		{name: "udp EDNS 1232", proto: "udp", edns: 1232, answers: 32},
		{name: "tcp", proto: "tcp", answers: 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &dns.Server{Resolver: &fakeResolver{}}
			sb := &fakeSandbox{pol: testPolicy(t)}
			q := makeQuery(t, "many.b.test", dnsmessage.TypeA, queryOpts{id: 9, edns: tt.edns})
			resp, err := s.Answer(context.Background(), q, tt.proto, sb)
			if err != nil {
				t.Fatal(err)
			}
			m := unpack(t, resp)
			if m.Truncated != tt.tc || len(m.Answers) != tt.answers || m.RCode != noError {
				t.Errorf("TC %v, %d answers, %v; want TC %v, %d answers", m.Truncated, len(m.Answers), m.RCode, tt.tc, tt.answers)
			}
			if tt.proto == "udp" && len(resp) > max(tt.edns, 512) {
				t.Errorf("%d bytes over udp", len(resp))
			}
			hasOPT := len(m.Additionals) == 1 && m.Additionals[0].Header.Type == dnsmessage.TypeOPT
			if hasOPT != (tt.edns > 0) {
				t.Errorf("additionals %v; want an OPT record exactly when the query has one", m.Additionals)
			}
			if ev := sb.Events(); len(ev) != 1 || len(ev[0].Answers) != 32 {
				t.Errorf("events %+v, want one with 32 answers", ev)
			}
		})
	}
}

// TestAnswerLivePolicy checks that each query is decided under the policy of its time.
func TestAnswerLivePolicy(t *testing.T) {
	s := &dns.Server{Resolver: &fakeResolver{}}
	sb := &fakeSandbox{pol: testPolicy(t)}
	steps := []struct {
		pol   *netpolicy.Policy
		rcode dnsmessage.RCode
		rule  string
	}{
		{pol: testPolicy(t), rcode: noError, rule: netpolicy.RuleAllowlist},
		{pol: compile(t, api.EgressRestricted, "c.test"), rcode: nxDomain, rule: netpolicy.RuleNotListed},
		{pol: compile(t, api.EgressNone), rcode: nxDomain, rule: netpolicy.RuleNone},
		{pol: compile(t, api.EgressRestricted, "a.test:8443"), rcode: noError, rule: netpolicy.RuleAllowlist},
	}
	for i, st := range steps {
		sb.SetPolicy(st.pol)
		resp, err := s.Answer(context.Background(), makeQuery(t, "a.test", dnsmessage.TypeA, queryOpts{id: uint16(i)}), "udp", sb)
		if err != nil {
			t.Fatal(err)
		}
		m := unpack(t, resp)
		ev := sb.Events()
		if m.RCode != st.rcode || len(ev) != 1 || ev[0].Rule != st.rule {
			t.Errorf("step %d: %v, events %+v; want %v by rule %s", i, m.RCode, ev, st.rcode, st.rule)
		}
	}
}

// checkHeader checks the parts of a response that echo its query.
func checkHeader(t *testing.T, query []byte, m dnsmessage.Message, rcode dnsmessage.RCode) {
	t.Helper()
	var q dnsmessage.Message
	must(t, q.Unpack(query))
	if m.ID != q.ID || !m.Response || !m.RecursionAvailable || m.RecursionDesired != q.RecursionDesired || m.Authoritative || m.Truncated {
		t.Errorf("header %+v for query %+v", m.Header, q.Header)
	}
	if m.RCode != rcode {
		t.Errorf("rcode %v, want %v", m.RCode, rcode)
	}
	if !slices.Equal(m.Questions, q.Questions) {
		t.Errorf("question %v, want %v", m.Questions, q.Questions)
	}
}

// checkEvent checks that events is exactly one event like want, whose Reason must contain
// want.Reason.
func checkEvent(t *testing.T, events []netpolicy.Event, want netpolicy.Event) {
	t.Helper()
	if len(events) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(events), events)
	}
	got := events[0]
	if got.Time.IsZero() || got.Reason == "" || !strings.Contains(got.Reason, want.Reason) {
		t.Errorf("event time %v, reason %q; want a time and a reason containing %q", got.Time, got.Reason, want.Reason)
	}
	got.Time, got.Reason, want.Reason = time.Time{}, "", ""
	if !slices.Equal(got.Answers, want.Answers) {
		t.Errorf("event answers %v, want %v", got.Answers, want.Answers)
	}
	got.Answers, want.Answers = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event\n got %+v\nwant %+v", got, want)
	}
}

func canonical(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

func parseAddrs(s []string) []netip.Addr {
	var addrs []netip.Addr
	for _, a := range s {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	return addrs
}

func typeString(t dnsmessage.Type) string {
	switch t {
	case typeNULL:
		return "NULL"
	case dnsmessage.TypeALL:
		return "ANY"
	}
	return strings.TrimPrefix(t.String(), "Type")
}
