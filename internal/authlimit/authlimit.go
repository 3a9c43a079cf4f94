// Package authlimit slows down the guessing of API keys: it counts wrong
// keys per client address, over HTTP and SMTP AUTH alike, and refuses an
// address that sent too many until its window ends.
package authlimit

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"slices"
	"sync"
	"time"
)

// Limiter counts wrong API keys per client address in fixed windows. An
// address that reaches the limit is refused until its window ends, for
// every key but those that already worked from it: so the answer to a guess
// tells nothing once the limit is reached, while the clients that were
// already working there go on. Unknown and wrong keys count alike. IPv6
// addresses count per /64, the block one client usually holds. It is safe
// for concurrent use; a nil *Limiter limits nothing.
type Limiter struct {
	max    int // per window; 0 disables the limiter
	window time.Duration
	now    func() time.Time
	// exemptLoopback leaves loopback clients alone: on a test sink they are
	// the test suites of the same host.
	exemptLoopback bool

	mu      sync.Mutex
	clients map[string]*client
}

type client struct {
	start   time.Time // of the current window
	n       int       // wrong keys in the window
	trusted [][32]byte
}

const (
	// maxTrackedClients bounds the limiter's memory; past it, clients
	// whose window is over and who have no trusted key are dropped, and if
	// that is not enough the table is cleared.
	maxTrackedClients = 100_000
	// maxTrusted bounds the keys remembered per address.
	maxTrusted = 8
)

// New returns a Limiter of max wrong keys per window and client address
// (0: no limit); with exemptLoopback, loopback clients are never limited.
func New(max int, window time.Duration, exemptLoopback bool, now func() time.Time) *Limiter {
	return &Limiter{max: max, window: window, exemptLoopback: exemptLoopback, now: now, clients: map[string]*client{}}
}

// Attempt records one try of key from addr (an IP address), valid telling
// whether the key is right, and reports whether to answer it (401 or the
// request for a wrong key, the request for a right one). When it reports
// false the address is over its limit: answer 429 (SMTP 454), and wait is
// how long until its window ends.
func (l *Limiter) Attempt(addr, key string, valid bool) (ok bool, wait time.Duration) {
	id, limited := l.clientID(addr)
	if !limited {
		return true, 0
	}
	digest := sha256.Sum256([]byte(key))
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.clients[id]
	if c == nil {
		if len(l.clients) >= maxTrackedClients {
			l.dropExpired(now)
		}
		c = &client{start: now}
		l.clients[id] = c
	}
	if now.Sub(c.start) >= l.window {
		c.start, c.n = now, 0
	}
	over := c.n >= l.max
	wait = c.start.Add(l.window).Sub(now)
	switch {
	case valid && (!over || c.trusts(digest)):
		c.trust(digest)
		return true, 0
	case over:
		return false, wait
	case !valid:
		c.n++
	}
	return true, 0
}

// clientID is the key addr is counted under, and whether it is counted.
func (l *Limiter) clientID(addr string) (string, bool) {
	if l == nil || l.max <= 0 {
		return "", false
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return addr, true
	}
	if l.exemptLoopback && ip.IsLoopback() {
		return "", false
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64", true
	}
	return ip.String(), true
}

func (c *client) trusts(digest [32]byte) bool {
	for _, d := range c.trusted {
		if subtle.ConstantTimeCompare(d[:], digest[:]) == 1 {
			return true
		}
	}
	return false
}

func (c *client) trust(digest [32]byte) {
	if c.trusts(digest) {
		return
	}
	if len(c.trusted) == maxTrusted {
		c.trusted = slices.Delete(c.trusted, 0, 1)
	}
	c.trusted = append(c.trusted, digest)
}

func (l *Limiter) dropExpired(now time.Time) {
	for id, c := range l.clients {
		if now.Sub(c.start) >= l.window && len(c.trusted) == 0 {
			delete(l.clients, id)
		}
	}
	if len(l.clients) >= maxTrackedClients {
		clear(l.clients)
	}
}
