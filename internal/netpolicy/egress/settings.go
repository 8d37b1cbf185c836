package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// Settings is the "network" section of airlock's configuration file: the operator's part of
// every sandbox's network policy, as the operator writes it. Package levels places it in the
// file, turns it into a Config and gives the secrets' grants to the tenancy rules. Config's and
// Validate's errors begin with the field's path inside the section.
type Settings struct {
	// Pool is the IPv4 prefix from which each networked sandbox gets a /30 (its veth pair).
	// Default 10.200.0.0/16 (16384 sandboxes). It must not overlap the host's networks.
	Pool string `json:"pool"`
	// Resolvers are the upstream DNS servers ("ip:port") airlock asks for allowed names.
	// Default: the host's /etc/resolv.conf.
	Resolvers []string `json:"resolvers"`
	// TrustedHosts maps names to addresses (several separated by commas), bypassing DNS, e.g.
	// an internal LLM gateway on a private address. Only these names may lead to private
	// addresses, and only for sandboxes whose policy allows the name; metadata addresses never.
	TrustedHosts map[string]string `json:"trustedHosts"`
	// Secrets are credential values sandboxes may name (network.credentials[].secret) without
	// knowing them, each scoped to the hosts it may be sent to and the tenants that may use it
	// (any other binding is a 403 secret_not_granted). Keep the configuration file readable by
	// root only.
	Secrets map[string]SecretSettings `json:"secrets"`
	// UpstreamCAFile is a PEM bundle trusted, besides the system's roots, when airlock speaks
	// TLS upstream to inject credentials (e.g. a corporate CA).
	UpstreamCAFile string `json:"upstreamCaFile"`
}

// SecretSettings is one secret of the operator's: its value ("env:NAME" reads airlock's
// environment at start), the hosts it may be sent to (exact names or "*.example.com") and the
// tenants that may bind it to a credential ("*" for all).
type SecretSettings struct {
	Value   string   `json:"value"`
	Hosts   []string `json:"hosts"`
	Tenants []string `json:"tenants"`
}

// UnmarshalJSON refuses the bare-string form of earlier versions with a message that says what
// a secret needs now.
func (s *SecretSettings) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return errors.New("a secret is {\"value\": ..., \"hosts\": [...], \"tenants\": [...]}: it names the hosts it may be sent to and the tenants that may use it")
	}
	type plain SecretSettings
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(s))
}

// Validate checks the section (reading the secrets' environment variables).
func (s Settings) Validate() error {
	_, err := s.Config()
	return err
}

// Config returns the network service's configuration: the prefix and addresses parsed, the
// secrets' values read.
func (s Settings) Config() (Config, error) {
	c := Config{Resolvers: s.Resolvers, UpstreamCAFile: s.UpstreamCAFile, Secrets: map[string]string{}}
	if s.Pool != "" {
		p, err := netip.ParsePrefix(s.Pool)
		if err != nil {
			return c, fmt.Errorf("pool %q: %w", s.Pool, err)
		}
		c.Pool = p
	}
	for i, r := range s.Resolvers {
		if _, err := netip.ParseAddrPort(r); err != nil {
			return c, fmt.Errorf("resolvers[%d] %q: want IP:PORT", i, r)
		}
	}
	for name, addrs := range s.TrustedHosts {
		if c.Trusted == nil {
			c.Trusted = map[string][]netip.Addr{}
		}
		for _, a := range strings.Split(addrs, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(a))
			if err != nil {
				return c, fmt.Errorf("trustedHosts[%s] %q: not an IP address", name, a)
			}
			c.Trusted[name] = append(c.Trusted[name], ip)
		}
	}
	for name, sc := range s.Secrets {
		if len(sc.Hosts) == 0 || len(sc.Tenants) == 0 {
			return c, fmt.Errorf("secrets[%s]: name the hosts it may be sent to and the tenants that may use it (hosts, tenants)", name)
		}
		v := sc.Value
		if env, ok := strings.CutPrefix(v, "env:"); ok {
			var set bool
			if v, set = os.LookupEnv(env); !set {
				return c, fmt.Errorf("secrets[%s]: environment variable %s is not set", name, env)
			}
		}
		c.Secrets[name] = v
	}
	return c, nil
}
