package redisstore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/eventhub"
)

// Events reach every replica through Redis: each change is appended to the
// account's stream P{T}:ev (trimmed to about eventHistory entries, for
// resumption) and published, with the stream id, on the channel P + "events",
// by the same script that writes the change (createScript, updateScript,
// deleteScript), so events are in commit order and none is lost between the
// write and its announcement. Every Store subscribes to that channel once
// and fans events out to its own subscribers through an eventhub.Hub.
// go-redis re-subscribes after an outage; events published meanwhile reach
// subscribers only through EventsAfter, so listen ends every subscription
// when that happens.

// eventHistory is about how many events per account the stream keeps.
const eventHistory = 1000

func (k accountKeys) events() string { return k.base + "ev" }

func (s *Store) channel() string { return s.prefix + "events" }

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
