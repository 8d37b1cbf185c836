package netpolicy

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// Event kinds.
const (
	KindDNS     = "dns"     // a DNS query to airlock's resolver
	KindConnect = "connect" // a connection (or request) through the egress proxy, or refused by the firewall
)

// Event is one decision of the egress proxy, the DNS server or the sandbox's firewall (a
// connection refused at connect), for the sandbox's event stream.
// Denied attempts are reported at once; allowed connections when they end, with their bytes.
type Event struct {
	Time  time.Time // when it was reported
	Start time.Time // when the connection or query began (who began it is whoever ran then)
	Kind  string    // KindDNS or KindConnect
	Proto string    // dns: "udp", "tcp"; connect: "http", "connect", "tls", "tcp"; refused by the firewall also "udp", "icmp"
	Name  string    // the host name asked for ("" when the sandbox gave an address)
	Addr  netip.Addr
	Port  int
	QType string // dns: "A", "AAAA", "TXT", ...
	Allow bool
	Rule  string
	// Reason says why, for people.
	Reason   string
	BytesOut int64 // sandbox → destination
	BytesIn  int64 // destination → sandbox
	// Answers are the addresses a DNS answer gave.
	Answers []netip.Addr
	// Credential is set when airlock added a credential header (its name, never its value).
	Credential string
}

// Sandbox is what the egress proxy and the DNS server need of the sandbox they serve.
type Sandbox interface {
	// Policy is the policy in force now. It may change at any time (a live update); each
	// query, connection and request is decided under the one it read.
	Policy() *Policy
	// Event receives the decisions. It is called inline and must not block for long.
	Event(Event)
}

// Resolver resolves names upstream (a *net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Sink receives events. It must not block for long: the proxy and the DNS server call it inline.
type Sink func(Event)

// String renders the decision for people: "tls evil.test:443 denied (not_in_allowlist)".
func (e Event) String() string {
	verdict := "denied"
	if e.Allow {
		verdict = "allowed"
	}
	target := e.Name
	if target == "" && e.Addr.IsValid() {
		target = e.Addr.String()
	}
	if e.Kind == KindDNS {
		return fmt.Sprintf("dns %s %s %s (%s)", e.QType, target, verdict, e.Rule)
	}
	if e.Port != 0 {
		target = fmt.Sprintf("%s:%d", target, e.Port)
	}
	return fmt.Sprintf("%s %s %s (%s)", e.Proto, target, verdict, e.Rule)
}
