package netns

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/netpolicy"
)

// Ports are airlock's listeners on a sandbox's gateway.
type Ports struct {
	DNS   uint16 // UDP and TCP
	Proxy uint16 // the explicit HTTP proxy (HTTP_PROXY, HTTPS_PROXY)
	HTTP  uint16 // port-80 traffic that ignored the proxy variables
	TLS   uint16 // port-443 traffic that ignored them
	TCP   uint16 // egress open: every other TCP port
}

// DefaultPorts are the listener ports. They are on the gateway address, which only the
// sandbox reaches, so the same ports serve every sandbox.
var DefaultPorts = Ports{DNS: 53, Proxy: 3128, HTTP: 3080, TLS: 3443, TCP: 3000}

// Rules is a sandbox's firewall. Whatever the egress policy, a packet leaves the namespace only
// towards the gateway's listeners; what may go further is the proxy's and the DNS server's
// decision. Everything else is refused at connect (TCP reset or ICMP administratively
// prohibited), so programs fail fast instead of hanging, or believing they connected.
//
// Restricted egress redirects port 80 and 443 to the proxy only for the addresses airlock's DNS
// answered for allowed names (the admitted set, filled through Admit); an address the sandbox
// did not get from airlock's DNS — an IP literal, a private or metadata address — is refused at
// connect. Open egress redirects every TCP connection except to the ranges the policy refuses
// whatever the name (netpolicy.Refused4).
type Rules struct {
	Egress     string // api.EgressNone, EgressRestricted or EgressOpen
	BlockLocal bool   // egress open: private ranges are refused too
	Ports      Ports
}

const (
	tableName = "airlock"
	// admitSet is the set of addresses admitted in restricted egress. Its name is also the
	// version of the rules: rules from an airlock without it are rewritten on adoption.
	admitSet = "admitted4"
	// admitSetID names the set inside the transaction that creates it (chosen here: the
	// library's own counter is a package variable shared without a lock).
	admitSetID = 1
	// MaxAdmitted bounds the admitted set; beyond it Admit fails (and the DNS answer with it).
	MaxAdmitted = 65536
	// admitDefault is the timeout of an element added without one (Admit always gives one).
	admitDefault = time.Hour
)

// SetRules replaces the namespace's firewall in one transaction: no packet ever sees a mix of
// the old rules and the new. The admitted set starts empty.
func (l *Link) SetRules(r Rules) error {
	l.admitMu.Lock()
	defer l.admitMu.Unlock()
	return l.setRules(r, true, nil)
}

// Readopt writes r over the firewall an existing namespace has (a restarted daemon adopting the
// sandbox; the rules may be an older airlock's), in one transaction that keeps the admitted
// addresses and the time they have left, so that the sandbox's cached DNS answers still work.
func (l *Link) Readopt(r Rules) error {
	l.admitMu.Lock()
	defer l.admitMu.Unlock()
	var keep []nftables.SetElement
	if c, err := l.nft(); err == nil {
		// A missing set (rules without one) or an unreadable one: nothing to keep.
		if elems, err := c.GetSetElements(admitted()); err == nil {
			for _, e := range elems {
				if e.Expires > 0 {
					keep = append(keep, nftables.SetElement{Key: e.Key, Timeout: e.Expires})
				}
			}
		}
	}
	return l.setRules(r, true, keep)
}

func (l *Link) nft() (*nftables.Conn, error) {
	return nftables.New(nftables.WithNetNSFd(int(l.NS.Fd())))
}

func admitted() *nftables.Set {
	return &nftables.Set{Table: &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet},
		Name: admitSet, HasTimeout: true}
}

// setRules writes the rules, with keep in the admitted set; replace first deletes the table the
// namespace has. A new namespace has none, and deleting a table costs an RCU grace period
// (milliseconds on some hosts). The caller holds admitMu. A kernel without nfnetlink_log
// refuses the rule that reports refusals: the rules are then written without it.
func (l *Link) setRules(r Rules, replace bool, keep []nftables.SetElement) error {
	if !l.noLog {
		err := l.writeRules(r, replace, keep, true)
		if err == nil {
			return nil
		}
		if lerr := l.writeRules(r, replace, keep, false); lerr != nil {
			return err
		}
		l.noLog = true
		return nil
	}
	return l.writeRules(r, replace, keep, false)
}

func (l *Link) writeRules(r Rules, replace bool, keep []nftables.SetElement, log bool) error {
	c, err := l.nft()
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	if replace {
		c.AddTable(t)
		c.DelTable(t)
	}
	c.AddTable(t)
	set := &nftables.Set{Table: t, Name: admitSet, ID: admitSetID, KeyType: nftables.TypeIPAddr,
		HasTimeout: true, Timeout: admitDefault, Size: MaxAdmitted}
	if err := c.AddSet(set, keep); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	accept := nftables.ChainPolicyAccept
	drop := nftables.ChainPolicyDrop
	nat := c.AddChain(&nftables.Chain{Name: "nat_out", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	in := c.AddChain(&nftables.Chain{Name: "in", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	add := func(ch *nftables.Chain, e ...expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e}) }
	gw, p := l.Gateway, r.Ports

	// Loopback is the sandbox's own business.
	add(out, cat(oifLo(), verdict(expr.VerdictAccept))...)
	add(in, cat(iifLo(), verdict(expr.VerdictAccept))...)
	if r.Egress != api.EgressNone {
		// Every DNS query, to whatever server, goes to airlock's.
		add(nat, cat(ipv4(), l4(unix.IPPROTO_UDP), dport(53), dnat(gw, p.DNS))...)
		add(nat, cat(ipv4(), l4(unix.IPPROTO_TCP), dport(53), dnat(gw, p.DNS))...)
		switch r.Egress {
		case api.EgressRestricted:
			// Web traffic that ignored the proxy variables still meets the proxy, if it goes to
			// an address airlock's DNS gave out (a trusted host's may be a loopback one). The
			// rest is not redirected, so the filter below refuses it (or, on loopback, lets
			// it reach the sandbox's own servers).
			for _, fwd := range [][2]uint16{{80, p.HTTP}, {443, p.TLS}} {
				add(nat, cat(ipv4(), daddrNot(gw), l4(unix.IPPROTO_TCP), dport(fwd[0]), daddrIn(set), dnat(gw, fwd[1]))...)
			}
		case api.EgressOpen:
			// Accepted here means not redirected: the filter refuses it (loopback excepted).
			for _, pfx := range netpolicy.Refused4(r.BlockLocal) {
				add(nat, cat(ipv4(), daddrInPrefix(pfx), verdict(expr.VerdictAccept))...)
			}
			add(nat, cat(ipv4(), daddrNot(gw), l4(unix.IPPROTO_TCP), dnat(gw, p.TCP))...)
		}
		// Replies to what the sandbox opened, and nothing that reaches in on its own.
		add(in, cat(ctEstablished(), verdict(expr.VerdictAccept))...)
		add(out, cat(ctEstablished(), verdict(expr.VerdictAccept))...)
		add(out, cat(ipv4(), daddr(gw), l4(unix.IPPROTO_UDP), dport(p.DNS), verdict(expr.VerdictAccept))...)
		tcp := []uint16{p.DNS, p.Proxy, p.HTTP, p.TLS}
		if r.Egress == api.EgressOpen {
			tcp = append(tcp, p.TCP)
		}
		for _, port := range tcp {
			add(out, cat(ipv4(), daddr(gw), l4(unix.IPPROTO_TCP), dport(port), verdict(expr.VerdictAccept))...)
		}
	}
	// IPv6 included: the sandbox has no IPv6 address or route, and these rules are the second
	// wall.
	if log {
		// Reported (WatchRefusals), at a bounded rate; the rules below refuse it either way.
		add(out, &expr.Limit{Type: expr.LimitTypePkts, Rate: logRate, Unit: expr.LimitTimeSecond, Burst: logRate},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_SNAPLEN, Group: logGroup, Snaplen: logSnaplen})
	}
	add(out, cat(l4(unix.IPPROTO_TCP), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})...)
	add(out, &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	l.admitted = map[netip.Addr]time.Time{}
	now := time.Now()
	for _, e := range keep {
		if a, ok := netip.AddrFromSlice(e.Key); ok {
			l.admitted[a] = now.Add(e.Timeout)
		}
	}
	return nil
}

func cat(parts ...any) []expr.Any {
	var e []expr.Any
	for _, p := range parts {
		switch v := p.(type) {
		case []expr.Any:
			e = append(e, v...)
		case expr.Any:
			e = append(e, v)
		}
	}
	return e
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func cmpEq(data []byte) expr.Any {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data}
}

func oifLo() []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, cmpEq(ifname("lo"))}
}

func iifLo() []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, cmpEq(ifname("lo"))}
}

func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

func ipv4() []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, cmpEq([]byte{unix.NFPROTO_IPV4})}
}

func l4(proto byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmpEq([]byte{proto})}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		cmpEq(binaryutil.BigEndian.PutUint16(p)),
	}
}

func daddrLoad() expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
}

func daddr(a netip.Addr) []expr.Any { return []expr.Any{daddrLoad(), cmpEq(a.AsSlice())} }

func daddrIn(s *nftables.Set) []expr.Any {
	return []expr.Any{daddrLoad(), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID}}
}

func daddrInPrefix(p netip.Prefix) []expr.Any {
	mask := net.CIDRMask(p.Bits(), 32)
	return []expr.Any{
		daddrLoad(),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		cmpEq(p.Masked().Addr().AsSlice()),
	}
}

func daddrNot(a netip.Addr) []expr.Any {
	return []expr.Any{daddrLoad(), &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: a.AsSlice()}}
}

func ctEstablished() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
	}
}

func dnat(a netip.Addr, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}
