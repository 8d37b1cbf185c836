package netns

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/airlockrun/airlock/api"
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
// decision. Everything else is rejected at once (TCP reset or ICMP administratively
// prohibited), so programs fail fast instead of hanging.
type Rules struct {
	Egress string // api.EgressNone, EgressRestricted or EgressOpen
	Ports  Ports
}

const tableName = "airlock"

// SetRules replaces the namespace's firewall in one transaction: no packet ever sees a mix of
// the old rules and the new.
func (l *Link) SetRules(r Rules) error { return l.setRules(r, true) }

// setRules writes the rules; replace first deletes the table the namespace has. A new namespace
// has none, and deleting a table costs an RCU grace period (milliseconds on some hosts).
func (l *Link) setRules(r Rules, replace bool) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(l.NS.Fd())))
	if err != nil {
		return err
	}
	t := &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet}
	if replace {
		c.AddTable(t)
		c.DelTable(t)
	}
	c.AddTable(t)
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
			// Web traffic that ignored the proxy variables still meets the proxy.
			add(nat, cat(ipv4(), daddrNot(gw), l4(unix.IPPROTO_TCP), dport(80), dnat(gw, p.HTTP))...)
			add(nat, cat(ipv4(), daddrNot(gw), l4(unix.IPPROTO_TCP), dport(443), dnat(gw, p.TLS))...)
		case api.EgressOpen:
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
	add(out, cat(l4(unix.IPPROTO_TCP), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})...)
	add(out, &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
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
