// Package clientaddr finds the address of the client behind a request or a
// connection: the peer itself, or, when the peer is a trusted proxy, the
// address the proxy forwards (X-Forwarded-For over HTTP, the PROXY protocol
// over SMTP). Per-address budgets (the wrong-key limit, large-transfer
// turns, connection shares) are kept by this address, so that behind a load
// balancer each client still has its own.
package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
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

// Bucket is the key under which per-address shares count an address: an
// IPv4 address itself, an IPv6 address's /64, since one host is commonly
// given a whole /64 and could otherwise take every share.
func Bucket(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Unmap().Is4() {
		return addr
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}

type contextKey struct{}

// WithClient returns ctx carrying the client address the server found for a
// request (the peer, or what a trusted proxy forwarded).
func WithClient(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, contextKey{}, addr)
}

// FromRequest returns the client address of r: what WithClient put in its
// context, else its peer's host.
func FromRequest(r *http.Request) string {
	if c, ok := r.Context().Value(contextKey{}).(string); ok {
		return c
	}
	return Host(r.RemoteAddr)
}
