// Package eventhub fans a store's change events out to the subscribers of
// one process, per account, and keeps a bounded history of each account's
// recent events for resumption. Stores use it to implement store.Events:
// the embedded store publishes into it after each commit; the Redis store
// feeds it from Redis pub/sub so that every replica sees every event.
package eventhub

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailsink/mailsink/store"
)

// DefaultHistory is how many recent events per account a Hub keeps when
// New is given 0.
const DefaultHistory = 1000

// subscriberBuffer is how many undelivered events a subscriber may have
// before it is dropped (its channel closed) instead of slowing everyone.
const subscriberBuffer = 256

// Hub is the per-process fan-out of events. It is safe for concurrent use.
type Hub struct {
	history int

	mu     sync.Mutex
	subs   map[string]map[*subscription]struct{} // by account
	recent map[string]*ring                      // by account; nil when history is off
	// last is the last generated id of each account: ids count each
	// account's events alone, so an id reveals nothing of other accounts.
	last     map[string]ID
	closed   bool
	nowMilli func() int64
	// start is below every id this Hub generates: events before it are
	// not in its history.
	start ID
	// nextSeq and pending order PublishInOrder's events; advanced is
	// closed and replaced when nextSeq moves or the Hub closes.
	nextSeq  uint64
	pending  map[uint64]*store.Event // nil: a number SkipInOrder took
	advanced chan struct{}
}

// maxPending bounds the events PublishInOrder holds back waiting for an
// earlier one; past it they go out in order, over the gap.
const maxPending = 10_000

// New returns a Hub that keeps the last history events of each account for
// After; a negative history keeps none (the caller keeps its own).
func New(history int) *Hub {
	return newHub(history, func() int64 { return time.Now().UnixMilli() })
}

// newHub is New with a clock in Unix milliseconds.
func newHub(history int, nowMilli func() int64) *Hub {
	if history == 0 {
		history = DefaultHistory
	}
	h := &Hub{
		history:  history,
		subs:     map[string]map[*subscription]struct{}{},
		nowMilli: nowMilli,
		last:     map[string]ID{},
		advanced: make(chan struct{}),
	}
	if history > 0 {
		h.recent = map[string]*ring{}
	}
	h.start = ID{MS: h.nowMilli()}
	return h
}

// nextIDLocked returns a new event id of the account, "<unix ms>-<seq>",
// greater than every id it returned for that account before and than the
// Hub's start. The sequence counts only the account's own events.
func (h *Hub) nextIDLocked(accountID string) string {
	last, ok := h.last[accountID]
	if !ok {
		last = ID{MS: h.start.MS, Seq: -1}
	}
	id := ID{MS: h.nowMilli()}
	if id.MS <= last.MS {
		id = ID{MS: last.MS, Seq: last.Seq + 1}
	}
	h.last[accountID] = id
	return strconv.FormatInt(id.MS, 10) + "-" + strconv.FormatInt(id.Seq, 10)
}

// Publish delivers e to the subscribers of its account and records it in
// the account's history. When e.ID is empty the Hub gives it a new id: ids
// are assigned and delivered under one lock, so subscribers see them in
// order. A subscriber whose buffer is full is dropped.
func (h *Hub) Publish(e store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked(e)
}

// StartSequence sets the number PublishInOrder expects next.
func (h *Hub) StartSequence(next uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextSeq = next
}

// PublishInOrder publishes events numbered by the writer's gapless sequence
// (numbers given inside the committing transactions), in that order: an
// event published before an earlier-numbered one waits for it. Writers
// that commit concurrently reach Publish in any order; this puts their
// events back in commit order.
func (h *Hub) PublishInOrder(seq uint64, e store.Event) {
	h.publishInOrder(seq, &e)
}

// SkipInOrder marks seq, a number PublishInOrder expects, as one without
// an event (its change failed after it was numbered), so that the events
// numbered after it are not held back for it.
func (h *Hub) SkipInOrder(seq uint64) {
	h.publishInOrder(seq, nil)
}

func (h *Hub) publishInOrder(seq uint64, e *store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq < h.nextSeq {
		if e != nil {
			h.publishLocked(*e) // not expected: a number given twice
		}
		return
	}
	if h.pending == nil {
		h.pending = map[uint64]*store.Event{}
	}
	h.pending[seq] = e
	defer h.advance(h.nextSeq)
	for {
		next, ok := h.pending[h.nextSeq]
		if !ok {
			break
		}
		delete(h.pending, h.nextSeq)
		h.nextSeq++
		if next != nil {
			h.publishLocked(*next)
		}
	}
	if len(h.pending) > maxPending {
		// A number that never came: go on without it rather than stall.
		seqs := make([]uint64, 0, len(h.pending))
		for s := range h.pending {
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		for _, s := range seqs {
			if e := h.pending[s]; e != nil {
				h.publishLocked(*e)
			}
		}
		clear(h.pending)
		h.nextSeq = seqs[len(seqs)-1] + 1
	}
}

// advance wakes WaitSequence's callers when nextSeq has moved past was;
// h.mu must be held.
func (h *Hub) advance(was uint64) {
	if h.nextSeq != was {
		close(h.advanced)
		h.advanced = make(chan struct{})
	}
}

// WaitSequence waits until every event numbered up to seq by the writer's
// sequence has been published, the Hub is closed, or ctx ends (its error).
// A writer publishes its events right after its commit, but concurrent
// writers in any order: a reader that must see every committed event (a
// create's, once it has returned) waits here for those numbered before.
func (h *Hub) WaitSequence(ctx context.Context, seq uint64) error {
	for {
		h.mu.Lock()
		done, ch := h.closed || h.nextSeq > seq, h.advanced
		h.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *Hub) publishLocked(e store.Event) {
	if h.closed {
		return
	}
	if e.ID == "" {
		e.ID = h.nextIDLocked(e.AccountID)
	}
	if h.recent != nil {
		r := h.recent[e.AccountID]
		if r == nil {
			r = &ring{max: h.history}
			h.recent[e.AccountID] = r
		}
		r.add(e)
	}
	for s := range h.subs[e.AccountID] {
		select {
		case s.ch <- e:
		default:
			h.dropLocked(s)
		}
	}
}

// Subscribe returns a subscription to the account's events published from
// now on.
func (h *Hub) Subscribe(accountID string) store.Subscription {
	s := &subscription{hub: h, account: accountID, ch: make(chan store.Event, subscriberBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		s.done = true
		return s
	}
	m := h.subs[accountID]
	if m == nil {
		m = map[*subscription]struct{}{}
		h.subs[accountID] = m
	}
	m[s] = struct{}{}
	return s
}

// After returns the account's kept events with ids after afterID, oldest
// first, and whether they are complete: false when events after afterID
// have already fallen out of the history. It returns an error with code
// Invalid when afterID is not an event id.
func (h *Hub) After(accountID, afterID string) ([]store.Event, bool, error) {
	after, err := ParseID(afterID)
	if err != nil {
		return nil, false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Events from before this Hub started (an earlier process) are unknown.
	known := !after.Less(h.start)
	r := h.recent[accountID]
	if r == nil {
		return nil, known, nil
	}
	events, complete := r.after(after)
	return events, complete && known, nil
}

// Wants reports whether an event of the account would reach anyone now: a
// subscriber, or the history. A publisher may skip building an event that
// is not wanted.
func (h *Hub) Wants(accountID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recent != nil || len(h.subs[accountID]) > 0
}

// Subscribed reports whether the account has a subscriber now.
func (h *Hub) Subscribed(accountID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[accountID]) > 0
}

// Subscribers returns how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}

// DropAll ends every subscription open now, so that their holders
// resubscribe and catch up: for when events may have been missed.
func (h *Hub) DropAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for s := range m {
			h.dropLocked(s)
		}
	}
}

// Drop ends the account's subscriptions open now, like DropAll for one
// account.
func (h *Hub) Drop(accountID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[accountID] {
		h.dropLocked(s)
	}
}

// Close ends every subscription; later ones end at once.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	close(h.advanced)
	h.advanced = make(chan struct{})
	for _, m := range h.subs {
		for s := range m {
			h.dropLocked(s)
		}
	}
}

func (h *Hub) dropLocked(s *subscription) {
	if s.done {
		return
	}
	s.done = true
	close(s.ch)
	m := h.subs[s.account]
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.account)
	}
}

type subscription struct {
	hub     *Hub
	account string
	ch      chan store.Event
	done    bool // guarded by hub.mu
}

func (s *subscription) Events() <-chan store.Event { return s.ch }

func (s *subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.dropLocked(s)
}

// ID is a parsed event id: events are ordered by (MS, Seq).
type ID struct {
	MS, Seq int64
}

// ParseID parses "<ms>-<seq>" (the form of Redis stream ids too). It returns
// an error with code Invalid otherwise.
func ParseID(s string) (ID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, errA := strconv.ParseInt(ms, 10, 64)
	b, errB := strconv.ParseInt(seq, 10, 64)
	if !ok || errA != nil || errB != nil || a < 0 || b < 0 {
		return ID{}, store.Errorf(store.Invalid, "event id %q is not of the form <ms>-<seq>", s)
	}
	return ID{a, b}, nil
}

// Less reports whether id comes before o.
func (id ID) Less(o ID) bool {
	return id.MS < o.MS || id.MS == o.MS && id.Seq < o.Seq
}

func (id ID) String() string { return fmt.Sprintf("%d-%d", id.MS, id.Seq) }

// ring is one account's recent events: a circular buffer, oldest first.
type ring struct {
	events []store.Event
	start  int // index of the oldest event once the buffer is full
	max    int
	// gone is the id of the newest event that fell out of the history;
	// zero while none has.
	gone ID
}

func (r *ring) add(e store.Event) {
	if len(r.events) < r.max {
		r.events = append(r.events, e)
		return
	}
	if id, err := ParseID(r.events[r.start].ID); err == nil {
		r.gone = id
	}
	r.events[r.start] = e
	r.start = (r.start + 1) % r.max
}

// after returns the kept events after the id, and whether they are all the
// events after it (none fell out of the history).
func (r *ring) after(after ID) ([]store.Event, bool) {
	var out []store.Event
	for i := range r.events {
		e := r.events[(r.start+i)%len(r.events)]
		if id, err := ParseID(e.ID); err == nil && after.Less(id) {
			out = append(out, e)
		}
	}
	return out, !after.Less(r.gone)
}
