// Package held bounds the requests that each account holds open (list
// requests waiting for an email, event streams, agents' waits over MCP),
// and holds a list query open until an email matches it.
//
// Every door that holds a request for an account takes a place of one
// Limiter, so that one budget per account (MAILSINK_MAX_HELD_PER_ACCOUNT)
// bounds them all together.
package held

import (
	"context"
	"sync"
	"time"

	"github.com/mailsink/mailsink/store"
)

// Limiter counts the requests each account holds open, up to a maximum per
// account, and tells them when to stop (Stop, at shutdown).
type Limiter struct {
	max  int
	mu   sync.Mutex
	n    map[string]int
	stop chan struct{}
	once sync.Once
}

// NewLimiter returns a Limiter of max places per account.
func NewLimiter(max int) *Limiter {
	return &Limiter{max: max, n: map[string]int{}, stop: make(chan struct{})}
}

// Max returns the places of one account.
func (l *Limiter) Max() int { return l.max }

// Acquire takes a place for the account; it reports false when all are
// taken. The caller calls release once, when the request is no longer
// held.
func (l *Limiter) Acquire(accountID string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[accountID] >= l.max {
		return nil, false
	}
	l.n[accountID]++
	var once sync.Once
	return func() { once.Do(func() { l.release(accountID) }) }, true
}

func (l *Limiter) release(accountID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[accountID]--; l.n[accountID] <= 0 {
		delete(l.n, accountID)
	}
}

// InUse returns how many places are taken, in all accounts.
func (l *Limiter) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.n {
		n += v
	}
	return n
}

// Stop tells every held request to answer what it has, now and from now
// on, so that a shutdown need not wait for them. Calls after the first do
// nothing.
func (l *Limiter) Stop() { l.once.Do(func() { close(l.stop) }) }

// Stopped is closed by Stop.
func (l *Limiter) Stopped() <-chan struct{} { return l.stop }

// Store is what Wait reads: the list, and the account's events.
type Store interface {
	ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error)
	Subscribe(accountID string) store.Subscription
}

// Recheck is how often a held wait queries again while it has no
// subscription delivering events (the store ended it: events may be lost
// in a Redis outage), and while the store is unavailable.
const Recheck = time.Second

// Wait returns the page of q once it is not empty: at once when it is
// not, else when an event of the account makes it so, or when wait is over
// (then from one last query, empty or not) or stop is closed. Each query
// runs within storeTimeout. A query that finds the store unavailable (a
// Redis failover) is retried every Recheck until the wait is over; only
// then is its error returned. Other errors are returned at once, and ctx's
// error when ctx ends first.
func Wait(ctx context.Context, s Store, q store.ListQuery, wait, storeTimeout time.Duration, stop <-chan struct{}) ([]*store.Email, error) {
	query := func() ([]*store.Email, error) {
		qctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		return s.ListEmails(qctx, q)
	}
	// Subscribe before the first query, so that an email stored between
	// the query and the wait still wakes it.
	sub := s.Subscribe(q.AccountID)
	defer func() { sub.Close() }()
	events := sub.Events()

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	stopRecheck := func() {}
	defer func() { stopRecheck() }()
	// recheck ticks only while no subscription delivers events; with one,
	// the query runs again only for an event whose email matches, so held
	// requests cost no scans while mail for others arrives.
	var recheck <-chan time.Time
	startRecheck := func() {
		if recheck == nil {
			t := time.NewTicker(Recheck)
			recheck, stopRecheck = t.C, t.Stop
		}
	}
	match := store.NewMatcher(q)
	for {
		emails, err := query()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && !store.IsCode(err, store.Unavailable):
			return nil, err
		case err == nil && len(emails) > 0:
			return emails, nil
		case err != nil:
			startRecheck()
		}
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-deadline.C:
				// Once more: an email stored whose event did not come
				// (lost in a Redis failover, or still on its way) is
				// still answered.
				emails, err := query()
				if err != nil && ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return emails, err
			case <-stop:
				return emails, err
			case <-recheck:
				woken = true
			case e, open := <-events:
				if !open {
					// Events may have been missed (a Redis outage):
					// subscribe again and query once.
					sub.Close()
					sub = s.Subscribe(q.AccountID)
					events, woken = sub.Events(), true
					startRecheck()
					continue
				}
				woken = e.Type != store.EmailDeleted && (e.Email == nil || match.Match(e.Email))
			}
		}
		drain(events)
	}
}

// drain empties what is already buffered in ch, so that a burst of events
// costs one query.
func drain(ch <-chan store.Event) {
	for ch != nil {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		default:
			return
		}
	}
}
