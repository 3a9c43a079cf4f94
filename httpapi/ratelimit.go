package httpapi

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// failureLimiter counts wrong API keys per client address in fixed windows;
// an address that reaches the limit is refused until its window ends, so
// keys cannot be guessed at speed. Unknown and wrong keys count alike.
type failureLimiter struct {
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

func newFailureLimiter(max int, window time.Duration, now func() time.Time) *failureLimiter {
	return &failureLimiter{max: max, window: window, now: now, clients: map[string]*failureWindow{}}
}

// limited reports whether client has used up its failures, and how long
// until it may try again.
func (l *failureLimiter) limited(client string) (time.Duration, bool) {
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

// fail counts one wrong key from client.
func (l *failureLimiter) fail(client string) {
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
func (l *failureLimiter) applies(client string) bool {
	if l.max <= 0 {
		return false
	}
	if ip := net.ParseIP(client); l.exemptLoopback && ip != nil && ip.IsLoopback() {
		return false
	}
	return true
}

func (l *failureLimiter) dropExpired(now time.Time) {
	for c, w := range l.clients {
		if now.Sub(w.start) >= l.window {
			delete(l.clients, c)
		}
	}
	if len(l.clients) >= maxTrackedClients {
		clear(l.clients)
	}
}

// clientAddress is the request's peer IP. Forwarding headers are not
// trusted: a client could name any address in them.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
