package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrRefused marks a connection the daemon would not make: its address is one a Guard refuses.
var ErrRefused = errors.New("address refused")

// Guard is the address policy of the connections the daemon makes because of what a tenant sent
// (webhook deliveries, image pulls): public addresses always, cloud metadata addresses never,
// the others (loopback, private, CGNAT, link-local, ...) only when AllowPrivate is set. It is
// checked on the address each connection is made to, after DNS, so a name cannot lead around it.
type Guard struct {
	AllowPrivate bool
	// What names the connections in refusals ("webhooks"); Setting the configuration key that
	// allows private addresses ("webhooks.allowPrivateNetworks").
	What, Setting string
}

// Check returns nil for an address the policy allows, else an error wrapping ErrRefused that
// says why.
func (g Guard) Check(a netip.Addr) error {
	switch c := Classify(a); {
	case c == ClassPublic:
		return nil
	case c == ClassMetadata:
		return fmt.Errorf("%w: %s is a cloud metadata address, which %s never reach", ErrRefused, a, g.What)
	case g.AllowPrivate:
		return nil
	default:
		article := "a"
		if strings.ContainsRune("aeiou", rune(c[0])) {
			article = "an"
		}
		return fmt.Errorf("%w: %s is %s %s address, which %s reach only when the daemon's %s is set",
			ErrRefused, a, article, c, g.What, g.Setting)
	}
}

// Control is a net.Dialer's Control: it refuses the connection before it is made.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %q", ErrRefused, address)
	}
	return g.Check(ap.Addr())
}

// Dialer returns a dialer that connects only where g allows.
func (g Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: g.Control}
}
