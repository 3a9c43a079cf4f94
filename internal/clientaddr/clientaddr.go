// Package clientaddr finds the address of the client behind a request or a
// connection: the peer itself, or, when the peer is a trusted proxy, the
// address the proxy forwards (X-Forwarded-For over HTTP, the PROXY protocol
// over SMTP). Per-address budgets (the wrong-key limit, large-transfer
// turns, connection shares) are kept by this address, so that behind a load
// balancer each client still has its own.
package clientaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Trusted is a list of proxy networks whose forwarding is believed. The zero
// value trusts no one.
type Trusted struct {
	prefixes []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs or single addresses.
func Parse(list string) (Trusted, error) {
	var t Trusted
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, errAddr := netip.ParseAddr(part)
			if errAddr != nil {
				return Trusted{}, fmt.Errorf("%q is not a CIDR (like 10.0.0.0/8) or an address", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Empty reports whether no proxy is trusted.
func (t Trusted) Empty() bool { return len(t.prefixes) == 0 }

// Contains reports whether ip is a trusted proxy.
func (t Trusted) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// FromForwarded returns the client address of a request that came from
// peer (an "ip:port" or "ip") with the X-Forwarded-For values xff: the peer
// unless it is trusted; else, reading X-Forwarded-For from the right (the
// hops nearest to mailsink), the first address that is not a trusted proxy.
// Addresses left of it were written by the client and are not believed.
func (t Trusted) FromForwarded(peer string, xff []string) string {
	host := Host(peer)
	ip, err := netip.ParseAddr(host)
	if err != nil || !t.Contains(ip) {
		return host
	}
	hops := strings.Split(strings.Join(xff, ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(Host(strings.TrimSpace(hops[i])))
		if err != nil {
			break // garbage: the proxy's own address is all we know
		}
		if !t.Contains(hop) {
			return hop.Unmap().String()
		}
		host = hop.Unmap().String()
	}
	return host
}

// Host returns the host part of "host:port", or s when it has no port.
func Host(s string) string {
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return strings.Trim(s, "[]")
}
