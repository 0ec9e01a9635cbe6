package simcloud

import (
	"fmt"
	"net/netip"
)

// DefaultIPPool is the pool load balancer IPs come from unless
// Options.IPPool says otherwise (TEST-NET-3, never routed on the internet).
var DefaultIPPool = netip.MustParsePrefix("203.0.113.0/24")

// ipPool is the inclusive address range [first, last] inside prefix that
// load balancer IPs are handed out from.
type ipPool struct {
	prefix      netip.Prefix
	first, last netip.Addr
}

// newIPPool builds the range for prefix. The default first address is the
// prefix base + 10 (leaving room for "infrastructure" addresses, like real
// clouds do) or base + 1 in pools too small for that. For IPv4 prefixes of
// /30 or shorter the broadcast address is excluded.
func newIPPool(prefix netip.Prefix, start netip.Addr) (ipPool, error) {
	if !prefix.IsValid() {
		prefix = DefaultIPPool
	}
	if prefix.Masked() != prefix {
		return ipPool{}, fmt.Errorf("ip pool %s is not a network address (want %s)", prefix, prefix.Masked())
	}
	base := prefix.Addr()
	last := lastAddr(prefix)
	if base.Is4() && prefix.Bits() <= 30 {
		last = last.Prev()
	}
	p := ipPool{prefix: prefix, last: last}
	if start.IsValid() {
		if !prefix.Contains(start) || start.Compare(last) > 0 {
			return ipPool{}, fmt.Errorf("ip pool start %s is not inside %s", start, prefix)
		}
		p.first = start
		return p, nil
	}
	p.first = base
	if prefix.Bits() < base.BitLen()-1 {
		p.first = base.Next() // skip the network address
	}
	if a := addN(base, 10); a.IsValid() && prefix.Contains(a) && a.Compare(last) <= 0 {
		p.first = a
	}
	return p, nil
}

func (p ipPool) contains(a netip.Addr) bool {
	return p.prefix.Contains(a) && a.Compare(p.first) >= 0 && a.Compare(p.last) <= 0
}

// next returns the address after a, wrapping around to the first one.
func (p ipPool) next(a netip.Addr) netip.Addr {
	n := a.Next()
	if !n.IsValid() || n.Compare(p.last) > 0 || n.Compare(p.first) < 0 {
		return p.first
	}
	return n
}

func (p ipPool) String() string {
	return fmt.Sprintf("%s-%s", p.first, p.last)
}

func lastAddr(prefix netip.Prefix) netip.Addr {
	b := prefix.Addr().AsSlice()
	for i := prefix.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func addN(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
		if !a.IsValid() {
			break
		}
	}
	return a
}
