// Package egress gives sandboxes their network (docs/network.md#network-policy): for each one a namespace and veth
// (package netns), and on the veth's host end airlock's listeners, the egress proxy (package
// proxy) and the DNS server (package dns), serving that sandbox's policy (package netpolicy).
// Isolation levels call Attach before the sandbox's first instruction and Close at teardown; the
// daemon receives every decision through the Sink.
package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/netpolicy"
	"github.com/airlockrun/airlock/internal/netpolicy/dns"
	"github.com/airlockrun/airlock/internal/netpolicy/netns"
	"github.com/airlockrun/airlock/internal/netpolicy/proxy"
)

// Config is the operator's network configuration.
type Config struct {
	// Pool is the IPv4 prefix sandbox networks take /30s from. Default 10.200.0.0/16.
	Pool netip.Prefix
	// Resolvers are the upstream DNS servers ("host:port") airlock asks for allowed names.
	// Empty: the host's /etc/resolv.conf.
	Resolvers []string
	// Trusted are names that resolve to fixed addresses, bypassing DNS; only they may point at
	// private addresses (never metadata ones), for sandboxes whose policy allows the name.
	Trusted map[string][]netip.Addr
	// Secrets are the values credentials may name (api.Credential.Secret).
	Secrets map[string]string
	// UpstreamCAFile, when set, is a PEM bundle trusted (besides the system's roots) when
	// airlock itself speaks TLS upstream, to inject credentials.
	UpstreamCAFile string
}

// How long an address airlock's DNS answered stays admitted by the sandbox's firewall: the
// answer's TTL, within these bounds. The floor is well above the TTLs airlock answers with
// because programs keep answers longer than their TTL (connection pools, runtimes' own DNS
// caches); a long admission costs little, since the proxy behind the firewall still checks
// the name of every connection and dials its own resolution of it. A policy change empties
// the set at once.
const (
	AdmitFloor   = 5 * time.Minute
	AdmitCeiling = time.Hour
)

// errPolicyChanged refuses to admit addresses answered under a policy that is no longer the
// sandbox's.
var errPolicyChanged = errors.New("the sandbox's network policy changed while the answer was made; ask again")

// Sink receives every decision, with the sandbox it was made for.
type Sink func(sandboxID string, ev netpolicy.Event)

// Service attaches sandboxes to the network.
type Service struct {
	pool     *netns.Pool
	opts     netpolicy.Options
	resolver *net.Resolver
	upstream *tls.Config
	dns      *dns.Server
	log      *slog.Logger
	sink     atomic.Pointer[Sink]
	// admitFloor and admitCeiling bound admissions (AdmitFloor, AdmitCeiling; tests shorten them).
	admitFloor, admitCeiling time.Duration
}

// New checks cfg and returns the service. It touches no network state until Attach.
func New(cfg Config, log *slog.Logger) (*Service, error) {
	if !cfg.Pool.IsValid() {
		cfg.Pool = netns.DefaultPool
	}
	pool, err := netns.NewPool(cfg.Pool)
	if err != nil {
		return nil, err
	}
	for name, addrs := range cfg.Trusted {
		for _, a := range addrs {
			if netpolicy.Classify(a) == netpolicy.ClassMetadata {
				return nil, fmt.Errorf("network.trustedHosts[%s]: %s is a metadata address, which no sandbox may reach", name, a)
			}
		}
	}
	res, err := resolver(cfg.Resolvers)
	if err != nil {
		return nil, err
	}
	var upstream *tls.Config
	if cfg.UpstreamCAFile != "" {
		pem, err := os.ReadFile(cfg.UpstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("network.upstreamCAFile: %w", err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("network.upstreamCAFile %s: no certificate found", cfg.UpstreamCAFile)
		}
		upstream = &tls.Config{RootCAs: roots}
	}
	return &Service{
		pool:     pool,
		opts:     netpolicy.Options{Trusted: cfg.Trusted, Secrets: cfg.Secrets, IsHostAddr: (&hostAddrs{}).has},
		resolver: res,
		upstream: upstream,
		dns:      &dns.Server{Resolver: res, Log: log},
		log:      log,

		admitFloor:   AdmitFloor,
		admitCeiling: AdmitCeiling,
	}, nil
}

// resolver asks the configured servers in turn, or the host's.
func resolver(servers []string) (*net.Resolver, error) {
	if len(servers) == 0 {
		return net.DefaultResolver, nil
	}
	for i, s := range servers {
		if _, err := netip.ParseAddrPort(s); err != nil {
			return nil, fmt.Errorf("network.resolvers[%d]: %q is not an address:port", i, s)
		}
	}
	var next atomic.Uint32
	d := &net.Dialer{Timeout: 3 * time.Second}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, servers[int(next.Add(1))%len(servers)])
	}}, nil
}

// Check makes and removes one sandbox network (namespace, veth, firewall, shaping), to tell
// whether this host can give sandboxes a network at all (airlock doctor).
func (s *Service) Check() error {
	l, err := s.pool.Create(netns.Config{Rules: netns.Rules{Egress: api.EgressRestricted, Ports: netns.DefaultPorts}, Mbps: 100})
	if err != nil {
		return err
	}
	return l.Close()
}

// Pool is the prefix sandbox networks are taken from.
func (s *Service) Pool() netip.Prefix { return s.pool.Prefix() }

// SetSink directs every decision to fn (the daemon records them as the sandbox's events).
func (s *Service) SetSink(fn Sink) { s.sink.Store(&fn) }

// Resolver is the address every networked sandbox's resolv.conf names.
func (s *Service) Resolver() netip.Addr { return s.pool.Resolver() }

// Compile checks a sandbox's network spec against the operator's configuration, without
// attaching anything (for validation before a sandbox is made).
func (s *Service) Compile(n api.Network) (*netpolicy.Policy, error) {
	return netpolicy.Compile(n, s.opts)
}

// Gateway is one sandbox's attachment: its network and airlock's listeners on it.
type Gateway struct {
	Link *netns.Link
	id   string
	svc  *Service

	policy atomic.Pointer[netpolicy.Policy]

	// updateMu serialises Update and Admit (so that no address answered under an old policy is
	// admitted under a new one); guards rules.
	updateMu sync.Mutex
	rules    netns.Rules // the firewall's rules now

	proxy     *proxy.Proxy // this sandbox's own, so that closing it ends exactly its connections
	listeners []func() error

	endOnce sync.Once
	endErr  error
}

var (
	_ proxy.Sandbox = (*Gateway)(nil)
	_ dns.Sandbox   = (*Gateway)(nil)
	_ dns.Admitter  = (*Gateway)(nil)
)

// Attach makes sandbox id's network with policy n, shaped to mbps, and starts serving it. The
// firewall is in place before Attach returns, so it is before the sandbox's first instruction.
func (s *Service) Attach(id string, n api.Network, mbps int64) (*Gateway, error) {
	pol, err := s.Compile(n)
	if err != nil {
		return nil, err
	}
	rules := rulesOf(pol)
	l, err := s.pool.Create(netns.Config{Rules: rules, Mbps: mbps})
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrSetup)
	}
	return s.serve(id, l, pol, rules)
}

// Adopt takes over the network of a running sandbox (after a daemon restart): pid is a process
// inside it, slot the pool slot it was given (Gateway.Link.Slot).
func (s *Service) Adopt(id string, pid, slot int, n api.Network) (*Gateway, error) {
	pol, err := s.Compile(n)
	if err != nil {
		return nil, err
	}
	l, err := s.pool.Open(pid, slot)
	if err != nil {
		return nil, err
	}
	// The rules are written again (they may be an older airlock's), keeping what the sandbox
	// was admitted to: its programs may hold DNS answers from before the restart.
	rules := rulesOf(pol)
	if err := l.Readopt(rules); err != nil {
		l.NS.Close()
		return nil, fmt.Errorf("sandbox %s: %w: %w", id, err, errdefs.ErrSetup)
	}
	return s.serve(id, l, pol, rules)
}

// rulesOf is the firewall of policy pol.
func rulesOf(pol *netpolicy.Policy) netns.Rules {
	return netns.Rules{Egress: pol.Egress, BlockLocal: pol.BlockLocal, Ports: netns.DefaultPorts}
}

func (s *Service) serve(id string, l *netns.Link, pol *netpolicy.Policy, rules netns.Rules) (*Gateway, error) {
	g := &Gateway{Link: l, id: id, svc: s, rules: rules}
	g.policy.Store(pol)
	px := &proxy.Proxy{Resolver: s.resolver, UpstreamTLS: s.upstream, Log: s.log.With("sandbox", id)}
	g.proxy = px
	p := netns.DefaultPorts
	host := l.Gateway.String()
	tcp := func(port uint16, serve func(net.Listener) error) error {
		ln, err := net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return err
		}
		g.listeners = append(g.listeners, ln.Close)
		go g.run(serve, ln)
		return nil
	}
	origDst := func(c net.Conn) (netip.AddrPort, error) {
		return l.OriginalDst(c.RemoteAddr().(*net.TCPAddr).AddrPort())
	}
	err := errors.Join(
		tcp(p.Proxy, func(ln net.Listener) error { return px.ServeHTTP(ln, g) }),
		tcp(p.HTTP, func(ln net.Listener) error { return px.ServeTransparentHTTP(ln, g) }),
		tcp(p.TLS, func(ln net.Listener) error { return px.ServeTransparentTLS(ln, g) }),
		tcp(p.TCP, func(ln net.Listener) error { return px.ServeTransparentTCP(ln, g, origDst) }),
		tcp(p.DNS, func(ln net.Listener) error { return s.dns.ServeTCP(ln, g) }),
	)
	if err == nil {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp4", net.JoinHostPort(host, strconv.Itoa(int(p.DNS)))); err == nil {
			g.listeners = append(g.listeners, pc.Close)
			go func() {
				if err := s.dns.ServeUDP(pc, g); err != nil {
					s.log.Warn("dns server stopped", "sandbox", id, "err", err)
				}
			}()
		}
	}
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("sandbox %s: listeners on %s: %w: %w", id, host, err, errdefs.ErrSetup)
	}
	// What the firewall refuses at connect never reaches the proxy: it is reported from here.
	if stop, err := l.WatchRefusals(g.refused); err != nil {
		s.log.Warn("connections refused by the firewall will not be reported", "sandbox", id, "err", err)
	} else {
		g.listeners = append(g.listeners, stop)
	}
	return g, nil
}

// refused reports a connection the firewall refused, with the rule that explains it.
func (g *Gateway) refused(r netns.Refusal) {
	d := g.Policy().Refused(r.Proto, r.Dst)
	g.Event(netpolicy.Event{Kind: netpolicy.KindConnect, Proto: r.Proto, Addr: r.Dst.Addr().Unmap(),
		Port: int(r.Dst.Port()), Rule: d.Rule, Reason: d.Reason})
}

func (g *Gateway) run(serve func(net.Listener) error, ln net.Listener) {
	if err := serve(ln); err != nil {
		g.svc.log.Warn("egress listener stopped", "sandbox", g.id, "addr", ln.Addr().String(), "err", err)
	}
}

// Policy implements proxy.Sandbox and dns.Sandbox: the policy in force now.
func (g *Gateway) Policy() *netpolicy.Policy { return g.policy.Load() }

// Event implements proxy.Sandbox and dns.Sandbox.
func (g *Gateway) Event(ev netpolicy.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if ev.Start.IsZero() {
		ev.Start = ev.Time
	}
	if fn := g.svc.sink.Load(); fn != nil {
		(*fn)(g.id, ev)
	}
}

// Admit implements dns.Admitter: the firewall admits addrs, answered under pol, for ttl within
// the service's bounds.
func (g *Gateway) Admit(pol *netpolicy.Policy, addrs []netip.Addr, ttl time.Duration) error {
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	if g.policy.Load() != pol {
		return errPolicyChanged
	}
	return g.Link.Admit(addrs, min(max(ttl, g.svc.admitFloor), g.svc.admitCeiling))
}

// Update changes the policy live: the new rules and the new policy are in force when it
// returns; connections already open stay open. The firewall forgets every address it admitted
// (the sandbox's next lookups admit them again, under the new policy).
func (g *Gateway) Update(n api.Network) error {
	pol, err := g.svc.Compile(n)
	if err != nil {
		return err
	}
	rules := rulesOf(pol)
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	if rules != g.rules {
		err = g.Link.SetRules(rules)
	} else {
		err = g.Link.Forget()
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: %w: %w", g.id, err, errdefs.ErrSetup)
	}
	g.rules = rules
	g.policy.Store(pol)
	return nil
}

// ProxyURL is the sandbox's explicit proxy, on the host's end of its veth: the daemon sends an
// http tool's requests through it, so that they leave as the sandbox's own would.
func (g *Gateway) ProxyURL() string {
	return "http://" + net.JoinHostPort(g.Link.Gateway.String(), strconv.Itoa(int(netns.DefaultPorts.Proxy)))
}

// Env is what the sandbox's processes are told: the explicit proxy, for the programs that use it.
func (g *Gateway) Env() map[string]string {
	u := g.ProxyURL()
	no := "localhost,127.0.0.1,::1"
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "http_proxy": u, "https_proxy": u,
		"NO_PROXY": no, "no_proxy": no,
	}
}

// Close stops the listeners and removes the network. It may be called more than once.
func (g *Gateway) Close() error { return g.end(g.Link.Close) }

// Release stops serving the sandbox but leaves its network as it is, for another airlock
// process to adopt (netns.Pool.Open).
func (g *Gateway) Release() error { return g.end(g.Link.NS.Close) }

func (g *Gateway) end(then func() error) error {
	g.endOnce.Do(func() {
		var errs []error
		for _, c := range g.listeners {
			errs = append(errs, c())
		}
		g.proxy.Close()
		g.endErr = errors.Join(append(errs, then())...)
	})
	return g.endErr
}

// hostAddrs is the host's own addresses, re-read at most once a second.
type hostAddrs struct {
	mu  sync.Mutex // guards the fields below
	at  time.Time
	set map[netip.Addr]bool
}

func (h *hostAddrs) has(a netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) > time.Second {
		h.at, h.set = time.Now(), map[netip.Addr]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, x := range addrs {
				if n, ok := x.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						h.set[ip.Unmap()] = true
					}
				}
			}
		}
	}
	return h.set[a]
}
