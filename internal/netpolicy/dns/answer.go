package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Rules of the DNS server's own decisions, next to netpolicy's rules in events.
const (
	RuleUpstream = "upstream"       // the upstream resolver had no such name, or failed
	RuleQuery    = "query"          // not a query airlock answers: opcode, question count, class
	RuleReverse  = "reverse_lookup" // names under in-addr.arpa and ip6.arpa are never answered
	RuleFirewall = "firewall"       // the answer's addresses could not be admitted (Admitter)
)

const (
	ttlAnswer  = 30   // seconds, for addresses from upstream
	ttlTrusted = 5    // seconds, for the operator's trusted addresses (they may change live)
	minUDPSize = 512  // RFC 1035 limit of a UDP response without EDNS
	maxUDPSize = 4096 // cap on the size a client's EDNS record may ask for
	ednsSize   = 1232 // the size airlock advertises in its own EDNS record
	maxAnswers = 32   // A records in one answer
)

// result is the server's answer to one question, before it is packed.
type result struct {
	rcode dnsmessage.RCode
	addrs []netip.Addr // A records
	ttl   uint32
}

// request is what Answer keeps of a parsed query.
type request struct {
	hdr     dnsmessage.Header
	q       *dnsmessage.Question // nil unless the query had exactly one question
	edns    bool
	udpSize int // the client's EDNS payload size, 0 without EDNS
}

// Answer builds the response to one query message. proto ("udp" or "tcp") goes into the event
// and, for "udp", limits the response's size (larger ones are truncated with TC set). It
// reports exactly one event through sb for every query it answers; a message that is not a
// well-formed query is an error, without an event or a response.
func (s *Server) Answer(ctx context.Context, query []byte, proto string, sb Sandbox) ([]byte, error) {
	req, err := parse(query)
	if err != nil {
		return nil, err
	}
	ev := netpolicy.Event{Time: time.Now(), Kind: netpolicy.KindDNS, Proto: proto}
	var res result
	switch {
	case req.hdr.OpCode != 0:
		res.rcode = dnsmessage.RCodeNotImplemented
		ev.Rule, ev.Reason = RuleQuery, fmt.Sprintf("opcode %d is not supported; only QUERY is", req.hdr.OpCode)
	case req.q == nil:
		res.rcode = dnsmessage.RCodeFormatError
		ev.Rule, ev.Reason = RuleQuery, "a query must have exactly one question"
	default:
		ev.Name, ev.QType = canonical(req.q.Name.String()), typeName(req.q.Type)
		pol := sb.Policy()
		res = s.decide(ctx, *req.q, pol, &ev)
		res = s.admit(sb, pol, res, &ev)
	}
	sb.Event(ev)
	resp, err := req.pack(res, proto)
	if err != nil {
		return nil, fmt.Errorf("dns: pack response: %w", err)
	}
	return resp, nil
}

// admit has the sandbox's firewall admit the addresses of res, when it has an Admitter. If it
// cannot, the answer becomes SERVFAIL: its addresses would be refused at connect.
func (s *Server) admit(sb Sandbox, pol *netpolicy.Policy, res result, ev *netpolicy.Event) result {
	ad, ok := sb.(Admitter)
	if !ok || len(res.addrs) == 0 {
		return res
	}
	if err := ad.Admit(pol, res.addrs, time.Duration(res.ttl)*time.Second); err != nil {
		s.log().Warn("answer's addresses not admitted", "name", ev.Name, "err", err)
		ev.Allow, ev.Rule, ev.Answers = false, RuleFirewall, nil
		ev.Reason = fmt.Sprintf("the sandbox's firewall did not admit the answer: %v", err)
		return result{rcode: dnsmessage.RCodeServerFailure}
	}
	return res
}

// parse checks that query is a query and reads its header, its question (when it has exactly
// one) and its EDNS record.
func parse(query []byte) (request, error) {
	var (
		p   dnsmessage.Parser
		req request
		err error
	)
	if req.hdr, err = p.Start(query); err != nil {
		return req, fmt.Errorf("dns: malformed header: %w", err)
	}
	if req.hdr.Response {
		return req, errors.New("dns: message is a response, not a query")
	}
	// Questions are read one at a time: a count of 65535 must not allocate them all.
	q, err := p.Question()
	if errors.Is(err, dnsmessage.ErrSectionDone) {
		return req, nil // no question: FORMERR
	}
	if err != nil {
		return req, fmt.Errorf("dns: malformed question: %w", err)
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return req, nil // more than one, or garbage after the first: FORMERR
	}
	req.q = &q
	if err := p.SkipAllAnswers(); err != nil {
		return req, fmt.Errorf("dns: malformed answer section: %w", err)
	}
	if err := p.SkipAllAuthorities(); err != nil {
		return req, fmt.Errorf("dns: malformed authority section: %w", err)
	}
	for {
		h, err := p.AdditionalHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			return req, nil
		}
		if err != nil {
			return req, fmt.Errorf("dns: malformed additional section: %w", err)
		}
		if h.Type == dnsmessage.TypeOPT && !req.edns {
			req.edns, req.udpSize = true, int(h.Class)
		}
		if err := p.SkipAdditional(); err != nil {
			return req, fmt.Errorf("dns: malformed additional section: %w", err)
		}
	}
}

// decide answers question q under policy pol, filling in ev.
func (s *Server) decide(ctx context.Context, q dnsmessage.Question, pol *netpolicy.Policy, ev *netpolicy.Event) result {
	name := ev.Name
	// The tunnelling guard comes first: such names are refused whatever the policy says.
	if err := netpolicy.CheckQueryName(name); err != nil {
		ev.Rule, ev.Reason = netpolicy.RuleBadName, err.Error()
		return result{rcode: dnsmessage.RCodeRefused}
	}
	if q.Class != dnsmessage.ClassINET {
		ev.Rule, ev.Reason = RuleQuery, fmt.Sprintf("class %d is not served; only IN is", q.Class)
		return result{rcode: dnsmessage.RCodeRefused}
	}
	if isReverse(name) {
		ev.Rule, ev.Reason = RuleReverse, "reverse lookups are not answered"
		return result{rcode: dnsmessage.RCodeNameError}
	}
	if pol == nil {
		ev.Rule, ev.Reason = netpolicy.RuleNone, "the sandbox has no network policy"
		return result{rcode: dnsmessage.RCodeNameError}
	}
	d := pol.Name(name, 0)
	if !d.Allow {
		ev.Rule, ev.Reason = d.Rule, d.Reason
		return result{rcode: dnsmessage.RCodeNameError}
	}
	switch q.Type {
	case dnsmessage.TypeA:
		return s.lookupA(ctx, pol, name, d, ev)
	case dnsmessage.TypeAAAA:
		ev.Allow, ev.Rule, ev.Reason = true, netpolicy.RuleIPv6, "IPv6 is not routed for sandboxes: AAAA queries get no records"
	default:
		ev.Allow, ev.Rule = true, d.Rule
		ev.Reason = fmt.Sprintf("%s; only A queries are answered, %s gets no records", d.Reason, ev.QType)
	}
	return result{rcode: dnsmessage.RCodeSuccess}
}

// lookupA answers an A query for an allowed name: from the operator's trusted addresses, or
// from upstream, keeping only the addresses the policy lets the sandbox connect to.
func (s *Server) lookupA(ctx context.Context, pol *netpolicy.Policy, name string, nd netpolicy.Decision, ev *netpolicy.Event) result {
	if addrs, ok := pol.Trusted(name); ok && len(addrs) > 0 {
		kept, refused := filter(pol, name, addrs)
		return conclude(kept, refused, ttlTrusted, netpolicy.Decision{
			Allow: true, Rule: netpolicy.RuleTrusted,
			Reason: fmt.Sprintf("%s is an operator's trusted host; answered with its configured addresses", name),
		}, ev)
	}
	lctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	// The name is rooted so that the upstream resolver applies no search domain to it.
	addrs, err := s.resolver().LookupNetIP(lctx, "ip4", name+".")
	if err != nil {
		ev.Rule = RuleUpstream
		if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsNotFound {
			ev.Reason = "no such name"
			return result{rcode: dnsmessage.RCodeNameError}
		}
		s.log().Warn("upstream lookup failed", "name", name, "err", err)
		ev.Reason = fmt.Sprintf("upstream lookup failed: %v", err)
		return result{rcode: dnsmessage.RCodeServerFailure}
	}
	kept, refused := filter(pol, name, addrs)
	return conclude(kept, refused, ttlAnswer, nd, ev)
}

// filter keeps the IPv4 addresses of addrs that pol allows name to reach, at most maxAnswers,
// and returns the decisions that refused the others.
func filter(pol *netpolicy.Policy, name string, addrs []netip.Addr) (kept []netip.Addr, refused []netpolicy.Decision) {
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() {
			continue // sandboxes have no IPv6 route; A answers carry IPv4 only
		}
		d := pol.Addr(name, a)
		switch {
		case !d.Allow:
			refused = append(refused, d)
		case len(kept) < maxAnswers:
			kept = append(kept, a)
		}
	}
	return kept, refused
}

// conclude turns filtered addresses into a result: the kept ones, NXDOMAIN when every address
// was refused (a name rebound to a private or metadata address), NODATA when there were none.
func conclude(kept []netip.Addr, refused []netpolicy.Decision, ttl uint32, d netpolicy.Decision, ev *netpolicy.Event) result {
	if len(kept) == 0 && len(refused) > 0 {
		ev.Rule, ev.Reason = refused[0].Rule, refused[0].Reason
		return result{rcode: dnsmessage.RCodeNameError}
	}
	ev.Allow, ev.Rule, ev.Reason, ev.Answers = true, d.Rule, d.Reason, kept
	if len(refused) > 0 {
		ev.Reason += fmt.Sprintf("; %d address(es) dropped: %s", len(refused), refused[0].Reason)
	}
	return result{rcode: dnsmessage.RCodeSuccess, addrs: kept, ttl: ttl}
}

// pack builds the response to req. UDP responses larger than the client can take are sent
// again without answers and with TC set, so that the client retries over TCP.
func (req request) pack(res result, proto string) ([]byte, error) {
	msg, err := req.build(res, false)
	if err != nil || proto != "udp" || len(msg) <= req.limit() {
		return msg, err
	}
	return req.build(result{rcode: res.rcode}, true)
}

// limit is the largest UDP response the client accepts.
func (req request) limit() int {
	return min(max(req.udpSize, minUDPSize), maxUDPSize)
}

func (req request) build(res result, truncated bool) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, minUDPSize), dnsmessage.Header{
		ID:                 req.hdr.ID,
		Response:           true,
		OpCode:             req.hdr.OpCode,
		Truncated:          truncated,
		RecursionDesired:   req.hdr.RecursionDesired,
		RecursionAvailable: true,
		CheckingDisabled:   req.hdr.CheckingDisabled,
		RCode:              res.rcode,
	})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if req.q != nil {
		if err := b.Question(*req.q); err != nil {
			return nil, err
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range res.addrs {
		h := dnsmessage.ResourceHeader{Name: req.q.Name, Class: dnsmessage.ClassINET, TTL: res.ttl}
		if err := b.AResource(h, dnsmessage.AResource{A: a.As4()}); err != nil {
			return nil, err
		}
	}
	if err := b.StartAdditionals(); err != nil {
		return nil, err
	}
	if req.edns {
		var h dnsmessage.ResourceHeader
		if err := h.SetEDNS0(ednsSize, dnsmessage.RCodeSuccess, false); err != nil {
			return nil, err
		}
		if err := b.OPTResource(h, dnsmessage.OPTResource{}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// canonical lower-cases a name and drops its trailing dot, as netpolicy does.
func canonical(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

// isReverse reports whether name is in a reverse-mapping zone.
func isReverse(name string) bool {
	for _, zone := range []string{"in-addr.arpa", "ip6.arpa"} {
		if name == zone || strings.HasSuffix(name, "."+zone) {
			return true
		}
	}
	return false
}

var typeNames = map[dnsmessage.Type]string{
	dnsmessage.TypeA: "A", dnsmessage.TypeNS: "NS", dnsmessage.TypeCNAME: "CNAME",
	dnsmessage.TypeSOA: "SOA", dnsmessage.TypePTR: "PTR", dnsmessage.TypeMX: "MX",
	dnsmessage.TypeTXT: "TXT", dnsmessage.TypeAAAA: "AAAA", dnsmessage.TypeSRV: "SRV",
	dnsmessage.TypeOPT: "OPT", dnsmessage.TypeSVCB: "SVCB", dnsmessage.TypeHTTPS: "HTTPS",
	dnsmessage.TypeAXFR: "AXFR", dnsmessage.TypeALL: "ANY",
	10: "NULL", 35: "NAPTR", 43: "DS", 48: "DNSKEY", 251: "IXFR", 257: "CAA",
}

// typeName is the mnemonic of t ("A", "TXT"), or "TYPEn" (RFC 3597) for others.
func typeName(t dnsmessage.Type) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("TYPE%d", uint16(t))
}
