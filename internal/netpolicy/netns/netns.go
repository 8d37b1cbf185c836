// Package netns builds a sandbox's network: a network namespace owned by the host (so that no
// one inside, not even the sandbox's root, can change it), a veth pair to the host with addresses
// from a pool, a firewall inside the namespace that lets packets out only to airlock's own
// listeners on the host end (rules.go), and traffic shaping on both ends (shape.go). Everything
// goes through netlink and nftables from Go; nothing shells out.
//
// Nothing here outlives the sandbox: the namespace is held only by an open descriptor and by the
// sandbox's processes (it is never bind-mounted), the veth dies with it, and the rules live inside
// it. After a crash the kernel cleans up when the sandbox's last process exits.
package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// DefaultPool is the address pool when the configuration names none.
var DefaultPool = netip.MustParsePrefix("10.200.0.0/16")

// hostPrefix starts the host-side interface names; the slot number follows ("alk12").
const hostPrefix = "alk"

// SandboxIf is the interface's name inside the sandbox.
const SandboxIf = "eth0"

// Pool hands out /30 slots of an IPv4 prefix: in slot i the host end has the first usable
// address (the sandbox's gateway and airlock's listeners) and the sandbox the second. A slot is
// taken by creating its host interface, whose name carries the slot number, so the kernel
// arbitrates between airlock processes and a slot held by an orphaned sandbox stays taken.
type Pool struct {
	prefix netip.Prefix
	slots  int

	mu   sync.Mutex // guards next
	next int        // where the next search starts
}

// NewPool returns the pool of prefix (IPv4, /8 to /30).
func NewPool(prefix netip.Prefix) (*Pool, error) {
	prefix = prefix.Masked()
	if !prefix.Addr().Is4() || prefix.Bits() < 8 || prefix.Bits() > 30 {
		return nil, fmt.Errorf("network pool %s: must be an IPv4 prefix between /8 and /30", prefix)
	}
	return &Pool{prefix: prefix, slots: 1 << (32 - prefix.Bits() - 2)}, nil
}

// Prefix returns the pool's prefix.
func (p *Pool) Prefix() netip.Prefix { return p.prefix }

// Resolver is the address every sandbox's resolv.conf names. The firewall sends every DNS query
// of a sandbox, to whatever address, to airlock's DNS server on its gateway, so one fixed
// address serves all sandboxes (and their /etc can be shared).
func (p *Pool) Resolver() netip.Addr { return p.prefix.Addr().Next() }

func (p *Pool) addrs(slot int) (gw, sb netip.Addr) {
	b := p.prefix.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot) * 4
	gw = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v + 1)})
	return gw, gw.Next()
}

// Link is one sandbox's network.
type Link struct {
	NS      *os.File   // the namespace; processes started by Run join it
	Slot    int        // the pool slot
	HostIf  string     // the host end's name
	Gateway netip.Addr // the host end's address: airlock's listeners
	Addr    netip.Addr // the sandbox's address

	admitMu  sync.Mutex               // guards admitted, pruned and noLog; serialises writes to the firewall
	admitted map[netip.Addr]time.Time // what Admit put in the admitted set, until when
	pruned   time.Time                // when expired entries were last dropped from admitted
	noLog    bool                     // the kernel has no nfnetlink_log: refusals are not reported
}

// Config is what a sandbox's network is made with.
type Config struct {
	Rules Rules
	// Mbps shapes traffic in both directions; 0 leaves it unshaped.
	Mbps int64
}

// Create makes a sandbox's network: namespace, veth, addresses, routes, firewall and shaping.
// On error nothing is left behind.
func (p *Pool) Create(cfg Config) (*Link, error) {
	ns, err := newNamespace()
	if err != nil {
		return nil, err
	}
	l := &Link{NS: ns}
	if err := p.attach(l); err != nil {
		ns.Close()
		return nil, err
	}
	if err := l.setup(cfg); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// attach takes a free slot by creating its veth pair, the peer directly inside the namespace.
func (p *Pool) attach(l *Link) error {
	p.mu.Lock()
	start := p.next
	p.mu.Unlock()
	for i := 0; i < p.slots; i++ {
		slot := (start + i) % p.slots
		name := hostPrefix + strconv.Itoa(slot)
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: name, TxQLen: 1000},
			PeerName:      SandboxIf,
			PeerNamespace: netlink.NsFd(int(l.NS.Fd())),
		}
		err := netlink.LinkAdd(veth)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create veth %s: %w", name, err)
		}
		p.mu.Lock()
		p.next = slot + 1
		p.mu.Unlock()
		l.Slot, l.HostIf = slot, name
		l.Gateway, l.Addr = p.addrs(slot)
		return nil
	}
	return fmt.Errorf("network pool %s is exhausted (%d sandboxes)", p.prefix, p.slots)
}

func (l *Link) setup(cfg Config) error {
	host, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return fmt.Errorf("veth %s: %w", l.HostIf, err)
	}
	in, err := netlink.NewHandleAt(vnetns.NsHandle(int(l.NS.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in sandbox namespace: %w", err)
	}
	defer in.Close()
	lo, err := in.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	eth, err := in.LinkByName(SandboxIf)
	if err != nil {
		return fmt.Errorf("sandbox veth: %w", err)
	}
	// No IPv6 link-local addresses: the sandbox has no IPv6 route, and none to the host's end.
	_ = netlink.LinkSetIP6AddrGenMode(host, 1)
	_ = in.LinkSetIP6AddrGenMode(eth, 1)
	steps := []struct {
		what string
		do   func() error
	}{
		{"host address", func() error { return netlink.AddrAdd(host, addr(l.Gateway)) }},
		{"host up", func() error { return netlink.LinkSetUp(host) }},
		{"loopback up", func() error { return in.LinkSetUp(lo) }},
		{"sandbox address", func() error { return in.AddrAdd(eth, addr(l.Addr)) }},
		{"sandbox up", func() error { return in.LinkSetUp(eth) }},
		{"default route", func() error {
			return in.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: l.Gateway.AsSlice()})
		}},
		{"firewall", func() error { return l.setRules(cfg.Rules, false, nil) }},
		{"shaping", func() error { return l.shape(in, eth, host, cfg.Mbps) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("sandbox network (%s): %w", s.what, err)
		}
	}
	return nil
}

func addr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: netipNet(netip.PrefixFrom(a, 30))}
}

// Run calls fn on a thread that is inside the sandbox's namespace: a process fn starts is born
// there. fn must not block for long.
func (l *Link) Run(fn func() error) error {
	return onThread(func() error { return unix.Setns(int(l.NS.Fd()), unix.CLONE_NEWNET) }, fn)
}

// onThread runs fn on a locked thread after enter moved it to another network namespace, then
// moves it back. A thread that cannot go back stays locked, so it dies with the goroutine and
// never runs anything else.
func onThread(enter, fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("own network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := enter(); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("leave network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Close deletes the host end (and with it the pair) and lets go of the namespace, which the
// kernel removes once the sandbox's processes are gone.
func (l *Link) Close() error {
	var err error
	if l.HostIf != "" {
		if lk, lerr := netlink.LinkByName(l.HostIf); lerr == nil {
			err = netlink.LinkDel(lk)
		}
	}
	if l.NS != nil {
		l.NS.Close()
	}
	return err
}

// Open returns the network of a running sandbox whose process pid is in the namespace and
// whose host end is slot's (a restarted daemon adopting it). It checks that the slot's host
// interface exists and is the peer of the namespace's veth.
func (p *Pool) Open(pid, slot int) (*Link, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("network namespace of %d: %w", pid, err)
	}
	l := &Link{NS: ns, Slot: slot, HostIf: hostPrefix + strconv.Itoa(slot)}
	l.Gateway, l.Addr = p.addrs(slot)
	host, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("veth %s: %w", l.HostIf, err)
	}
	in, err := netlink.NewHandleAt(vnetns.NsHandle(int(ns.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		ns.Close()
		return nil, err
	}
	defer in.Close()
	eth, err := in.LinkByName(SandboxIf)
	if err != nil || eth.Attrs().ParentIndex != host.Attrs().Index {
		ns.Close()
		return nil, fmt.Errorf("veth %s is not the network of process %d", l.HostIf, pid)
	}
	return l, nil
}

// newNamespace makes a network namespace and returns a descriptor holding it.
func newNamespace() (*os.File, error) {
	var ns *os.File
	err := onThread(func() error { return unix.Unshare(unix.CLONE_NEWNET) }, func() error {
		f, err := os.Open("/proc/thread-self/ns/net")
		ns = f
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("new network namespace: %w", err)
	}
	return ns, nil
}

func netipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// HostLinks lists the host ends of sandbox networks on this host (for leak checks and doctor).
func HostLinks() ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, lk := range links {
		if n := lk.Attrs().Name; strings.HasPrefix(n, hostPrefix) && lk.Type() == "veth" {
			names = append(names, n)
		}
	}
	return names, nil
}
