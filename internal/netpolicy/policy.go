// Package netpolicy is docs/network.md#network-policy as data: a sandbox's network policy compiled once (Compile) and
// asked, by the egress proxy and the DNS server, whether a name may be reached (Name), whether an
// address may be connected to (Addr) and which headers to add for a host (Credentials). It does
// no I/O; every answer names the rule that decided it, for the sandbox's events.
package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Rules name what decided; they appear in events and in the proxy's denial messages.
const (
	RuleAllowlist  = "allowedDomains"    // the name matched an allowedDomains entry
	RuleNotListed  = "not_in_allowlist"  // restricted, and no entry matched
	RuleOpen       = "open"              // egress open: any public destination
	RuleNone       = "egress_none"       // egress none: nothing leaves
	RuleMetadata   = "metadata"          // a cloud metadata address, refused always
	RuleLocal      = "blockLocalNetwork" // loopback, private, link-local, CGNAT, ...
	RuleTrusted    = "trustedHosts"      // an operator's trusted host
	RuleIPLiteral  = "ip_literal"        // restricted sandboxes name hosts, not addresses
	RuleBadName    = "invalid_name"      // not a host name (DNS tunnelling, garbage)
	RulePort       = "port"              // the name is allowed, not on this port
	RuleIPv6       = "ipv6"              // sandboxes have no IPv6 route
	RuleCredential = "credentials"       // a credential was injected
	RuleProtocol   = "protocol"          // only TCP (and DNS to airlock) leaves a sandbox
)

// Decision is one answer of the policy.
type Decision struct {
	Allow  bool
	Rule   string
	Reason string // for people: why, naming the policy
}

func allow(rule, format string, a ...any) Decision {
	return Decision{Allow: true, Rule: rule, Reason: fmt.Sprintf(format, a...)}
}

func deny(rule, format string, a ...any) Decision {
	return Decision{Rule: rule, Reason: fmt.Sprintf(format, a...)}
}

// Options are the operator's part of every policy (the daemon's network configuration).
type Options struct {
	// Trusted maps host names to the addresses they resolve to, bypassing DNS; only they may
	// point at private addresses (never at metadata ones), and only for sandboxes allowed to
	// reach the name.
	Trusted map[string][]netip.Addr
	// Secrets are the values a Credential may name instead of carrying its own.
	Secrets map[string]string
	// IsHostAddr reports whether an address is one of airlock's host's own: those are never
	// reachable (its services, the daemon's API), whatever blockLocalNetwork says.
	IsHostAddr func(netip.Addr) bool
}

// Header is one header to add to a request.
type Header struct{ Name, Value string }

// Policy is a compiled api.Network. It is immutable; a live change compiles a new one.
type Policy struct {
	Egress     string
	BlockLocal bool
	domains    []pattern
	trusted    map[string][]netip.Addr
	creds      map[string][]Header
	isHost     func(netip.Addr) bool
}

type pattern struct {
	suffix   string // "example.com" or, for wildcards, ".example.com"
	wildcard bool
	ports    []int // nil: 80 and 443
	text     string
}

// DefaultPorts are the ports an allowedDomains entry without ":PORT" opens.
var DefaultPorts = []int{80, 443}

// Compile checks n (already defaulted) and returns its policy. Errors are *errdefs.FieldError.
func Compile(n api.Network, o Options) (*Policy, error) { return compile(n, o, false) }

// Check checks n's syntax without the operator's configuration: a credential's secret is not
// looked up (Compile does that, where the configuration is).
func Check(n api.Network) error {
	_, err := compile(n, Options{}, true)
	return err
}

func compile(n api.Network, o Options, lax bool) (*Policy, error) {
	p := &Policy{Egress: n.EgressPolicy, BlockLocal: n.BlockLocalNetwork == nil || *n.BlockLocalNetwork,
		trusted: map[string][]netip.Addr{}, isHost: o.IsHostAddr}
	switch p.Egress {
	case api.EgressNone, api.EgressRestricted, api.EgressOpen:
	default:
		return nil, errdefs.Invalid("network.egressPolicy", "must be none, restricted or open (got %q)", p.Egress)
	}
	for i, d := range n.AllowedDomains {
		pt, err := parsePattern(d)
		if err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("network.allowedDomains[%d]", i), "%v", err)
		}
		p.domains = append(p.domains, pt)
	}
	for name, addrs := range o.Trusted {
		for _, a := range addrs {
			p.trusted[canonical(name)] = append(p.trusted[canonical(name)], a.Unmap())
		}
	}
	for i, c := range n.Credentials {
		field := fmt.Sprintf("network.credentials[%d]", i)
		host := canonical(c.Host)
		if err := checkHostName(host); err != nil {
			return nil, errdefs.Invalid(field+".host", "%v", err)
		}
		if !validHeaderName(c.Header) {
			return nil, errdefs.Invalid(field+".header", "%q is not a valid HTTP header name", c.Header)
		}
		v := c.Value
		switch {
		case c.Value != "" && c.Secret != "":
			return nil, errdefs.Invalid(field, "set value or secret, not both")
		case c.Secret != "" && lax:
			v = "-"
		case c.Secret != "":
			s, ok := o.Secrets[c.Secret]
			if !ok {
				return nil, errdefs.Invalid(field+".secret", "no secret %q in the daemon's configuration (network.secrets)", c.Secret)
			}
			v = s
		case c.Value == "":
			return nil, errdefs.Invalid(field, "value or secret is required")
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, errdefs.Invalid(field+".value", "must not contain CR, LF or NUL")
		}
		if p.creds == nil {
			p.creds = map[string][]Header{}
		}
		p.creds[host] = append(p.creds[host], Header{Name: c.Header, Value: v})
	}
	return p, nil
}

func parsePattern(s string) (pattern, error) {
	pt := pattern{text: s}
	host := strings.ToLower(strings.TrimSpace(s))
	if h, port, ok := strings.Cut(host, ":"); ok {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return pt, fmt.Errorf("%q: port must be 1-65535", s)
		}
		host, pt.ports = h, []int{n}
	}
	host = strings.TrimSuffix(host, ".")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		pt.wildcard, host = true, rest
	}
	if strings.Contains(host, "*") {
		return pt, fmt.Errorf("%q: a wildcard is allowed only as the whole first label (*.example.com)", s)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return pt, fmt.Errorf("%q: name hosts, not addresses (IP literals are never allowed)", s)
	}
	if err := checkHostName(host); err != nil {
		return pt, fmt.Errorf("%q: %w", s, err)
	}
	if !strings.Contains(host, ".") {
		return pt, fmt.Errorf("%q: needs at least two labels", s)
	}
	pt.suffix = host
	if pt.wildcard {
		pt.suffix = "." + host
	}
	return pt, nil
}

// canonical lower-cases a name and drops a trailing dot.
func canonical(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

func (pt pattern) match(name string, port int) (nameOK, portOK bool) {
	if pt.wildcard {
		nameOK = strings.HasSuffix(name, pt.suffix) && len(name) > len(pt.suffix)
	} else {
		nameOK = name == pt.suffix
	}
	ports := pt.ports
	if ports == nil {
		ports = DefaultPorts
	}
	return nameOK, port == 0 || slices.Contains(ports, port)
}

// Name decides whether host (a name or an address literal) may be reached on port (0: any
// port, as for DNS).
func (p *Policy) Name(host string, port int) Decision {
	name := canonical(host)
	switch p.Egress {
	case api.EgressNone:
		return deny(RuleNone, "egress policy is none: no network access")
	}
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		if p.Egress == api.EgressRestricted {
			return deny(RuleIPLiteral, "egress policy is restricted: %s is an address, not an allowed name", a)
		}
		return p.Addr("", a)
	}
	if err := checkHostName(name); err != nil {
		return deny(RuleBadName, "%q is not a valid host name: %v", host, err)
	}
	if p.Egress == api.EgressOpen {
		return allow(RuleOpen, "egress policy is open")
	}
	portDenied := ""
	for _, pt := range p.domains {
		n, po := pt.match(name, port)
		if n && po {
			return allow(RuleAllowlist, "%s matches allowedDomains entry %q", name, pt.text)
		}
		if n {
			portDenied = pt.text
		}
	}
	if portDenied != "" {
		return deny(RulePort, "%s is allowed by %q, but not on port %d", name, portDenied, port)
	}
	return deny(RuleNotListed, "%s is not in the sandbox's allowedDomains", name)
}

// Addr decides whether a connection to a may be made for name ("" when the sandbox gave an
// address itself). Metadata addresses are refused always, local ones when BlockLocal is set,
// except the addresses the operator trusted for name.
func (p *Policy) Addr(name string, a netip.Addr) Decision {
	a = a.Unmap()
	c := Classify(a)
	if c == ClassMetadata {
		return deny(RuleMetadata, "%s is a cloud metadata address, always unreachable", a)
	}
	if p.Egress == api.EgressNone {
		return deny(RuleNone, "egress policy is none: no network access")
	}
	if name != "" && slices.Contains(p.trusted[canonical(name)], a) {
		return allow(RuleTrusted, "%s is the operator's trusted address for %s", a, name)
	}
	if p.isHost != nil && p.isHost(a) {
		return deny(RuleLocal, "%s is an address of airlock's host, never reachable from a sandbox", a)
	}
	if a.Is6() {
		return deny(RuleIPv6, "%s is IPv6; sandboxes reach the network over IPv4 only", a)
	}
	if c != ClassPublic && (p.BlockLocal || c != ClassPrivate) {
		why := "which blockLocalNetwork forbids"
		if !p.BlockLocal {
			why = "which no sandbox may reach (blockLocalNetwork false opens private ranges only)"
		}
		if name != "" {
			return deny(RuleLocal, "%s resolved to %s (%s), %s", name, a, c, why)
		}
		return deny(RuleLocal, "%s is a %s address, %s", a, c, why)
	}
	return allow(p.allowRule(), "%s is allowed", a)
}

// Refused explains why the sandbox's firewall refused, at connect, a packet of protocol proto
// ("tcp", "udp", ...) to dst: the firewall redirects to airlock's listeners only what this
// policy may allow, and refuses the rest itself.
func (p *Policy) Refused(proto string, dst netip.AddrPort) Decision {
	a := dst.Addr().Unmap()
	if d := p.Addr("", a); !d.Allow {
		return d
	}
	if proto != "tcp" {
		return deny(RuleProtocol, "%s to %s: only TCP leaves a sandbox (and DNS, to airlock's server)", proto, dst)
	}
	if p.Egress == api.EgressRestricted {
		if port := int(dst.Port()); !slices.Contains(DefaultPorts, port) {
			return deny(RulePort, "egress policy is restricted: port %d is reached through the proxy (HTTP_PROXY), only ports 80 and 443 without it", port)
		}
		return deny(RuleIPLiteral, "egress policy is restricted: %s is not an address airlock's DNS answered for an allowed name", a)
	}
	return deny(RulePort, "%s: refused by the sandbox's firewall", dst)
}

func (p *Policy) allowRule() string {
	if p.Egress == api.EgressOpen {
		return RuleOpen
	}
	return RuleAllowlist
}

// Trusted returns the operator's addresses for name, if it is a trusted host.
func (p *Policy) Trusted(name string) ([]netip.Addr, bool) {
	a, ok := p.trusted[canonical(name)]
	return a, ok
}

// Credentials returns the headers to add to requests for host.
func (p *Policy) Credentials(host string) []Header { return p.creds[canonical(host)] }

// Address classes.
const (
	ClassPublic      = "public"
	ClassLoopback    = "loopback"
	ClassPrivate     = "private"
	ClassLinkLocal   = "link-local"
	ClassCGNAT       = "CGNAT"
	ClassMetadata    = "metadata"
	ClassMulticast   = "multicast"
	ClassUnspecified = "unspecified"
	ClassReserved    = "reserved"
)

// MetadataAddrs are the cloud metadata services (AWS, GCP, Azure, OpenStack; AWS over IPv6;
// Alibaba).
var MetadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

var classes = []struct {
	p netip.Prefix
	c string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), ClassLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), ClassReserved},
	{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), ClassReserved},
	{netip.MustParsePrefix("::/128"), ClassUnspecified},
	{netip.MustParsePrefix("::1/128"), ClassLoopback},
	{netip.MustParsePrefix("fc00::/7"), ClassPrivate},
	{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
	{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
	{netip.MustParsePrefix("64:ff9b::/96"), ClassReserved}, // NAT64 can reach any IPv4 address
	{netip.MustParsePrefix("2001:db8::/32"), ClassReserved},
}

// Refused4 returns the IPv4 ranges that Addr refuses to every connection made by address (no
// name, so no trusted host): every class but public, and private too when blockLocal is set.
// The firewall refuses them at connect in open egress, instead of letting the proxy accept the
// connection and then close it.
func Refused4(blockLocal bool) []netip.Prefix {
	var ps []netip.Prefix
	for _, c := range classes {
		if c.p.Addr().Is4() && (blockLocal || c.c != ClassPrivate) {
			ps = append(ps, c.p)
		}
	}
	for _, a := range MetadataAddrs {
		if a.Is4() {
			ps = append(ps, netip.PrefixFrom(a, 32))
		}
	}
	return ps
}

// Classify returns the class of a (IPv4-mapped addresses are classed as IPv4).
func Classify(a netip.Addr) string {
	// Without its zone: netip.Prefix.Contains is false for zoned addresses, which would make
	// fe80::1%eth0 public.
	a = a.Unmap().WithZone("")
	if slices.Contains(MetadataAddrs, a) {
		return ClassMetadata
	}
	for _, c := range classes {
		if c.p.Contains(a) {
			return c.c
		}
	}
	return ClassPublic
}

// Limits of a name airlock's DNS answers; beyond them a query looks like DNS tunnelling.
const (
	MaxNameLen  = 128 // characters of the whole name
	MaxLabelLen = 40  // characters of one label (DNS allows 63)
	MaxLabels   = 8
)

// CheckQueryName refuses names no legitimate lookup uses: too long, too deep, with long labels
// or characters outside letters, digits, '-' and '_' (the shapes that DNS tunnelling and
// exfiltration through queries need).
func CheckQueryName(name string) error {
	name = canonical(name)
	if len(name) > MaxNameLen {
		return fmt.Errorf("name is %d characters long (at most %d)", len(name), MaxNameLen)
	}
	labels := strings.Split(name, ".")
	if len(labels) > MaxLabels {
		return fmt.Errorf("name has %d labels (at most %d)", len(labels), MaxLabels)
	}
	for _, l := range labels {
		if len(l) > MaxLabelLen {
			return fmt.Errorf("label of %d characters (at most %d)", len(l), MaxLabelLen)
		}
	}
	return checkHostName(name)
}

// checkHostName checks the syntax of a host name: labels of letters, digits, '-' and '_'.
func checkHostName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("must be 1-253 characters")
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("empty or overlong label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("character %q not allowed", r)
			}
		}
	}
	return nil
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if r > 126 || r <= 32 || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}
