package netpolicy

import (
	"net/netip"
	"time"
)

// Event kinds.
const (
	KindDNS     = "dns"     // a DNS query to airlock's resolver
	KindConnect = "connect" // a connection (or request) through the egress proxy
)

// Event is one decision of the egress proxy or the DNS server, for the sandbox's event stream.
// Denied attempts are reported at once; allowed connections when they end, with their bytes.
type Event struct {
	Time  time.Time
	Kind  string // KindDNS or KindConnect
	Proto string // dns: "udp", "tcp"; connect: "http", "connect", "tls", "tcp"
	Name  string // the host name asked for ("" when the sandbox gave an address)
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

// Sink receives events. It must not block for long: the proxy and the DNS server call it inline.
type Sink func(Event)
