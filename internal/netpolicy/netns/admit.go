package netns

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
)

// Admit lets the sandbox connect to addrs (their IPv4 ones) for timeout: in restricted egress
// the firewall redirects ports 80 and 443 to the proxy only for admitted addresses (Rules).
// airlock's DNS server admits what it answers before the answer leaves, so a connection that
// follows a lookup finds its address admitted. An address admitted again has its timeout
// renewed, unless more than half of it is left.
func (l *Link) Admit(addrs []netip.Addr, timeout time.Duration) error {
	if timeout < time.Millisecond {
		return fmt.Errorf("admit: timeout %v is below the firewall's resolution (1 ms)", timeout)
	}
	l.admitMu.Lock()
	defer l.admitMu.Unlock()
	now := time.Now()
	l.prune(now)
	var elems []nftables.SetElement
	for _, a := range addrs {
		a = a.Unmap()
		if !a.Is4() {
			continue // the set and the sandbox's routes are IPv4
		}
		if until, ok := l.admitted[a]; ok && until.Sub(now) > timeout/2 {
			continue
		}
		elems = append(elems, nftables.SetElement{Key: a.AsSlice(), Timeout: timeout})
	}
	if len(elems) == 0 {
		return nil
	}
	c, err := l.nft()
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	// Added, deleted and added again in one transaction: the element exists, whether or not
	// it did before, with the new timeout (a plain add keeps an existing element's timeout on
	// kernels before 6.10, and a delete of a missing one fails the transaction).
	set := admitted()
	for _, op := range []func(*nftables.Set, []nftables.SetElement) error{c.SetAddElements, c.SetDeleteElements, c.SetAddElements} {
		if err := op(set, elems); err != nil {
			return fmt.Errorf("admit: %w", err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("admit %d address(es): nftables: %w", len(elems), err)
	}
	if l.admitted == nil {
		l.admitted = map[netip.Addr]time.Time{}
	}
	for _, e := range elems {
		a, _ := netip.AddrFromSlice(e.Key)
		l.admitted[a] = now.Add(timeout)
	}
	return nil
}

// Forget empties the admitted set (a policy change): connections to addresses the sandbox
// resolved under the old policy are refused until it resolves them again under the new one.
// Connections already open stay open.
func (l *Link) Forget() error {
	l.admitMu.Lock()
	defer l.admitMu.Unlock()
	c, err := l.nft()
	if err != nil {
		return fmt.Errorf("forget admitted addresses: %w", err)
	}
	c.FlushSet(admitted())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("forget admitted addresses: nftables: %w", err)
	}
	l.admitted = map[netip.Addr]time.Time{}
	return nil
}

// Admitted returns the addresses the firewall admits now, with the time each has left (for
// tests and diagnostics).
func (l *Link) Admitted() (map[netip.Addr]time.Duration, error) {
	c, err := l.nft()
	if err != nil {
		return nil, err
	}
	elems, err := c.GetSetElements(admitted())
	if err != nil {
		return nil, fmt.Errorf("admitted addresses: %w", err)
	}
	m := make(map[netip.Addr]time.Duration, len(elems))
	for _, e := range elems {
		if a, ok := netip.AddrFromSlice(e.Key); ok {
			m[a] = e.Expires
		}
	}
	return m, nil
}

// prune drops what has expired from the record of admitted addresses, at most once a minute.
// The caller holds admitMu.
func (l *Link) prune(now time.Time) {
	if now.Before(l.pruned.Add(time.Minute)) {
		return
	}
	l.pruned = now
	for a, until := range l.admitted {
		if !now.Before(until) {
			delete(l.admitted, a)
		}
	}
}
