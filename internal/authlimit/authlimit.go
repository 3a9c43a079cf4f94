// Package authlimit slows down the guessing of API keys: it counts wrong
// keys per client address, over HTTP and SMTP AUTH alike, and refuses an
// address that sent too many until its window ends.
package authlimit

import (
	"net"
	"sync"
	"time"
)

// Limiter counts wrong API keys per client address in fixed windows; an
// address that reaches the limit is refused until its window ends, so keys
// cannot be guessed at speed. Unknown and wrong keys count alike. It is safe
// for concurrent use; a nil *Limiter limits nothing.
type Limiter struct {
	max    int // per window; 0 disables the limiter
	window time.Duration
	now    func() time.Time
	// exemptLoopback leaves loopback clients alone: on a test sink they are
	// the test suites of the same host.
	exemptLoopback bool

	mu      sync.Mutex
	clients map[string]*failureWindow
}

type failureWindow struct {
	start time.Time
	n     int
}

// maxTrackedClients bounds the limiter's memory; past it, expired windows
// are dropped, and if none has expired the table is cleared.
const maxTrackedClients = 100_000

// New returns a Limiter of max wrong keys per window and client address
// (0: no limit); with exemptLoopback, loopback clients are never limited.
func New(max int, window time.Duration, exemptLoopback bool, now func() time.Time) *Limiter {
	return &Limiter{max: max, window: window, exemptLoopback: exemptLoopback, now: now, clients: map[string]*failureWindow{}}
}

// Limited reports whether client (an IP address) has used up its wrong
// keys, and how long until it may try again.
func (l *Limiter) Limited(client string) (time.Duration, bool) {
	if !l.applies(client) {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.clients[client]
	if w == nil {
		return 0, false
	}
	left := w.start.Add(l.window).Sub(l.now())
	if left <= 0 {
		delete(l.clients, client)
		return 0, false
	}
	return left, w.n >= l.max
}

// Fail counts one wrong key from client.
func (l *Limiter) Fail(client string) {
	if !l.applies(client) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	w := l.clients[client]
	if w == nil || now.Sub(w.start) >= l.window {
		if len(l.clients) >= maxTrackedClients {
			l.dropExpired(now)
		}
		w = &failureWindow{start: now}
		l.clients[client] = w
	}
	w.n++
}

// applies reports whether the limit applies to client.
func (l *Limiter) applies(client string) bool {
	if l == nil || l.max <= 0 {
		return false
	}
	if ip := net.ParseIP(client); l.exemptLoopback && ip != nil && ip.IsLoopback() {
		return false
	}
	return true
}

func (l *Limiter) dropExpired(now time.Time) {
	for c, w := range l.clients {
		if now.Sub(w.start) >= l.window {
			delete(l.clients, c)
		}
	}
	if len(l.clients) >= maxTrackedClients {
		clear(l.clients)
	}
}
