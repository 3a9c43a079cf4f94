// Package resolve is the DNS resolver of the checks: the system's, or the
// server MAILSINK_DNS_RESOLVER names, with every lookup bounded in time.
package resolve

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// DefaultTimeout bounds one lookup.
const DefaultTimeout = 5 * time.Second

// Resolver answers DNS lookups through one server, each within a timeout.
// It has the methods of *net.Resolver that the checks use (those of
// blitiri.com.ar/go/spf's DNSResolver among them).
type Resolver struct {
	r       *net.Resolver
	timeout time.Duration
}

// New returns a resolver that asks server (host:port), or the system's
// resolver when server is empty, each lookup within timeout (0:
// DefaultTimeout).
func New(server string, timeout time.Duration) *Resolver {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	r := &net.Resolver{}
	if server != "" {
		var d net.Dialer
		r = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, server)
		}}
	}
	return &Resolver{r: r, timeout: timeout}
}

// LookupTXT returns the TXT records of name, each record's strings joined.
func (r *Resolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.r.LookupTXT(ctx, name)
}

// LookupMX returns the MX records of name.
func (r *Resolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.r.LookupMX(ctx, name)
}

// LookupIPAddr returns the addresses of host.
func (r *Resolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.r.LookupIPAddr(ctx, host)
}

// LookupAddr returns the names of addr (a reverse lookup).
func (r *Resolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.r.LookupAddr(ctx, addr)
}

// LookupNetIP returns the IPv4 and IPv6 addresses of host.
func (r *Resolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.r.LookupNetIP(ctx, "ip", host)
}
