package netns

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// shape puts a token bucket on both ends of the pair: on the sandbox's end it bounds what the
// sandbox sends, on the host's end what it receives. Both qdiscs are in namespaces the sandbox
// cannot administer.
func (l *Link) shape(in *netlink.Handle, eth, host netlink.Link, mbps int64) error {
	if mbps <= 0 {
		return nil
	}
	rate := uint64(mbps) * 1_000_000 / 8 // bytes per second
	// The bucket holds 10 ms worth of traffic (at least 64 KiB, so that one GSO packet fits);
	// the queue holds another 50 ms before packets are dropped.
	burst := max(rate/100, 64<<10)
	tbf := func(l netlink.Link) *netlink.Tbf {
		return &netlink.Tbf{
			QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate:       rate,
			Buffer:     uint32(burst),
			Limit:      uint32(burst + rate/20),
		}
	}
	if err := in.QdiscReplace(tbf(eth)); err != nil {
		return fmt.Errorf("shape sandbox end: %w", err)
	}
	if err := netlink.QdiscReplace(tbf(host)); err != nil {
		return fmt.Errorf("shape host end: %w", err)
	}
	return nil
}

// Stats are a sandbox network's counters, from the sandbox's point of view.
type Stats struct {
	TxBytes, RxBytes     int64 // sent and received by the sandbox
	TxPackets, RxPackets int64
}

// Stats reads the host end's counters (what it received the sandbox sent).
func (l *Link) Stats() (Stats, error) {
	lk, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return Stats{}, fmt.Errorf("veth %s: %w", l.HostIf, err)
	}
	s := lk.Attrs().Statistics
	if s == nil {
		return Stats{}, fmt.Errorf("veth %s: no statistics: %w", l.HostIf, unix.ENODATA)
	}
	return Stats{TxBytes: int64(s.RxBytes), RxBytes: int64(s.TxBytes), TxPackets: int64(s.RxPackets), RxPackets: int64(s.TxPackets)}, nil
}
