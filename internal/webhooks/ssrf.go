package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Webhooks must not become a way into the network mailsink runs in. Every
// address a delivery dials is checked after DNS, on every attempt (the
// Dialer below, with net.Dialer.Control as a second look at the socket's
// own address), and redirects are never followed. Link-local and cloud
// metadata addresses are always refused; private and loopback ones only for
// accounts that opt in (docs/webhooks.md).

// alwaysRefused are refused for every account.
var alwaysRefused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local, cloud metadata (169.254.169.254)
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("168.63.129.16/32"),   // Azure host services
	netip.MustParsePrefix("192.0.0.192/32"),     // Oracle Cloud metadata
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved, broadcast
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fe80::/10"),         // link-local
	netip.MustParsePrefix("fec0::/10"),         // site-local (deprecated, still routed on some networks)
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
	netip.MustParsePrefix("ff00::/8"),          // multicast
}

// private are refused unless the account allows private targets.
var private = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"), // unique local
}

// An IPv6 address in one of these ranges carries an IPv4 address that a
// translator or tunnel may deliver to: it is refused when that IPv4
// address is.
var embeddings = []struct {
	name   string
	prefix netip.Prefix
	ipv4   func(b [16]byte) [4]byte
}{
	{"IPv4-mapped", netip.MustParsePrefix("::ffff:0:0/96"), last32},
	{"IPv4-translated", netip.MustParsePrefix("::ffff:0:0:0/96"), last32},
	// :: and ::1 are in it too, but are their own addresses (alwaysRefused,
	// private): CheckAddr skips them.
	{"IPv4-compatible", netip.MustParsePrefix("::/96"), last32},
	{"NAT64", netip.MustParsePrefix("64:ff9b::/96"), last32},
	// 6to4: 2002:AABB:CCDD::/48 is the site of IPv4 AA.BB.CC.DD.
	{"6to4", netip.MustParsePrefix("2002::/16"), func(b [16]byte) [4]byte { return [4]byte(b[2:6]) }},
	// Teredo: the client's IPv4 address, each bit inverted, is the last 32
	// bits (RFC 4380).
	{"Teredo", netip.MustParsePrefix("2001::/32"), func(b [16]byte) [4]byte {
		v := [4]byte(b[12:])
		for i := range v {
			v[i] ^= 0xff
		}
		return v
	}},
}

func last32(b [16]byte) [4]byte { return [4]byte(b[12:]) }

// RefusedAddressError says why an address may not be dialled.
type RefusedAddressError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedAddressError) Error() string {
	return fmt.Sprintf("address %s refused: %s", e.Addr, e.Reason)
}

// CheckAddr returns a *RefusedAddressError when a delivery may not go to
// addr: always for link-local, site-local, metadata, multicast and
// unspecified addresses, and for private and loopback ones unless
// allowPrivate; an IPv6 address that carries an IPv4 address (embeddings)
// as that IPv4 address would be.
func CheckAddr(addr netip.Addr, allowPrivate bool) error {
	addr = addr.WithZone("")
	if addr.Is6() && addr != netip.IPv6Loopback() && addr != netip.IPv6Unspecified() {
		for _, e := range embeddings {
			if !e.prefix.Contains(addr) {
				continue
			}
			v4 := netip.AddrFrom4(e.ipv4(addr.As16()))
			var inner *RefusedAddressError
			if errors.As(CheckAddr(v4, allowPrivate), &inner) {
				return &RefusedAddressError{Addr: addr, Reason: fmt.Sprintf("it carries %s (%s): %s", v4, e.name, inner.Reason)}
			}
		}
	}
	for _, p := range alwaysRefused {
		if p.Contains(addr) {
			return &RefusedAddressError{Addr: addr, Reason: "link-local, metadata and reserved addresses are never webhook targets"}
		}
	}
	if !allowPrivate {
		for _, p := range private {
			if p.Contains(addr) {
				return &RefusedAddressError{Addr: addr, Reason: "private and loopback targets need webhooks.allowPrivateTargets in the account's entry of the accounts file"}
			}
		}
	}
	return nil
}

// CheckURL checks a webhook URL as it is created: http or https, a host, at
// most maxLen bytes, no user info, and, when the host is an IP address,
// one CheckAddr allows. A host name is checked on every attempt instead,
// after DNS. The error is a message for the client.
func CheckURL(raw string, maxLen int, allowPrivate bool) error {
	if len(raw) > maxLen {
		return fmt.Errorf("must be at most %d bytes", maxLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an http or https URL")
	}
	if u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return errors.New("must be an absolute http or https URL with a host")
	}
	if u.User != nil {
		return errors.New("must not carry user info: put credentials in the path or query")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("has an invalid port")
		}
	}
	if addr, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := CheckAddr(addr, allowPrivate); err != nil {
			var r *RefusedAddressError
			errors.As(err, &r)
			return errors.New("is on a refused address: " + r.Reason)
		}
	}
	return nil
}

// Dialer dials the addresses of webhook targets, refusing those CheckAddr
// refuses.
type Dialer struct {
	// LookupHost resolves a host name; nil uses the system resolver.
	// Tests set it to make a name resolve to a refused address.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
	Timeout    time.Duration
}

// DialContext returns a dial function that resolves addr's host, checks
// every address it resolves to and dials the allowed ones in turn. The
// socket's own remote address is checked again just before connecting
// (net.Dialer.Control), so that what is dialled is what was checked.
func (d *Dialer) DialContext(allow bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.dial(ctx, network, addr, allow)
	}
}

func (d *Dialer) dial(ctx context.Context, network, addr string, allow bool) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		lookup := d.LookupHost
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if ips, err = lookup(ctx, host); err != nil {
			return nil, err
		}
	}
	nd := &net.Dialer{Timeout: d.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		return CheckAddr(ap.Addr(), allow)
	}}
	var firstErr error
	for _, ip := range ips {
		if err := CheckAddr(ip, allow); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		c, err := nd.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no address for %s", host)
	}
	return nil, firstErr
}
