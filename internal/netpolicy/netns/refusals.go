package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Refusal is one packet the firewall refused: the first of a connection, or a datagram.
type Refusal struct {
	Proto string         // "tcp", "udp", "icmp", "icmpv6", or "ip/N" for IP protocol N
	Dst   netip.AddrPort // the port is 0 for protocols without one
}

// The firewall logs refused packets to this NFLOG group of the sandbox's namespace (groups are
// per namespace), at most logRate a second (with a burst of as many): refusals beyond that are
// still refused, not reported.
const (
	logGroup   = 1
	logRate    = 50
	logSnaplen = 64 // bytes of each packet: IP and transport headers
)

// nfnetlink_log (linux/netfilter/nfnetlink_log.h); golang.org/x/sys/unix does not have them.
const (
	nfnlSubsysULOG    = 4
	nfulnlMsgPacket   = 0
	nfulnlMsgConfig   = 1
	nfulaCfgCmd       = 1
	nfulaCfgMode      = 2
	nfulaCfgQThresh   = 5
	nfulnlCfgCmdBind  = 1
	nfulnlCopyPacket  = 2
	nfulaPayload      = 9
	nfgenmsgLen       = 4
	logReadBufferSize = 256 << 10
)

// WatchRefusals calls fn for each packet the firewall refuses (in the order they come, from
// one goroutine) until stop is called. Refusals of more than logRate a second are not
// reported, nor any when the kernel's queue to airlock overflows.
func (l *Link) WatchRefusals(fn func(Refusal)) (stop func() error, err error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(l.NS.Fd())})
	if err != nil {
		return nil, fmt.Errorf("nflog: %w", err)
	}
	_ = c.SetReadBuffer(logReadBufferSize)
	cfg := func(attrs ...netlink.Attribute) error {
		b, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return err
		}
		hdr := []byte{unix.AF_UNSPEC, 0, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], logGroup)
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysULOG<<8 | nfulnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge},
			Data:   append(hdr, b...),
		})
		return err
	}
	mode := make([]byte, 6) // struct nfulnl_msg_config_mode: copy_range (be32), copy_mode, pad
	binary.BigEndian.PutUint32(mode, logSnaplen)
	mode[4] = nfulnlCopyPacket
	// One packet a message: by default the kernel gathers 100, or waits a second.
	qthresh := binary.BigEndian.AppendUint32(nil, 1)
	if err := errors.Join(cfg(netlink.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}),
		cfg(netlink.Attribute{Type: nfulaCfgMode, Data: mode}, netlink.Attribute{Type: nfulaCfgQThresh, Data: qthresh})); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog group %d: %w", logGroup, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msgs, err := c.Receive()
			if err != nil {
				if errors.Is(err, unix.ENOBUFS) {
					continue // the kernel dropped some: report what comes next
				}
				return // closed
			}
			for _, m := range msgs {
				if m.Header.Type == netlink.HeaderType(nfnlSubsysULOG<<8|nfulnlMsgPacket) {
					if r, ok := parseLogged(m.Data); ok {
						fn(r)
					}
				}
			}
		}
	}()
	return func() error {
		err := c.Close()
		<-done
		return err
	}, nil
}

// parseLogged reads where a logged packet was going from an NFULNL_MSG_PACKET's payload.
func parseLogged(data []byte) (Refusal, bool) {
	if len(data) < nfgenmsgLen {
		return Refusal{}, false
	}
	ad, err := netlink.NewAttributeDecoder(data[nfgenmsgLen:])
	if err != nil {
		return Refusal{}, false
	}
	for ad.Next() {
		if ad.Type() == nfulaPayload {
			return parsePacket(ad.Bytes())
		}
	}
	return Refusal{}, false
}

// parsePacket reads the protocol, destination address and port of an IPv4 or IPv6 packet
// (IPv6 without extension headers; others are reported without a port).
func parsePacket(p []byte) (Refusal, bool) {
	if len(p) < 1 {
		return Refusal{}, false
	}
	var (
		proto byte
		dst   netip.Addr
		l4    []byte
	)
	switch p[0] >> 4 {
	case 4:
		ihl := int(p[0]&0x0f) * 4
		if len(p) < 20 || ihl < 20 || len(p) < ihl {
			return Refusal{}, false
		}
		proto, dst, l4 = p[9], netip.AddrFrom4([4]byte(p[16:20])), p[ihl:]
	case 6:
		if len(p) < 40 {
			return Refusal{}, false
		}
		proto, dst, l4 = p[6], netip.AddrFrom16([16]byte(p[24:40])), p[40:]
	default:
		return Refusal{}, false
	}
	r := Refusal{Proto: fmt.Sprintf("ip/%d", proto)}
	port := uint16(0)
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		r.Proto = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[proto]
		if len(l4) >= 4 {
			port = binary.BigEndian.Uint16(l4[2:4])
		}
	case unix.IPPROTO_ICMP:
		r.Proto = "icmp"
	case unix.IPPROTO_ICMPV6:
		r.Proto = "icmpv6"
	}
	r.Dst = netip.AddrPortFrom(dst, port)
	return r, true
}
