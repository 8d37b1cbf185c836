package dns_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/internal/netpolicy/dns"
)

// FuzzAnswer checks that no message makes Answer panic, that every answered query makes
// exactly one event and a well-formed response that fits UDP, and that garbage makes none.
func FuzzAnswer(f *testing.F) {
	f.Add(makeQuery(f, "a.test", dnsmessage.TypeA, queryOpts{id: 1, rd: true}), false)
	f.Add(makeQuery(f, "x.b.test", dnsmessage.TypeTXT, queryOpts{id: 2}), true)
	f.Add(makeQuery(f, "many.b.test", dnsmessage.TypeA, queryOpts{id: 3, edns: 1232}), false)
	f.Add(makeQuery(f, "aGk=.b.test", dnsmessage.TypeA, queryOpts{id: 4}), false)
	f.Add(makeQuery(f, "4.3.2.1.in-addr.arpa", dnsmessage.TypePTR, queryOpts{id: 5}), false)
	f.Add(makeQuery(f, "meta.b.test", dnsmessage.TypeA, queryOpts{id: 6, opcode: 4}), false)
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, false)
	f.Add([]byte{}, true)
	s := &dns.Server{Resolver: &fakeResolver{}, Timeout: time.Millisecond}
	f.Fuzz(func(t *testing.T, query []byte, tcp bool) {
		sb := &fakeSandbox{pol: testPolicy(t)}
		proto := "udp"
		if tcp {
			proto = "tcp"
		}
		resp, err := s.Answer(context.Background(), query, proto, sb)
		events := sb.Events()
		if err != nil {
			if resp != nil || len(events) != 0 {
				t.Fatalf("error %v with %d bytes and %d events", err, len(resp), len(events))
			}
			return
		}
		if len(events) != 1 {
			t.Fatalf("%d events, want 1", len(events))
		}
		var m dnsmessage.Message
		var p dnsmessage.Parser
		qh, _ := p.Start(query)
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("response does not parse: %v", err)
		}
		if m.ID != qh.ID || !m.Response || len(m.Questions) > 1 {
			t.Fatalf("response %+v to query %+v", m.Header, qh)
		}
		if !tcp && len(resp) > 4096 {
			t.Fatalf("%d bytes over udp", len(resp))
		}
	})
}
