package search

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailsink/mailsink/internal/bodies"
	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// digestCheck is the name a digest is kept under, among the email's check
// results (store.Checks): derived from the email, deleted with it.
const digestCheck = "search-digest"

// Store is what the search service reads and keeps: the accounts' emails
// and their events, to fill and follow the index, and digests among the
// emails' derived results.
type Store interface {
	ListEmails(ctx context.Context, q store.ListQuery) ([]*store.Email, error)
	GetEmail(ctx context.Context, accountID, id string) (*store.Email, error)
	store.Events
	store.Checks
}

// Config holds the service's dependencies and bounds.
type Config struct {
	// Accounts lists the accounts whose mail is indexed; the service
	// looks for new ones every AccountsEvery.
	Accounts      func() []*store.Account
	AccountsEvery time.Duration
	// Bodies reads the bodies digests are made from.
	Bodies *bodies.Service
	// Timeout bounds each store call and each digest's read of a body.
	Timeout time.Duration
	Log     *slog.Logger
}

// Service keeps the index of every account up to date and answers
// queries with it. Each process keeps its own index, filled from the store
// at start and kept by the store's events, so that replicas sharing a
// Redis each answer from memory; digests are made once (by whichever
// replica gets there first) and kept in the store.
type Service struct {
	idx   *Index
	store Store
	cfg   Config

	mu       sync.Mutex
	accounts map[string]*accountState
	// added wakes Run when an account was registered.
	added chan struct{}
	// work has the emails whose digest is to be made; overflow is set
	// when an email was left out of it, for the next sweep.
	work     chan key
	overflow atomic.Bool
	// sweepEvery and sweepLimit are the consts of those names; tests
	// change them.
	sweepEvery time.Duration
	sweepLimit int
	// subs are the subscribers to the index's changes, by account.
	subs map[string]map[*subscription]bool

	// fresh holds the raw sources of emails this process has just stored
	// (Fresh), until their digests are made from them; freshBytes is what
	// it holds, at most freshBudget. freshMu also orders a digest's
	// arrival in the index against Fresh, so that nothing is kept for an
	// email whose digest is made already.
	freshMu    sync.Mutex
	fresh      map[key]*freshSource
	freshBytes int64
}

// freshSource is the raw source of just-stored emails (the recipients of
// one message share it), when it came, and how many of them fresh still
// holds it for. Their digest is the same (it is made from the source
// alone), so it is made once, for the first of them, and kept here for the
// others: a message to 50 recipients is parsed once, not 50 times.
type freshSource struct {
	raw  []byte
	at   time.Time
	refs int
	// made is the digest, once made; only the digest worker uses it.
	made *madeDigest
}

// Bounds of what Fresh keeps. A source larger than freshMax is read back
// from the store (under the read budget) like any other; past freshBudget
// in all, sources are left to the store too, so that a burst of mail costs
// at most that much memory here. A source not taken within freshAge (its
// email was deleted before its digest, say) is dropped by the sweep.
const (
	freshMax    = 1 << 20
	freshBudget = 32 << 20
	freshAge    = time.Minute
)

type key struct{ accountID, id string }

// accountState is how far the index of an account is: loaded is closed
// once its emails are in; last is the id of the last event applied, under
// mu, which every application of an event holds.
type accountState struct {
	loaded chan struct{}
	mu     sync.Mutex
	last   eventhub.ID
}

// replaySlack is how far before the start of a load events are applied
// again: replayed in order, they end in the state the load read, and they
// cover the events the load may have missed (the store's clock and this
// process's may differ a little).
const replaySlack = 5 * time.Second

// NewService returns a Service over st; Run fills and follows the index.
func NewService(st Store, cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.AccountsEvery <= 0 {
		cfg.AccountsEvery = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{idx: NewIndex(), store: st, cfg: cfg, accounts: map[string]*accountState{},
		added: make(chan struct{}, 1), work: make(chan key, queueSize), subs: map[string]map[*subscription]bool{},
		fresh: map[key]*freshSource{}, sweepEvery: sweepEvery, sweepLimit: sweepLimit}
}

// Fresh takes note of emails this process has just stored with raw as
// their source (given as received, with no parts of a create request's), so
// that their digests are made from raw, without reading them back from the
// store (ingest.Config.Stored). It only takes note: the digests are made in
// the background, as for every other email.
func (s *Service) Fresh(raw []byte, emails []*store.Email) {
	if len(raw) > freshMax {
		return
	}
	src := &freshSource{raw: raw, at: time.Now()}
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	for _, e := range emails {
		k := key{e.AccountID, e.ID}
		if _, digested := s.idx.Has(k.accountID, k.id); digested {
			continue // a repeat of a delivery, or another replica was quicker
		}
		if _, ok := s.fresh[k]; ok {
			continue
		}
		if src.refs == 0 {
			if s.freshBytes+int64(len(raw)) > freshBudget {
				return
			}
			s.freshBytes += int64(len(raw))
		}
		src.refs++
		s.fresh[k] = src
	}
}

// takeFresh returns the source Fresh kept for k, if any, and forgets it.
func (s *Service) takeFresh(k key) (*freshSource, bool) {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	return s.dropFresh(k)
}

// dropFresh forgets the source kept for k; its bytes are no longer counted
// once no email holds it. freshMu is held.
func (s *Service) dropFresh(k key) (*freshSource, bool) {
	f, ok := s.fresh[k]
	if ok {
		delete(s.fresh, k)
		if f.refs--; f.refs == 0 {
			s.freshBytes -= int64(len(f.raw))
		}
	}
	return f, ok
}

// dropStaleFresh forgets the sources kept for longer than freshAge.
func (s *Service) dropStaleFresh(now time.Time) {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	for k, f := range s.fresh {
		if now.Sub(f.at) > freshAge {
			s.dropFresh(k)
		}
	}
}

// setDigest puts the digest of k into the index, and forgets any source
// Fresh kept for k meanwhile.
func (s *Service) setDigest(k key, d *Digest) {
	s.setDigests(k.accountID, []string{k.id}, d)
}

// setDigests gives the account's emails ids the same digest d (the
// recipients of one message), in the index, and forgets any source Fresh
// kept for them meanwhile.
func (s *Service) setDigests(accountID string, ids []string, d *Digest) {
	s.freshMu.Lock()
	s.idx.SetDigests(accountID, ids, d)
	for _, id := range ids {
		s.dropFresh(key{accountID, id})
	}
	s.freshMu.Unlock()
	s.notify(accountID)
}

// Run indexes every account, follows their changes and makes the digests
// of their emails until ctx ends.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.digests(ctx) })
	tick := time.NewTicker(s.cfg.AccountsEvery)
	defer tick.Stop()
	started := map[string]bool{}
	for {
		for _, a := range s.cfg.Accounts() {
			s.state(a.ID)
		}
		s.mu.Lock()
		for id := range s.accounts {
			if !started[id] {
				started[id] = true
				wg.Go(func() { s.follow(ctx, id) })
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.added:
		}
	}
}

// state returns the account's state, registering the account when the
// service does not know it yet: Run then starts following it.
func (s *Service) state(accountID string) *accountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	state := s.accounts[accountID]
	if state == nil {
		state = &accountState{loaded: make(chan struct{})}
		s.accounts[accountID] = state
		select {
		case s.added <- struct{}{}:
		default: // Run has a wake-up pending already
		}
	}
	return state
}

// follow loads the account's emails into the index, then applies its
// events. When a subscription ends (it fell behind: a burst of mail), it
// subscribes again and applies the events it missed from the store's
// history; only when the history no longer reaches back does it load the
// account again, which reads every email of it.
func (s *Service) follow(ctx context.Context, accountID string) {
	s.mu.Lock()
	state := s.accounts[accountID]
	s.mu.Unlock()
	loaded := false
	for ctx.Err() == nil {
		// Subscribe first: what changes while the account is read comes
		// as events after it.
		sub := s.store.Subscribe(accountID)
		if loaded && s.resume(ctx, state, accountID) {
			s.apply(ctx, state, accountID, sub)
			sub.Close()
			continue
		}
		state.mu.Lock()
		state.last = eventhub.ID{MS: time.Now().Add(-replaySlack).UnixMilli()}
		state.mu.Unlock()
		if err := s.load(ctx, accountID); err != nil {
			sub.Close()
			if ctx.Err() == nil {
				s.cfg.Log.Warn("search: reading an account's emails failed; retrying", "account", accountID, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		loaded = true
		select {
		case <-state.loaded:
		default:
			close(state.loaded)
		}
		s.notify(accountID)
		s.apply(ctx, state, accountID, sub)
		sub.Close()
	}
}

// resume applies the account's events that a subscription which ended
// did not deliver, and reports whether the store's history had them all
// (false too when it could not be read).
func (s *Service) resume(ctx context.Context, state *accountState, accountID string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	complete, err := s.applyHistory(ctx, state, accountID)
	return err == nil && complete
}

// load reads an account a page of loadPage emails at a time (the most a
// list returns), and puts them into the index loadBatch at a time:
// PutAll costs the account's size per call, so a call per page made the
// load of a million emails quadratic.
const (
	loadPage  = 100
	loadBatch = 10_000
)

// load puts every email of the account into the index, with its digest
// when the store has one, and queues the others' digests.
func (s *Service) load(ctx context.Context, accountID string) error {
	q := store.ListQuery{AccountID: accountID, Limit: loadPage}
	var batch []*store.Email
	digests := map[string][]byte{}
	for {
		lctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		page, err := s.store.ListEmails(lctx, q)
		var found map[string][]byte
		if err == nil && len(page) > 0 {
			ids := make([]string, len(page))
			for i, e := range page {
				ids[i] = e.ID
			}
			found, err = s.store.GetChecks(lctx, accountID, ids, digestCheck)
		}
		cancel()
		if err != nil {
			return err
		}
		batch = append(batch, page...)
		maps.Copy(digests, found)
		last := len(page) < q.Limit
		if last || len(batch) >= loadBatch {
			s.loadBatch(accountID, batch, digests)
			batch, digests = batch[:0], map[string][]byte{}
		}
		if last {
			return nil
		}
		q.Before = page[len(page)-1].ID
	}
}

// loadBatch puts emails into the index, with their digests when digests
// has them, and queues the others' digests. Emails with the same digest
// (the recipients of one message) share it in memory, as they do when it
// is made (setDigests).
func (s *Service) loadBatch(accountID string, emails []*store.Email, digests map[string][]byte) {
	s.idx.PutAll(accountID, emails)
	same := map[string][]string{} // ids by digest, as stored
	for _, e := range emails {
		if _, digested := s.idx.Has(accountID, e.ID); digested {
			continue
		}
		if v, ok := digests[e.ID]; ok {
			same[string(v)] = append(same[string(v)], e.ID)
		} else {
			s.queue(accountID, e.ID)
		}
	}
	for v, ids := range same {
		var d Digest
		if json.Unmarshal([]byte(v), &d) != nil {
			for _, id := range ids {
				s.queue(accountID, id)
			}
			continue
		}
		s.idx.SetDigests(accountID, ids, &d)
	}
}

// apply applies the account's events to the index until the subscription
// ends or ctx does.
func (s *Service) apply(ctx context.Context, state *accountState, accountID string, sub store.Subscription) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, open := <-sub.Events():
			if !open {
				return
			}
			state.mu.Lock()
			s.applyEvent(state, accountID, e)
			state.mu.Unlock()
		}
	}
}

// applyEvent applies e unless an event after it was applied already;
// state.mu is held.
func (s *Service) applyEvent(state *accountState, accountID string, e store.Event) {
	if id, err := eventhub.ParseID(e.ID); err == nil {
		if !state.last.Less(id) {
			return
		}
		state.last = id
	}
	switch {
	case e.Type == store.EmailDeleted:
		s.idx.Delete(accountID, e.EmailID)
	case e.Email != nil:
		s.idx.Put(e.Email)
		if e.Type == store.EmailCreated {
			s.queue(accountID, e.EmailID)
		}
	}
	s.notify(accountID)
}

// catchUp applies the account's events that its subscription has not
// delivered yet, so that a query sees every change answered before it
// (the subscription's delivery is asynchronous). A history that no longer
// reaches back is left to the subscription.
func (s *Service) catchUp(ctx context.Context, accountID string) error {
	s.mu.Lock()
	state := s.accounts[accountID]
	s.mu.Unlock()
	if state == nil {
		return nil
	}
	_, err := s.applyHistory(ctx, state, accountID)
	return err
}

// applyHistory applies the account's events after the last one applied,
// from the store's history, and reports whether that history reached back
// to it.
func (s *Service) applyHistory(ctx context.Context, state *accountState, accountID string) (complete bool, err error) {
	state.mu.Lock()
	defer state.mu.Unlock()
	events, complete, err := s.store.EventsAfter(ctx, accountID, state.last.String())
	if err != nil {
		return false, err
	}
	for _, e := range events {
		s.applyEvent(state, accountID, e)
	}
	return complete, nil
}

// queue asks for the email's digest; when the queue is full the email is
// left for the sweep of undigested emails.
func (s *Service) queue(accountID, id string) {
	select {
	case s.work <- key{accountID, id}:
	default:
		s.overflow.Store(true)
	}
}

// sweepEvery is how often the digest worker looks for emails without a
// digest that no queue holds (making it failed, or the queue was full);
// sweepLimit bounds the emails of an account one sweep queues.
const (
	sweepEvery = 10 * time.Second
	sweepLimit = 10_000
)

// queueSize bounds the emails queued for their digest; past it they are
// left to the sweep, which queues them as soon as the queue is empty. It
// holds a sweep's sweepLimit. The queue's buffer is in the live heap, and
// scanned by the collector, at any queue length: 100,000 keys were 3 MB.
const queueSize = 16 << 10

// maxDigestBatch bounds the queued emails the digest worker takes at once:
// their digests are kept in the store with one call per account
// (store.Checks.PutChecks) rather than one per email.
const maxDigestBatch = 64

// digests makes the digests of queued emails, a batch of those queued
// together at a time, and sweeps for those left out: every sweepEvery,
// and as soon as the queue is empty when emails were left out of it (it
// was full, or a sweep had more than its limit), so that a burst larger
// than the queue (a million emails at once) is digested at full speed
// rather than sweepLimit a tick. Unless a digest was made since the last
// sweep (the store is down, say), that sweep waits for the tick.
func (s *Service) digests(ctx context.Context) {
	tick := time.NewTicker(s.sweepEvery)
	defer tick.Stop()
	progress := true
	for {
		if progress && len(s.work) == 0 && s.overflow.Swap(false) {
			progress = false
			s.sweep()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case k := <-s.work:
			if s.digestBatch(ctx, s.takeQueued(k)) > 0 {
				progress = true
			}
		case now := <-tick.C:
			s.dropStaleFresh(now)
			s.overflow.Store(false)
			s.sweep()
		}
	}
}

// sweep queues the emails without a digest of every account, at most
// sweepLimit of each; an account with more is noted as left out.
func (s *Service) sweep() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.accounts))
	for id := range s.accounts {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, accountID := range ids {
		undigested := s.idx.Undigested(accountID, s.sweepLimit)
		if len(undigested) == s.sweepLimit {
			s.overflow.Store(true)
		}
		for _, id := range undigested {
			s.queue(accountID, id)
		}
	}
}

// takeQueued returns first and whatever else is queued already, without
// waiting for more, up to maxDigestBatch emails, each once.
func (s *Service) takeQueued(first key) []key {
	batch := []key{first}
	seen := map[key]bool{first: true}
	for len(batch) < maxDigestBatch {
		var k key
		select {
		case k = <-s.work:
		default:
			return batch
		}
		if !seen[k] {
			seen[k] = true
			batch = append(batch, k)
		}
	}
	return batch
}

// madeDigest is a digest made from a source, and its form in the store.
type madeDigest struct {
	d *Digest
	v []byte
}

// sameDigest is the emails of one account that get one digest.
type sameDigest struct {
	accountID string
	made      *madeDigest
	ids       []string
}

// digestBatch makes the digests of the emails of batch, keeps them in the
// store with one PutChecks per account, then puts them in the index, those
// of emails that share a source together. A digest that could not be kept
// in the store is put in the index all the same: it is made again after a
// restart. It returns how many emails got a digest.
func (s *Service) digestBatch(ctx context.Context, batch []key) int {
	var groups []*sameDigest
	byMade := map[*madeDigest]*sameDigest{}
	byAccount := map[string]map[string][]byte{}
	n := 0
	for _, k := range batch {
		if ctx.Err() != nil {
			return n
		}
		m, ok := s.digest(ctx, k)
		if !ok {
			continue
		}
		n++
		g := byMade[m]
		if g == nil || g.accountID != k.accountID {
			g = &sameDigest{accountID: k.accountID, made: m}
			byMade[m] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, k.id)
		if byAccount[k.accountID] == nil {
			byAccount[k.accountID] = map[string][]byte{}
		}
		byAccount[k.accountID][k.id] = m.v
	}
	for accountID, results := range byAccount {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err := s.store.PutChecks(pctx, accountID, digestCheck, results)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("search: keeping emails' digests failed", "account", accountID, "emails", len(results), "err", err)
		}
	}
	for _, g := range groups {
		s.setDigests(g.accountID, g.ids, g.made.d)
	}
	return n
}

// digest makes the email's digest, for digestBatch to keep, unless the
// index has it or the store does (another replica made it): then it puts
// the store's in the index and reports false, as it does when there is no
// such email or reading it failed (the sweep tries again).
func (s *Service) digest(ctx context.Context, k key) (*madeDigest, bool) {
	src, fresh := s.takeFresh(k)
	if has, digested := s.idx.Has(k.accountID, k.id); !has || digested {
		return nil, false
	}
	if fresh && src.made != nil {
		return src.made, true // another recipient's, from the same source
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var read *bodies.Read
	var err error
	if fresh {
		// Just stored here: no other replica is likely to have made the
		// digest yet, and the source is in hand.
		read, err = s.cfg.Bodies.ParsedText(dctx, k.accountID, k.id, src.raw)
	} else {
		if v, err := s.store.GetCheck(dctx, k.accountID, k.id, digestCheck); err == nil {
			var d Digest
			if json.Unmarshal(v, &d) == nil {
				s.setDigest(k, &d)
				return nil, false
			}
		}
		// The event that queued a new email can come before ingest
		// tells Fresh of it (Stored runs once the create has answered);
		// by the end of the read above the source is often in hand.
		if src, fresh = s.takeFresh(k); fresh && src.made != nil {
			return src.made, true
		} else if fresh {
			read, err = s.cfg.Bodies.ParsedText(dctx, k.accountID, k.id, src.raw)
		} else {
			read, err = s.cfg.Bodies.Parsed(dctx, k.accountID, k.id)
		}
	}
	if err != nil {
		if !store.IsCode(err, store.NotFound) && ctx.Err() == nil {
			s.cfg.Log.Warn("search: reading an email to index it failed; it is tried again later", "account", k.accountID, "err", err)
		}
		return nil, false
	}
	b := read.Body
	d := MakeDigest(Content{Headers: b.Headers, Text: b.Text, HTML: b.HTML, Attachments: len(b.Attachments)})
	read.Close()
	v, _ := json.Marshal(d)
	m := &madeDigest{d: d, v: v}
	if fresh {
		src.made = m
	}
	return m, true
}

// ready waits until the account's emails are in the index, and applies
// the events not delivered yet. An account met for the first time (a
// query in the moment after start, or an account added to the accounts
// file since) is registered and waited for like the others.
func (s *Service) ready(ctx context.Context, accountID string) error {
	state := s.state(accountID)
	select {
	case <-state.loaded:
	case <-ctx.Done():
		return store.Wrap(store.Unavailable, ctx.Err(), "the search index of the account is still being built")
	}
	return s.catchUp(ctx, accountID)
}

// texts reads digest texts from the store, for the index's checks of body
// words.
func (s *Service) texts(ctx context.Context, accountID string, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), store.MaxCheckBatch)
		got, err := s.store.GetChecks(ctx, accountID, ids[:n], digestCheck)
		if err != nil {
			return nil, err
		}
		for id, v := range got {
			var d Digest
			if json.Unmarshal(v, &d) == nil {
				out[id] = d.Text
			}
		}
		ids = ids[n:]
	}
	return out, nil
}

// List returns the page of f's account that f's filters and q select,
// newest first. It returns NotFound when f.Before names no email of the
// account, and the store's errors.
func (s *Service) List(ctx context.Context, f store.ListQuery, q Query) ([]*store.Email, error) {
	if err := s.ready(ctx, f.AccountID); err != nil {
		return nil, err
	}
	ids, err := s.idx.Search(ctx, f, q, s.texts)
	if err != nil {
		return nil, err
	}
	out := make([]*store.Email, 0, len(ids))
	for _, id := range ids {
		e, err := s.store.GetEmail(ctx, f.AccountID, id)
		if store.IsCode(err, store.NotFound) {
			continue // deleted since the index found it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// IDs returns the ids of every email of the account that f's filters and q
// select (f's Limit and Offset ignored), newest first: what a bulk request
// acts on.
func (s *Service) IDs(ctx context.Context, f store.ListQuery, q Query) ([]string, error) {
	if err := s.ready(ctx, f.AccountID); err != nil {
		return nil, err
	}
	f.Limit, f.Offset = 1<<31-1, 0
	return s.idx.Search(ctx, f, q, s.texts)
}

// Count returns how many of the account's emails f's filters and q select.
func (s *Service) Count(ctx context.Context, f store.ListQuery, q Query) (int64, error) {
	if err := s.ready(ctx, f.AccountID); err != nil {
		return 0, err
	}
	return s.idx.Count(ctx, f, q, s.texts)
}

// Stats returns the account's counts, by status and by label.
func (s *Service) Stats(ctx context.Context, accountID string) (Stats, error) {
	if err := s.ready(ctx, accountID); err != nil {
		return Stats{}, err
	}
	return s.idx.Stats(accountID), nil
}

// Summary returns what a message list shows of the email's digest, and
// false when the index has none yet (Index.Summary).
func (s *Service) Summary(accountID, id string) (Summary, bool) { return s.idx.Summary(accountID, id) }

// Summaries is Summary of each of emails, in one look at the index
// (Index.Summaries).
func (s *Service) Summaries(emails []*store.Email) ([]Summary, []bool) {
	return s.idx.Summaries(emails)
}

// Index gives the index, for tests.
func (s *Service) Index() *Index { return s.idx }

// Lister is what a held wait with a query reads: the page from the index,
// and the index's changes of the account, which follow the store's events
// once the index has applied them.
type Lister struct {
	s *Service
	q Query
}

// Lister returns the Lister of q.
func (s *Service) Lister(q Query) Lister { return Lister{s: s, q: q} }

// ListEmails implements held.Store.
func (l Lister) ListEmails(ctx context.Context, f store.ListQuery) ([]*store.Email, error) {
	return l.s.List(ctx, f, l.q)
}

// Subscribe implements held.Store: an event (with no email) each time the
// account's index changes.
func (l Lister) Subscribe(accountID string) store.Subscription {
	return l.s.subscribe(accountID)
}

type subscription struct {
	s         *Service
	accountID string
	ch        chan store.Event
	once      sync.Once
}

func (sub *subscription) Events() <-chan store.Event { return sub.ch }

func (sub *subscription) Close() {
	sub.once.Do(func() {
		sub.s.mu.Lock()
		delete(sub.s.subs[sub.accountID], sub)
		sub.s.mu.Unlock()
	})
}

func (s *Service) subscribe(accountID string) store.Subscription {
	sub := &subscription{s: s, accountID: accountID, ch: make(chan store.Event, 1)}
	s.mu.Lock()
	if s.subs[accountID] == nil {
		s.subs[accountID] = map[*subscription]bool{}
	}
	s.subs[accountID][sub] = true
	s.mu.Unlock()
	return sub
}

// notify tells the account's subscribers that its index changed; one who
// has not taken the last signal yet loses nothing by missing this one.
func (s *Service) notify(accountID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subs[accountID] {
		select {
		case sub.ch <- store.Event{AccountID: accountID}:
		default:
		}
	}
}
