package netpolicy_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

func ptr[T any](v T) *T { return &v }

// opts are the operator's options of the tests.
var opts = netpolicy.Options{
	Trusted: map[string][]netip.Addr{
		"Internal.Corp.": {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::3")},
		"meta.corp":      {netip.MustParseAddr("169.254.169.254")},
	},
	Secrets: map[string]string{"openai": "Bearer sk-test", "bad": "x\r\nEvil: 1"},
}

func mustCompile(t *testing.T, n api.Network) *netpolicy.Policy {
	t.Helper()
	p, err := netpolicy.Compile(n, opts)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", n, err)
	}
	return p
}

func TestCompileErrors(t *testing.T) {
	restricted := func(domains ...string) api.Network {
		return api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: domains}
	}
	cred := func(c api.Credential) api.Network {
		return api.Network{EgressPolicy: api.EgressRestricted, Credentials: []api.Credential{c}}
	}
	tests := []struct {
		name  string
		n     api.Network
		field string // "": no error
	}{
		{name: "restricted", n: restricted("a.com", "*.b.com", "c.com:8443", " D.COM. ")},
		{name: "open", n: api.Network{EgressPolicy: api.EgressOpen}},
		{name: "none", n: api.Network{EgressPolicy: api.EgressNone}},
		{name: "unknown egress", n: api.Network{EgressPolicy: "bogus"}, field: "network.egressPolicy"},
		{name: "empty egress", n: api.Network{}, field: "network.egressPolicy"},
		{name: "TLD wildcard", n: restricted("a.com", "*.com"), field: "network.allowedDomains[1]"},
		{name: "one label", n: restricted("localhost"), field: "network.allowedDomains[0]"},
		{name: "inner wildcard", n: restricted("a.*.com"), field: "network.allowedDomains[0]"},
		{name: "partial wildcard", n: restricted("*a.com"), field: "network.allowedDomains[0]"},
		{name: "bare wildcard", n: restricted("*"), field: "network.allowedDomains[0]"},
		{name: "IPv4 literal", n: restricted("1.2.3.4"), field: "network.allowedDomains[0]"},
		{name: "IPv6 literal", n: restricted("[::1]:443"), field: "network.allowedDomains[0]"},
		{name: "port zero", n: restricted("a.com:0"), field: "network.allowedDomains[0]"},
		{name: "port too big", n: restricted("a.com:65536"), field: "network.allowedDomains[0]"},
		{name: "port not a number", n: restricted("a.com:https"), field: "network.allowedDomains[0]"},
		{name: "empty port", n: restricted("a.com:"), field: "network.allowedDomains[0]"},
		{name: "bad character", n: restricted("a!.com"), field: "network.allowedDomains[0]"},
		{name: "empty label", n: restricted("a..com"), field: "network.allowedDomains[0]"},
		{name: "leading hyphen", n: restricted("-a.com"), field: "network.allowedDomains[0]"},
		{name: "empty", n: restricted(""), field: "network.allowedDomains[0]"},
		{name: "URL", n: restricted("https://a.com"), field: "network.allowedDomains[0]"},
		{name: "credential value", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Value: "Bearer x"})},
		{name: "credential secret", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Secret: "openai"})},
		{name: "credential both", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Value: "v", Secret: "openai"}), field: "network.credentials[0]"},
		{name: "credential neither", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization"}), field: "network.credentials[0]"},
		{name: "credential missing secret", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Secret: "nope"}), field: "network.credentials[0].secret"},
		{name: "credential CRLF value", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Value: "x\r\nHost: evil"}), field: "network.credentials[0].value"},
		{name: "credential LF value", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Value: "x\ny"}), field: "network.credentials[0].value"},
		{name: "credential NUL value", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Value: "x\x00"}), field: "network.credentials[0].value"},
		{name: "credential CRLF secret", n: cred(api.Credential{Host: "api.a.com", Header: "Authorization", Secret: "bad"}), field: "network.credentials[0].value"},
		{name: "credential header space", n: cred(api.Credential{Host: "api.a.com", Header: "X Key", Value: "v"}), field: "network.credentials[0].header"},
		{name: "credential header colon", n: cred(api.Credential{Host: "api.a.com", Header: "X-Key:", Value: "v"}), field: "network.credentials[0].header"},
		{name: "credential header empty", n: cred(api.Credential{Host: "api.a.com", Value: "v"}), field: "network.credentials[0].header"},
		{name: "credential header non-ASCII", n: cred(api.Credential{Host: "api.a.com", Header: "X-Ké", Value: "v"}), field: "network.credentials[0].header"},
		{name: "credential host empty", n: cred(api.Credential{Header: "X-Key", Value: "v"}), field: "network.credentials[0].host"},
		{name: "credential host URL", n: cred(api.Credential{Host: "https://api.a.com/", Header: "X-Key", Value: "v"}), field: "network.credentials[0].host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := netpolicy.Compile(tt.n, opts)
			if tt.field == "" {
				if err != nil || p == nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			fe, ok := errors.AsType[*errdefs.FieldError](err)
			if !ok || fe.Field != tt.field || p != nil {
				t.Fatalf("Compile: policy %v, error %v; want a FieldError for %s", p, err, tt.field)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %v is not ErrInvalidArgument", err)
			}
			if tt.n.Credentials != nil && strings.Contains(err.Error(), "sk-test") {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		domains []string
		field   string
	}{
		{domains: nil},
		{domains: []string{"a.com", "*.a.com:8080"}},
		{domains: []string{"a.com", "*.com"}, field: "network.allowedDomains[1]"},
		{domains: []string{"10.0.0.1"}, field: "network.allowedDomains[0]"},
	}
	for _, tt := range tests {
		err := netpolicy.Check(api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: tt.domains})
		fe, ok := errors.AsType[*errdefs.FieldError](err)
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%q: %v", tt.domains, err)
		case tt.field != "" && (!ok || fe.Field != tt.field):
			t.Errorf("%q: %v, want a FieldError for %s", tt.domains, err, tt.field)
		}
	}
}

func TestName(t *testing.T) {
	restricted := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{
		"exact.com", "*.a.com", "c.com:8443", "d.com:8080", "d.com", "*.e.com:9000",
	}})
	open := mustCompile(t, api.Network{EgressPolicy: api.EgressOpen})
	openLocal := mustCompile(t, api.Network{EgressPolicy: api.EgressOpen, BlockLocalNetwork: ptr(false)})
	none := mustCompile(t, api.Network{EgressPolicy: api.EgressNone, AllowedDomains: []string{"exact.com"}})

	tests := []struct {
		pol   *netpolicy.Policy
		host  string
		port  int
		allow bool
		rule  string
	}{
		// Exact entries.
		{restricted, "exact.com", 443, true, netpolicy.RuleAllowlist},
		{restricted, "exact.com", 80, true, netpolicy.RuleAllowlist},
		{restricted, "exact.com", 0, true, netpolicy.RuleAllowlist},
		{restricted, "EXACT.Com", 443, true, netpolicy.RuleAllowlist},
		{restricted, "exact.com.", 443, true, netpolicy.RuleAllowlist},
		{restricted, "www.exact.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "notexact.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "exact.com.evil.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "exact.co", 443, false, netpolicy.RuleNotListed},

		// Wildcards: any name below, not the name itself nor look-alikes.
		{restricted, "x.a.com", 443, true, netpolicy.RuleAllowlist},
		{restricted, "x.y.a.com", 443, true, netpolicy.RuleAllowlist},
		{restricted, "X.A.COM.", 443, true, netpolicy.RuleAllowlist},
		{restricted, "a.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "evil-a.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "evila.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "a.com.evil.com", 443, false, netpolicy.RuleNotListed},
		{restricted, "x.a.com.evil.com", 443, false, netpolicy.RuleNotListed},
		{restricted, ".a.com", 443, false, netpolicy.RuleBadName},

		// Ports.
		{restricted, "exact.com", 8443, false, netpolicy.RulePort},
		{restricted, "c.com", 8443, true, netpolicy.RuleAllowlist},
		{restricted, "c.com", 443, false, netpolicy.RulePort},
		{restricted, "c.com", 0, true, netpolicy.RuleAllowlist},
		{restricted, "d.com", 8080, true, netpolicy.RuleAllowlist}, // two entries, either port
		{restricted, "d.com", 443, true, netpolicy.RuleAllowlist},
		{restricted, "d.com", 22, false, netpolicy.RulePort},
		{restricted, "x.e.com", 9000, true, netpolicy.RuleAllowlist},
		{restricted, "x.e.com", 443, false, netpolicy.RulePort},

		// IP literals: never in restricted; by address class in open.
		{restricted, "1.2.3.4", 443, false, netpolicy.RuleIPLiteral},
		{restricted, "[2606:4700::1]", 443, false, netpolicy.RuleIPLiteral},
		{restricted, "::ffff:1.2.3.4", 443, false, netpolicy.RuleIPLiteral},
		{open, "1.2.3.4", 443, true, netpolicy.RuleOpen},
		{open, "10.0.0.1", 443, false, netpolicy.RuleLocal},
		{open, "127.0.0.1", 443, false, netpolicy.RuleLocal},
		{open, "::ffff:127.0.0.1", 443, false, netpolicy.RuleLocal},
		{open, "169.254.169.254", 80, false, netpolicy.RuleMetadata},
		{open, "[2606:4700::1]", 443, false, netpolicy.RuleIPv6},
		{openLocal, "10.0.0.1", 443, true, netpolicy.RuleOpen},
		{openLocal, "127.0.0.1", 443, false, netpolicy.RuleLocal},
		{openLocal, "169.254.169.254", 80, false, netpolicy.RuleMetadata},

		// Open and none.
		{open, "anything.example", 25, true, netpolicy.RuleOpen},
		{open, "bad name.example", 443, false, netpolicy.RuleBadName},
		{none, "exact.com", 443, false, netpolicy.RuleNone},
		{none, "1.2.3.4", 443, false, netpolicy.RuleNone},

		// Not host names.
		{restricted, "", 443, false, netpolicy.RuleBadName},
		{restricted, "a b.com", 443, false, netpolicy.RuleBadName},
		{restricted, "x.a.com/path", 443, false, netpolicy.RuleBadName},
		{restricted, "x..a.com", 443, false, netpolicy.RuleBadName},
		{restricted, "x.a.com..", 443, false, netpolicy.RuleBadName},
	}
	for _, tt := range tests {
		d := tt.pol.Name(tt.host, tt.port)
		if d.Allow != tt.allow || d.Rule != tt.rule || d.Reason == "" {
			t.Errorf("%s policy: Name(%q, %d) = %+v, want allow %v by %s", tt.pol.Egress, tt.host, tt.port, d, tt.allow, tt.rule)
		}
	}
}

func TestAddr(t *testing.T) {
	restricted := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"internal.corp"}})
	local := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted, BlockLocalNetwork: ptr(false)})
	open := mustCompile(t, api.Network{EgressPolicy: api.EgressOpen})
	none := mustCompile(t, api.Network{EgressPolicy: api.EgressNone})

	tests := []struct {
		pol   *netpolicy.Policy
		name  string
		addr  string
		allow bool
		rule  string
	}{
		{restricted, "x.com", "203.0.113.1", true, netpolicy.RuleAllowlist},
		{open, "", "203.0.113.1", true, netpolicy.RuleOpen},
		{none, "x.com", "203.0.113.1", false, netpolicy.RuleNone},

		// Metadata: always, even trusted, even without blockLocal.
		{restricted, "x.com", "169.254.169.254", false, netpolicy.RuleMetadata},
		{restricted, "meta.corp", "169.254.169.254", false, netpolicy.RuleMetadata},
		{local, "", "169.254.169.254", false, netpolicy.RuleMetadata},
		{local, "", "100.100.100.200", false, netpolicy.RuleMetadata},
		{open, "", "fd00:ec2::254", false, netpolicy.RuleMetadata},
		{open, "", "::ffff:169.254.169.254", false, netpolicy.RuleMetadata},
		{none, "", "169.254.169.254", false, netpolicy.RuleMetadata},

		// Private and other local addresses.
		{restricted, "x.com", "10.0.0.1", false, netpolicy.RuleLocal},
		{restricted, "x.com", "192.168.1.1", false, netpolicy.RuleLocal},
		{restricted, "x.com", "172.16.0.1", false, netpolicy.RuleLocal},
		{restricted, "x.com", "100.64.0.1", false, netpolicy.RuleLocal},
		{restricted, "x.com", "127.0.0.1", false, netpolicy.RuleLocal},
		{restricted, "", "0.0.0.0", false, netpolicy.RuleLocal},
		{restricted, "", "224.0.0.1", false, netpolicy.RuleLocal},
		{local, "x.com", "10.0.0.1", true, netpolicy.RuleAllowlist},
		{local, "x.com", "192.168.1.1", true, netpolicy.RuleAllowlist},
		{local, "x.com", "127.0.0.1", false, netpolicy.RuleLocal},
		{local, "x.com", "169.254.1.1", false, netpolicy.RuleLocal},
		{local, "x.com", "100.64.0.1", false, netpolicy.RuleLocal},

		// Trusted hosts: their addresses, for that name only.
		{restricted, "internal.corp", "10.1.2.3", true, netpolicy.RuleTrusted},
		{restricted, "INTERNAL.corp.", "10.1.2.3", true, netpolicy.RuleTrusted},
		{restricted, "internal.corp", "::ffff:10.1.2.3", true, netpolicy.RuleTrusted},
		{restricted, "internal.corp", "fd00::3", true, netpolicy.RuleTrusted},
		{restricted, "internal.corp", "10.1.2.4", false, netpolicy.RuleLocal},
		{restricted, "other.corp", "10.1.2.3", false, netpolicy.RuleLocal},
		{restricted, "", "10.1.2.3", false, netpolicy.RuleLocal},
		{none, "internal.corp", "10.1.2.3", false, netpolicy.RuleNone},

		// IPv6: not routed; IPv4-mapped addresses are IPv4.
		{restricted, "x.com", "2606:4700::1", false, netpolicy.RuleIPv6},
		{open, "", "2606:4700::1", false, netpolicy.RuleIPv6},
		{open, "", "::1", false, netpolicy.RuleIPv6},
		{open, "", "fe80::1%eth0", false, netpolicy.RuleIPv6},
		{open, "", "::ffff:203.0.113.1", true, netpolicy.RuleOpen},
		{open, "", "::ffff:10.0.0.1", false, netpolicy.RuleLocal},
		{local, "", "::ffff:10.0.0.1", true, netpolicy.RuleAllowlist},
	}
	for _, tt := range tests {
		d := tt.pol.Addr(tt.name, netip.MustParseAddr(tt.addr))
		if d.Allow != tt.allow || d.Rule != tt.rule || d.Reason == "" {
			t.Errorf("%s (blockLocal %v): Addr(%q, %s) = %+v, want allow %v by %s", tt.pol.Egress, tt.pol.BlockLocal, tt.name, tt.addr, d, tt.allow, tt.rule)
		}
	}
}

// TestRefused4 checks the firewall's ranges against Addr: an IPv4 address is in Refused4
// exactly when open egress refuses a connection made to it by address.
func TestRefused4(t *testing.T) {
	for _, blockLocal := range []bool{true, false} {
		pol := mustCompile(t, api.Network{EgressPolicy: api.EgressOpen, BlockLocalNetwork: ptr(blockLocal)})
		refused := netpolicy.Refused4(blockLocal)
		for _, s := range []string{"0.0.0.1", "1.1.1.1", "9.255.255.255", "10.0.0.1", "10.66.0.7", "11.0.0.0",
			"100.63.255.255", "100.64.0.1", "100.100.100.200", "100.128.0.0", "127.0.0.1", "169.254.169.254",
			"169.254.1.1", "172.15.255.255", "172.16.0.1", "172.31.255.255", "172.32.0.0", "192.0.0.8",
			"192.0.2.1", "192.168.1.1", "198.18.0.1", "203.0.113.9", "224.0.0.1", "240.0.0.1", "255.255.255.255"} {
			a := netip.MustParseAddr(s)
			in := slices.ContainsFunc(refused, func(p netip.Prefix) bool { return p.Contains(a) })
			if d := pol.Addr("", a); in == d.Allow {
				t.Errorf("blockLocal %v: %s in Refused4 = %v, but Addr says %+v", blockLocal, a, in, d)
			}
		}
		for _, p := range refused {
			if !p.Addr().Is4() {
				t.Errorf("Refused4 has %s, not IPv4", p)
			}
		}
	}
}

func TestRefused(t *testing.T) {
	restricted := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted, AllowedDomains: []string{"x.com"}})
	open := mustCompile(t, api.Network{EgressPolicy: api.EgressOpen})
	none := mustCompile(t, api.Network{EgressPolicy: api.EgressNone})
	for _, tt := range []struct {
		pol   *netpolicy.Policy
		proto string
		dst   string
		rule  string
	}{
		{restricted, "tcp", "203.0.113.9:443", netpolicy.RuleIPLiteral},
		{restricted, "tcp", "203.0.113.9:80", netpolicy.RuleIPLiteral},
		{restricted, "tcp", "203.0.113.9:22", netpolicy.RulePort},
		{restricted, "tcp", "10.1.2.3:443", netpolicy.RuleLocal},
		{restricted, "tcp", "169.254.169.254:80", netpolicy.RuleMetadata},
		{restricted, "udp", "203.0.113.9:123", netpolicy.RuleProtocol},
		{restricted, "icmp", "203.0.113.9:0", netpolicy.RuleProtocol},
		{restricted, "tcp", "[fd00::1]:443", netpolicy.RuleIPv6},
		{restricted, "tcp", "[2606:4700::1]:443", netpolicy.RuleIPv6},
		{open, "tcp", "10.1.2.3:5432", netpolicy.RuleLocal},
		{open, "tcp", "100.100.100.200:80", netpolicy.RuleMetadata},
		{open, "udp", "203.0.113.9:123", netpolicy.RuleProtocol},
		{none, "tcp", "203.0.113.9:443", netpolicy.RuleNone},
	} {
		d := tt.pol.Refused(tt.proto, netip.MustParseAddrPort(tt.dst))
		if d.Allow || d.Rule != tt.rule || d.Reason == "" {
			t.Errorf("%s: Refused(%s, %s) = %+v, want a denial by %s", tt.pol.Egress, tt.proto, tt.dst, d, tt.rule)
		}
	}
}

func TestTrusted(t *testing.T) {
	p := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted})
	if a, ok := p.Trusted("internal.CORP."); !ok || len(a) != 2 {
		t.Errorf("Trusted(internal.CORP.) = %v, %v", a, ok)
	}
	if a, ok := p.Trusted("x.internal.corp"); ok {
		t.Errorf("Trusted(x.internal.corp) = %v, want none", a)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		addr  string
		class string
	}{
		{"203.0.113.1", netpolicy.ClassPublic},
		{"8.8.8.8", netpolicy.ClassPublic},
		{"0.0.0.0", netpolicy.ClassUnspecified},
		{"0.1.2.3", netpolicy.ClassUnspecified},
		{"10.0.0.1", netpolicy.ClassPrivate},
		{"10.255.255.255", netpolicy.ClassPrivate},
		{"100.63.255.255", netpolicy.ClassPublic},
		{"100.64.0.1", netpolicy.ClassCGNAT},
		{"100.127.255.255", netpolicy.ClassCGNAT},
		{"100.128.0.0", netpolicy.ClassPublic},
		{"100.100.100.200", netpolicy.ClassMetadata},
		{"127.0.0.1", netpolicy.ClassLoopback},
		{"127.255.0.1", netpolicy.ClassLoopback},
		{"169.254.1.1", netpolicy.ClassLinkLocal},
		{"169.254.169.254", netpolicy.ClassMetadata},
		{"172.15.255.255", netpolicy.ClassPublic},
		{"172.16.0.1", netpolicy.ClassPrivate},
		{"172.31.255.255", netpolicy.ClassPrivate},
		{"172.32.0.0", netpolicy.ClassPublic},
		{"192.0.0.8", netpolicy.ClassReserved},
		{"192.168.0.1", netpolicy.ClassPrivate},
		{"198.18.0.1", netpolicy.ClassReserved},
		{"198.19.255.255", netpolicy.ClassReserved},
		{"224.0.0.1", netpolicy.ClassMulticast},
		{"239.255.255.250", netpolicy.ClassMulticast},
		{"240.0.0.1", netpolicy.ClassReserved},
		{"255.255.255.255", netpolicy.ClassReserved},
		{"::ffff:10.0.0.1", netpolicy.ClassPrivate},
		{"::ffff:127.0.0.1", netpolicy.ClassLoopback},
		{"::ffff:169.254.169.254", netpolicy.ClassMetadata},
		{"::ffff:8.8.8.8", netpolicy.ClassPublic},
		{"::", netpolicy.ClassUnspecified},
		{"::1", netpolicy.ClassLoopback},
		{"fc00::1", netpolicy.ClassPrivate},
		{"fd00::1", netpolicy.ClassPrivate},
		{"fd00:ec2::254", netpolicy.ClassMetadata},
		{"fe80::1", netpolicy.ClassLinkLocal},
		{"fe80::1%eth0", netpolicy.ClassLinkLocal},
		{"fd00:ec2::254%eth0", netpolicy.ClassMetadata},
		{"ff02::1", netpolicy.ClassMulticast},
		{"64:ff9b::a9fe:a9fe", netpolicy.ClassReserved},
		{"2001:db8::1", netpolicy.ClassReserved},
		{"2606:4700::1111", netpolicy.ClassPublic},
	}
	for _, tt := range tests {
		if got := netpolicy.Classify(netip.MustParseAddr(tt.addr)); got != tt.class {
			t.Errorf("Classify(%s) = %s, want %s", tt.addr, got, tt.class)
		}
	}
}

func TestCheckQueryName(t *testing.T) {
	label := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		ok   bool
	}{
		{"example.com", true},
		{"Example.COM.", true},
		{"_dmarc.example.com", true},
		{"x-1.example.com", true},
		{"localhost", true},
		{label(40) + ".com", true},
		{label(41) + ".com", false},
		{"1.2.3.4.5.6.7.com", true},                           // 8 labels
		{"1.2.3.4.5.6.7.8.com", false},                        // 9 labels
		{strings.Repeat(label(31)+".", 4), true},              // 128 characters with the root dot, 127 without
		{strings.Repeat(label(31)+".", 3) + label(32), true},  // 128 characters
		{strings.Repeat(label(31)+".", 3) + label(33), false}, // 129 characters
		{strings.Repeat(label(39)+".", 5) + "com", false},     // 203 characters
		{"aGk+dA.example.com", false},
		{"aGk/dA.example.com", false},
		{"aGk=.example.com", false},
		{"a b.example.com", false},
		{"a\x00b.example.com", false},
		{"é.example.com", false},
		{"-a.example.com", false},
		{"a-.example.com", false},
		{"a..example.com", false},
		{"", false},
		{".", false},
	}
	for _, tt := range tests {
		if err := netpolicy.CheckQueryName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckQueryName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestCredentials(t *testing.T) {
	p := mustCompile(t, api.Network{EgressPolicy: api.EgressRestricted, Credentials: []api.Credential{
		{Host: "API.OpenAI.com.", Header: "Authorization", Secret: "openai"},
		{Host: "api.openai.com", Header: "OpenAI-Organization", Value: "org-1"},
		{Host: "x.com", Header: "X-Key", Value: "v"},
	}})
	tests := []struct {
		host string
		want []netpolicy.Header
	}{
		{"api.openai.com", []netpolicy.Header{{Name: "Authorization", Value: "Bearer sk-test"}, {Name: "OpenAI-Organization", Value: "org-1"}}},
		{"API.OPENAI.COM.", []netpolicy.Header{{Name: "Authorization", Value: "Bearer sk-test"}, {Name: "OpenAI-Organization", Value: "org-1"}}},
		{"x.com", []netpolicy.Header{{Name: "X-Key", Value: "v"}}},
		{"openai.com", nil},
		{"evil.api.openai.com", nil},
	}
	for _, tt := range tests {
		if got := p.Credentials(tt.host); !slices.Equal(got, tt.want) {
			t.Errorf("Credentials(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
