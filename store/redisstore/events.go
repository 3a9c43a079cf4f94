package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/store"
)

// Events reach every replica through Redis: each change is appended to the
// account's stream P{T}:ev (trimmed to about eventHistory entries, for
// resumption) and published, with the stream id, by the same script that
// writes the change (createScript, updateScript, deleteScript), so events
// are in commit order and none is lost between the write and its
// announcement; with replica acknowledgement, creates publish theirs once
// acknowledged instead (ack.go). Stores fan events out to their own
// subscribers through an eventhub.Hub.
//
// On a single Redis they are published on one channel, P + "events", which
// every Store subscribes to once. In a cluster one channel would live on
// one shard, and every account's live events would stop while that shard
// fails over; so each account has a sharded channel in its own slot,
// P{T}:ch (SPUBLISH, Redis 7), which a Store subscribes to (SSUBSCRIBE)
// while it has subscribers for the account: a failover touches only the
// accounts of the failing shard.
//
// Events published while a subscription is down reach no one live. On a
// single Redis, go-redis subscribes again after an outage, and each
// (re)subscription ends the subscriptions it covers: their holders catch
// up with EventsAfter or a query. In a cluster, a shard's failover ends
// the subscriptions on the demoted master (Redis sends sunsubscribe); the
// account's feed then subscribes on the new master and publishes what it
// missed from the stream itself (listenFeed), so subscriptions stay open.

// eventHistory is about how many events per account the stream keeps.
const eventHistory = 1000

func (k accountKeys) events() string { return k.base + "ev" }

func (s *Store) channel() string { return s.prefix + "events" }

// channel is the account's sharded event channel in a cluster.
func (k accountKeys) channel() string { return k.base + "ch" }

// target is the publish target of the account's events (publishFn in
// scripts.go).
func (s *Store) target(k accountKeys) string {
	if s.sharded != nil {
		return "SPUBLISH " + k.channel()
	}
	return "PUBLISH " + s.channel()
}

// A feed is a Store's subscription to one account's sharded channel, shared
// by the Store's subscribers to that account.
type feed struct {
	refs  int                // guarded by Store.feedMu
	stop  context.CancelFunc // ends the feed
	ready chan struct{}      // closed at the first confirmed subscription
	done  chan struct{}      // closed when listenFeed returns
}

const (
	// feedCheck is how long a feed's connection may stay silent before it
	// is pinged, and then how long the answer may take before the
	// connection is given up; it also bounds a catch-up's reads.
	feedCheck = 3 * time.Second
	// feedRetry and feedRetryMax bound the pause between two attempts to
	// subscribe that both failed.
	feedRetry    = 100 * time.Millisecond
	feedRetryMax = 2 * time.Second
	// slotMoveWait bounds how long a feed whose node gave up the slot waits
	// for the cluster map to name the slot's new master.
	slotMoveWait = 2 * time.Second
	// maxSeen bounds how many event ids a feed remembers (cursor).
	maxSeen = 4096
)

// subscribeSharded subscribes to the account's events in a cluster: it
// takes a reference to the account's feed, starting one if needed, and
// waits (at most subscribeWait) until the feed is subscribed.
func (s *Store) subscribeSharded(accountID string) store.Subscription {
	s.feedMu.Lock()
	f := s.feeds[accountID]
	if f == nil {
		ctx, stop := context.WithCancel(context.Background())
		f = &feed{stop: stop, ready: make(chan struct{}), done: make(chan struct{})}
		s.feeds[accountID] = f
		go s.listenFeed(ctx, accountID, f)
	}
	f.refs++
	s.feedMu.Unlock()
	select {
	case <-f.ready:
	case <-time.After(subscribeWait):
	}
	return &feedSubscription{Subscription: s.hub.Subscribe(accountID), s: s, account: accountID, f: f}
}

// errUnsubscribed is a feed's subscription ended by Redis: a feed never
// unsubscribes, it closes its connection.
var errUnsubscribed = errors.New("redis ended the subscription")

// listenFeed feeds the hub from the account's channel until ctx ends.
//
// A subscription is lost when Redis ends it (its node no longer serves the
// slot: a failover demoted it, or the slot moved), when the node answers
// with an error (MOVED), or when the connection breaks or stays silent.
// The feed then subscribes again, on the slot's master as the reloaded
// cluster map names it, and catches up from the account's event stream
// (onSubscribed): its subscribers stay subscribed and miss nothing.
func (s *Store) listenFeed(ctx context.Context, accountID string, f *feed) {
	defer close(f.done)
	channel := s.account(accountID).channel()
	cur := newCursor(s.lateBy())
	var retry time.Duration
	for {
		from := s.slotMaster(ctx, channel)
		confirmed, err := s.follow(ctx, accountID, from, f, cur)
		if ctx.Err() != nil {
			return
		}
		s.sharded.ReloadState(ctx)
		var rerr redis.Error
		if errors.Is(err, errUnsubscribed) || errors.Is(err, errNotMaster) || errors.As(err, &rerr) {
			s.awaitSlotMove(ctx, channel, from)
		}
		if confirmed {
			retry = 0
		} else {
			retry = min(max(2*retry, feedRetry), feedRetryMax)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// follow takes one subscription to the account's channel, on from, the
// slot's master as the cluster map named it, and feeds the hub from it
// until it is lost (the error says how) or ctx ends. It reports whether
// Redis confirmed the subscription on the slot's master.
func (s *Store) follow(ctx context.Context, accountID, from string, f *feed, cur *cursor) (bool, error) {
	channel := s.account(accountID).channel()
	// Subscribing writes SSUBSCRIBE; its answer comes through Receive.
	ps := s.sharded.SSubscribe(ctx, channel)
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		stop()
		_ = ps.Close()
	}()
	confirmed, pinged := false, false
	for {
		msg, err := ps.ReceiveTimeout(ctx, feedCheck)
		var nerr net.Error
		switch {
		case err == nil:
			pinged = false
		case errors.As(err, &nerr) && nerr.Timeout() && !pinged:
			// The answer to a ping tells a quiet channel from a dead
			// connection.
			pinged = true
			if err := ps.Ping(ctx); err != nil {
				return confirmed, err
			}
			continue
		default:
			return confirmed, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "ssubscribe":
				if err := s.checkMaster(ctx, channel, from); err != nil {
					return false, err
				}
				confirmed = true
				s.onSubscribed(ctx, accountID, f, cur)
			case "sunsubscribe":
				return confirmed, errUnsubscribed
			}
		case *redis.Message:
			id, payload, ok := strings.Cut(m.Payload, " ")
			if !ok {
				continue
			}
			// An ended feed publishes nothing: the account may have a
			// new one already.
			if e, ok := decodeEvent(id, payload); ok && ctx.Err() == nil && cur.admit(e.ID) {
				s.hub.Publish(e)
			}
		}
	}
}

// errNotMaster is a subscription taken on a node that does not master the
// channel's slot.
var errNotMaster = errors.New("the subscription's node is not the slot's master")

// checkMaster returns errNotMaster unless the node at addr masters key's
// slot, by the cluster map and by its own word (ROLE).
//
// Redis accepts a sharded subscription on a replica of the slot's shard,
// and relays the shard's messages to it only once its master counts it as
// a replica. A cluster map taken before a failover names the former master
// for a while; restarted, that node rejoins as the new master's replica,
// so a feed could subscribe there and miss the account's events for as
// long as it takes the new master to learn of its replica (seen in the
// failover test: 132 acknowledged emails never streamed). A subscription
// on a node that says it is a master is ended by Redis (sunsubscribe) when
// the node gives up the slot, and the feed then catches up.
func (s *Store) checkMaster(ctx context.Context, key, addr string) error {
	node, err := s.sharded.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	if node.Options().Addr != addr {
		return errNotMaster // the map changed since the feed subscribed
	}
	ctx, cancel := context.WithTimeout(ctx, feedCheck)
	defer cancel()
	role, err := node.Do(ctx, "ROLE").Slice()
	if err != nil {
		return err
	}
	if len(role) == 0 || role[0] != "master" {
		return errNotMaster
	}
	return nil
}

// onSubscribed runs when Redis confirms a subscription of the account's
// feed: it publishes the events the feed missed before it, from the
// account's stream. When it cannot (the first subscription, whose
// subscribers that gave up waiting for it may have missed events; a stream
// that cannot be read, or that was trimmed past the missed events) it ends
// the account's subscriptions instead, so that their holders catch up
// themselves (EventsAfter, a query), and notes where the stream ends.
func (s *Store) onSubscribed(ctx context.Context, accountID string, f *feed, cur *cursor) {
	if ctx.Err() != nil {
		return // the feed has ended
	}
	if !cur.known || !s.catchUp(ctx, accountID, cur) {
		s.hub.Drop(accountID)
		rctx, cancel := context.WithTimeout(ctx, feedCheck)
		end, err := s.streamEnd(rctx, accountID)
		cancel()
		if err == nil {
			cur.reset(end)
		} else {
			cur.known = false
		}
	}
	select {
	case <-f.ready:
	default:
		close(f.ready)
	}
}

// catchUp publishes the account's events after cur's position that the
// feed has not published; it reports false when it cannot read them all.
func (s *Store) catchUp(ctx context.Context, accountID string, cur *cursor) bool {
	ctx, cancel := context.WithTimeout(ctx, feedCheck)
	defer cancel()
	events, complete, err := s.EventsAfter(ctx, accountID, cur.from().String())
	if err != nil || !complete {
		return false
	}
	for _, e := range events {
		if cur.admit(e.ID) {
			s.hub.Publish(e)
		}
	}
	return true
}

// streamEnd returns the id of the account's newest event (0-0 when there
// is none). It returns Unavailable when Redis cannot be reached.
func (s *Store) streamEnd(ctx context.Context, accountID string) (eventhub.ID, error) {
	msgs, err := s.client.XRevRangeN(ctx, s.account(accountID).events(), "+", "-", 1).Result()
	if err != nil {
		return eventhub.ID{}, classify(err)
	}
	if len(msgs) == 0 {
		return eventhub.ID{}, nil
	}
	return eventhub.ParseID(msgs[0].ID)
}

// lateBy is how long after its stream id an event may be published: an
// acknowledged create's waits for the replicas first (ack.go).
func (s *Store) lateBy() time.Duration {
	late := time.Second
	if s.ackReplicas > 0 {
		late += s.ackTimeout + publishTimeout
	}
	return late
}

// slotMaster returns the address of the master of key's slot as the
// cluster map names it, or "".
func (s *Store) slotMaster(ctx context.Context, key string) string {
	c, err := s.sharded.MasterForKey(ctx, key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// awaitSlotMove waits, at most slotMoveWait, until the cluster map names
// another master than from for key's slot, reloading the map meanwhile.
func (s *Store) awaitSlotMove(ctx context.Context, key, from string) {
	if from == "" {
		return
	}
	deadline := time.Now().Add(slotMoveWait)
	for s.slotMaster(ctx, key) == from && time.Now().Before(deadline) {
		s.sharded.ReloadState(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(reloadEvery):
		}
	}
}

// A cursor is where a feed stands in its account's event stream, for
// catching up after a lost subscription. Acknowledged creates publish their
// events after the script that appended them (ack.go), so events arrive
// out of stream order, up to late after their ids: a catch-up reads the
// stream from late before the newest event published, and publishes only
// the events the feed has not.
type cursor struct {
	late  time.Duration
	known bool // whether floor and newest are known
	// floor is the stream's newest event when the position was taken:
	// the events up to it are not caught up.
	floor eventhub.ID
	// newest is the newest event published, or floor.
	newest eventhub.ID
	// seen holds the ids published from about late before newest, at
	// most maxSeen; order has them in the order published.
	seen  map[eventhub.ID]struct{}
	order []eventhub.ID
}

func newCursor(late time.Duration) *cursor {
	return &cursor{late: late, seen: map[eventhub.ID]struct{}{}}
}

// reset places the cursor at the stream's newest event end.
func (c *cursor) reset(end eventhub.ID) {
	c.known, c.floor, c.newest = true, end, end
	clear(c.seen)
	c.order = c.order[:0]
}

// admit reports whether the event with the stream id id has not been
// published by the feed yet, and notes it as published.
func (c *cursor) admit(id string) bool {
	pid, err := eventhub.ParseID(id)
	if err != nil {
		return true
	}
	if _, ok := c.seen[pid]; ok {
		return false
	}
	c.seen[pid] = struct{}{}
	c.order = append(c.order, pid)
	if c.newest.Less(pid) {
		c.newest = pid
	}
	cut := c.newest.MS - c.late.Milliseconds()
	n := 0
	for n < len(c.order) && (c.order[n].MS < cut || len(c.order)-n > maxSeen) {
		delete(c.seen, c.order[n])
		n++
	}
	c.order = c.order[n:]
	return true
}

// from returns the id after which a catch-up reads the stream: late before
// the newest event published, and not before floor.
func (c *cursor) from() eventhub.ID {
	after := eventhub.ID{MS: c.newest.MS - c.late.Milliseconds() - 1, Seq: math.MaxInt64}
	if after.Less(c.floor) {
		return c.floor
	}
	return after
}

// release drops a reference to the account's feed, ending it with the last.
func (s *Store) release(accountID string, f *feed) {
	s.feedMu.Lock()
	f.refs--
	last := f.refs == 0 && s.feeds[accountID] == f
	if last {
		delete(s.feeds, accountID)
	}
	s.feedMu.Unlock()
	if last {
		f.stop()
	}
}

// closeFeeds ends every feed and waits for their listeners.
func (s *Store) closeFeeds() {
	s.feedMu.Lock()
	feeds := s.feeds
	s.feeds = map[string]*feed{}
	s.feedMu.Unlock()
	for _, f := range feeds {
		f.stop()
		<-f.done
	}
}

// feedSubscription is a hub subscription that holds a reference to its
// account's feed.
type feedSubscription struct {
	store.Subscription
	s       *Store
	account string
	f       *feed
	once    sync.Once
}

func (fs *feedSubscription) Close() {
	fs.once.Do(func() {
		fs.Subscription.Close()
		fs.s.release(fs.account, fs.f)
	})
}

// listen feeds the hub from the channel until the Store is closed. Each
// (re)subscription ends the hub's subscriptions: events published while the
// connection was down reached no one, so their holders resubscribe and
// catch up with EventsAfter (event streams) or a query (waiting lists).
func (s *Store) listen(ps *redis.PubSub) {
	defer close(s.listening)
	first := true
	for msg := range ps.ChannelWithSubscriptions(redis.WithChannelSize(4096)) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			// Subscriptions taken before this one (Subscribe gave up
			// waiting) may have missed events: end them too.
			s.hub.DropAll()
			if first {
				first = false
				close(s.subscribed)
			}
		case *redis.Message:
			id, payload, ok := strings.Cut(m.Payload, " ")
			if !ok {
				continue
			}
			if acc, ok := accountOf(payload); ok && !s.hub.Wants(acc) {
				// Decoding is most of what an event costs a replica,
				// and under load nobody is listening.
				continue
			}
			if e, ok := decodeEvent(id, payload); ok {
				s.hub.Publish(e)
			}
		}
	}
}

// accountOf returns the account of an event payload without decoding it;
// it reports false when it cannot tell. Every "accountId" key in a payload
// (the event's, its email's) holds the same account, and none can appear
// inside a string value, whose quotes are escaped.
func accountOf(payload string) (string, bool) {
	const key = `"accountId":"`
	i := strings.Index(payload, key)
	if i < 0 {
		return "", false
	}
	rest := payload[i+len(key):]
	j := strings.IndexByte(rest, '"')
	if j < 0 || strings.IndexByte(rest[:j], '\\') >= 0 {
		return "", false
	}
	return rest[:j], true
}

// wireEvent is an event as the stream and the channel carry it: a
// store.Event without its id (the stream assigns it), or, from updateScript,
// with the email's stored fields instead of the email.
type wireEvent struct {
	store.Event
	Fields []any `json:"fields,omitempty"`
	// Read is the read flag of an updated email, beside Fields (which
	// older releases decode) rather than among them.
	Read string `json:"read,omitempty"`
}

// decodeEvent decodes the event with stream id id; it reports false for a
// payload it cannot read.
func decodeEvent(id, payload string) (store.Event, bool) {
	var w wireEvent
	if json.Unmarshal([]byte(payload), &w) != nil {
		return store.Event{}, false
	}
	if w.Fields != nil {
		r, err := decodeFields(w.Fields)
		if err != nil {
			return store.Event{}, false
		}
		// Records of the records hash leave these out (storedValues).
		if r.ID == "" {
			r.ID = w.EmailID
		}
		if r.AccountID == "" {
			r.AccountID = w.AccountID
		}
		r.Read = w.Read == "1"
		w.Email = r.email()
	}
	w.ID = id
	return w.Event, true
}

// createdEvent is the event of a created email as the stream and the
// channel carry it: with the email's stored fields (in the order of fields)
// instead of the email, as updateScript writes its events, so that the
// email is encoded once; decodeEvent reads both forms.
type createdEvent struct {
	Type      store.EventType `json:"type"`
	AccountID string          `json:"accountId"`
	EmailID   string          `json:"emailId"`
	Fields    []string        `json:"fields"`
}

// createdPayload returns the createdEvent of the email id with the stored
// fields vals. It cannot fail: the event is made of strings.
func createdPayload(accountID, id string, vals []string) []byte {
	b, _ := json.Marshal(createdEvent{Type: store.EmailCreated, AccountID: accountID, EmailID: id, Fields: vals})
	return b
}

// eventPayload is an event as the stream and the channel carry it, without
// its id (the stream assigns it).
func eventPayload(typ store.EventType, accountID, id string, e *store.Email) ([]byte, error) {
	b, err := json.Marshal(store.Event{Type: typ, AccountID: accountID, EmailID: id, Email: e})
	if err != nil {
		return nil, store.Wrap(store.Internal, err, "encode event")
	}
	return b, nil
}

// Subscribe implements store.Events: the subscription gets the account's
// events from every replica sharing this Redis and prefix.
//
// Until this Store's own subscription to Redis is confirmed (just after
// New) it waits for it, at most subscribeWait, so that a subscriber does not
// miss the events that follow; with Redis down it goes on without.
func (s *Store) Subscribe(accountID string) store.Subscription {
	if s.sharded != nil {
		return s.subscribeSharded(accountID)
	}
	select {
	case <-s.subscribed:
	case <-time.After(subscribeWait):
	}
	return s.hub.Subscribe(accountID)
}

// subscribeWait bounds how long Subscribe waits for the Store's first
// subscription to Redis.
const subscribeWait = 2 * time.Second

// EventsAfter implements store.Events from the account's event stream in
// Redis. It returns Invalid for a malformed id and Unavailable when Redis
// cannot be reached.
func (s *Store) EventsAfter(ctx context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	after, err := eventhub.ParseID(afterID)
	if err != nil {
		return nil, false, err
	}
	key := s.account(accountID).events()
	// The stream is bounded, so the whole rest of it is one read.
	msgs, err := s.client.XRange(ctx, key, "("+after.String(), "+").Result()
	if err != nil {
		return nil, false, classify(err)
	}
	// A stream shorter than its bound was never trimmed; a longer one may
	// have lost entries before its first kept one.
	complete := true
	if n, err := s.client.XLen(ctx, key).Result(); err != nil {
		return nil, false, classify(err)
	} else if n >= eventHistory {
		first, err := s.client.XRangeN(ctx, key, "-", "+", 1).Result()
		if err != nil {
			return nil, false, classify(err)
		}
		if len(first) == 1 {
			if id, err := eventhub.ParseID(first[0].ID); err == nil && after.Less(id) {
				complete = false
			}
		}
	}
	events := make([]store.Event, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		if e, ok := decodeEvent(m.ID, raw); ok {
			events = append(events, e)
		}
	}
	return events, complete, nil
}
