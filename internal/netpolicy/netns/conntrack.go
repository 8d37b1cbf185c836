package netns

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// OriginalDst returns where the sandbox meant to connect when its connection from remote (its
// address and port, as the gateway's listener saw them) was redirected to the gateway: the
// redirect happened in the sandbox's namespace, so the answer is in that namespace's conntrack
// table, not in the accepted socket.
func (l *Link) OriginalDst(remote netip.AddrPort) (netip.AddrPort, error) {
	h, err := netlink.NewHandleAt(vnetns.NsHandle(int(l.NS.Fd())), unix.NETLINK_NETFILTER)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("conntrack: %w", err)
	}
	defer h.Close()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("conntrack: %w", err)
	}
	for _, f := range flows {
		src, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		if f.Forward.Protocol == unix.IPPROTO_TCP && f.Forward.SrcPort == remote.Port() && src.Unmap() == remote.Addr().Unmap() {
			dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
			return netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("conntrack: no connection from %s", remote)
}
