package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/airlockrun/airlock/internal/netpolicy"
)

// DeniedError is a destination the policy refused.
type DeniedError struct {
	Name string // as the sandbox gave it (a name or an address literal)
	Port int
	// Addr is the address refused, when the name was allowed but none of its addresses was
	// (DNS rebinding, a trusted name's private address under another policy, ...).
	Addr     netip.Addr
	Decision netpolicy.Decision
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("egress to %s denied (%s): %s", hostPort(e.Name, e.Port), e.Decision.Rule, e.Decision.Reason)
}

// ResolveError is a destination name that did not resolve.
type ResolveError struct {
	Name string
	Err  error // nil: no IPv4 address
}

func (e *ResolveError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("cannot resolve %s: no IPv4 address", e.Name)
	}
	return fmt.Sprintf("cannot resolve %s: %v", e.Name, e.Err)
}

func (e *ResolveError) Unwrap() error { return e.Err }

// dial checks name:port against pol and connects to the first allowed address of the proxy's
// own resolution of name, trying the next allowed one when a connection fails. It returns the
// connection, the address reached and the decision that allowed the name. Errors are
// *DeniedError, *ResolveError, or the last connection failure.
//
// The address the sandbox itself connected to is never used: a forged Host or server name can
// only reach what the name resolves to, and a name resolving to a refused address (loopback,
// private, metadata: DNS rebinding) is refused.
func (p *Proxy) dial(ctx context.Context, pol *netpolicy.Policy, name string, port int) (net.Conn, netip.Addr, netpolicy.Decision, error) {
	name = canonical(name)
	d, at := p.check(pol, name, port)
	if !d.Allow {
		return nil, at, d, &DeniedError{Name: name, Port: port, Addr: at, Decision: d}
	}
	addrs, checkName, err := p.addrs(ctx, pol, name)
	if err != nil {
		return nil, netip.Addr{}, d, err
	}
	var refused *DeniedError
	var lastErr error
	for _, a := range addrs {
		a = a.Unmap()
		ad := pol.Addr(checkName, a)
		if ap := netip.AddrPortFrom(a, uint16(port)); p.isListener(ap) {
			ad = loop(ap)
		}
		if !ad.Allow {
			if refused == nil {
				refused = &DeniedError{Name: name, Port: port, Addr: a, Decision: ad}
			}
			continue
		}
		c, err := p.dialAddr(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return c, a, d, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if refused == nil && lastErr == nil {
		lastErr = errors.New("no address to try")
	}
	if lastErr != nil {
		return nil, netip.Addr{}, d, fmt.Errorf("connect to %s: %w", hostPort(name, port), lastErr)
	}
	return nil, refused.Addr, refused.Decision, refused
}

// check decides whether name (canonical) may be reached on port, before any resolution: the
// policy's Name, after refusing an address literal that is one of the proxy's listeners (which
// it returns).
func (p *Proxy) check(pol *netpolicy.Policy, name string, port int) (netpolicy.Decision, netip.Addr) {
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		if ap := netip.AddrPortFrom(a.Unmap(), uint16(port)); p.isListener(ap) {
			return loop(ap), ap.Addr()
		}
	}
	return pol.Name(name, port), netip.Addr{}
}

// loop is the refusal of a connection to one of the proxy's own listeners, which would come
// back to it.
func loop(ap netip.AddrPort) netpolicy.Decision {
	return netpolicy.Decision{Rule: RuleLoop, Reason: fmt.Sprintf("%s is the egress proxy itself", ap)}
}

// addrs returns the addresses to try for name and the name to check them for ("" for an
// address literal): an operator's trusted addresses, else the resolver's IPv4 ones.
func (p *Proxy) addrs(ctx context.Context, pol *netpolicy.Policy, name string) ([]netip.Addr, string, error) {
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return []netip.Addr{a}, "", nil
	}
	if a, ok := pol.Trusted(name); ok && len(a) > 0 {
		return a, name, nil
	}
	var r Resolver = net.DefaultResolver
	if p.Resolver != nil {
		r = p.Resolver
	}
	a, err := r.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		return nil, name, &ResolveError{Name: name, Err: err}
	}
	if len(a) == 0 {
		return nil, name, &ResolveError{Name: name}
	}
	return a, name, nil
}

func (p *Proxy) dialAddr(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	if p.Dial != nil {
		return p.Dial(ctx, "tcp", ap.String())
	}
	d := net.Dialer{Timeout: DialTimeout}
	return d.DialContext(ctx, "tcp", ap.String())
}

// canonical lower-cases a name and drops a trailing dot, as the policy does.
func canonical(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

// hostPort joins a name (or address literal) and a port.
func hostPort(name string, port int) string { return net.JoinHostPort(name, strconv.Itoa(port)) }

// splitHostPort splits an authority ("host", "host:port", "[v6]:port") into a canonical host
// and a port, def when the authority has none.
func splitHostPort(authority string, def int) (string, int, error) {
	host, ps := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, ps = h, p
	} else if strings.HasPrefix(authority, "[") && strings.HasSuffix(authority, "]") {
		host = authority[1 : len(authority)-1]
	}
	host = canonical(host)
	if host == "" {
		return "", 0, fmt.Errorf("no host in %q", authority)
	}
	if ps == "" {
		if def == 0 {
			return "", 0, fmt.Errorf("no port in %q", authority)
		}
		return host, def, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", authority)
	}
	return host, port, nil
}
