package vm

import (
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
)

// network brings up the guest's loopback and, with a network card, eth0 with its address and
// default route (QEMU's user-mode network: GuestAddr, via GuestGateway). Init shares this
// network namespace and configures nothing (guest.Config.HostNet).
func network(card bool) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if !card {
		return nil
	}
	var eth netlink.Link
	for deadline := time.Now().Add(5 * time.Second); ; {
		if eth, err = netlink.LinkByName("eth0"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("network card: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	addr, err := netlink.ParseAddr(GuestAddr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("eth0 address: %w", err)
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("eth0 up: %w", err)
	}
	gw := net.ParseIP(GuestGateway)
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}
