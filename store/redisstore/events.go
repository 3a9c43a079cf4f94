package redisstore

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/eventhub"
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
// while it has subscribers for the account: a failover silences only the
// accounts of the failing shard. go-redis re-subscribes after an outage;
// events published meanwhile reach subscribers only through EventsAfter,
// so every (re)subscription ends the subscriptions it covers.

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
	ps    *redis.PubSub
	refs  int           // guarded by Store.feedMu
	ready chan struct{} // closed at the first confirmed subscription
	done  chan struct{} // closed when listenFeed returns
}

// subscribeSharded subscribes to the account's events in a cluster: it
// takes a reference to the account's feed, starting one if needed, and
// waits (at most subscribeWait) until the feed is subscribed.
func (s *Store) subscribeSharded(accountID string) store.Subscription {
	s.feedMu.Lock()
	f := s.feeds[accountID]
	if f == nil {
		// A PubSub without channels does no I/O; listenFeed subscribes.
		f = &feed{ps: s.sharded.SSubscribe(context.Background()), ready: make(chan struct{}), done: make(chan struct{})}
		s.feeds[accountID] = f
		go s.listenFeed(accountID, f)
	}
	f.refs++
	s.feedMu.Unlock()
	select {
	case <-f.ready:
	case <-time.After(subscribeWait):
	}
	return &feedSubscription{Subscription: s.hub.Subscribe(accountID), s: s, account: accountID, f: f}
}

// listenFeed feeds the hub from the account's channel until the feed is
// closed. Each confirmed (re)subscription ends the account's subscriptions
// taken before it, which may have missed events.
func (s *Store) listenFeed(accountID string, f *feed) {
	defer close(f.done)
	_ = f.ps.SSubscribe(context.Background(), s.account(accountID).channel())
	ready := false
	for msg := range f.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "ssubscribe" {
				continue
			}
			s.hub.Drop(accountID)
			if !ready {
				ready = true
				close(f.ready)
			}
		case *redis.Message:
			id, payload, ok := strings.Cut(m.Payload, " ")
			if !ok {
				continue
			}
			if e, ok := decodeEvent(id, payload); ok {
				s.hub.Publish(e)
			}
		}
	}
}

// release drops a reference to the account's feed, closing it with the last.
func (s *Store) release(accountID string, f *feed) {
	s.feedMu.Lock()
	f.refs--
	last := f.refs == 0 && s.feeds[accountID] == f
	if last {
		delete(s.feeds, accountID)
	}
	s.feedMu.Unlock()
	if last {
		_ = f.ps.Close()
	}
}

// closeFeeds closes every feed and waits for their listeners.
func (s *Store) closeFeeds() {
	s.feedMu.Lock()
	feeds := s.feeds
	s.feeds = map[string]*feed{}
	s.feedMu.Unlock()
	for _, f := range feeds {
		_ = f.ps.Close()
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

// Subscribe implements store.Notifier: the subscription gets the account's
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

// EventsAfter implements store.Notifier from the account's event stream in
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
