package redisstore

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/eventhub"
)

// Events reach every replica through Redis: each change is appended to the
// account's stream P{T}:ev (trimmed to about eventHistory entries, for
// resumption) and published, with the stream id, on the channel P + "events",
// in one script so that publication order is stream order. Creates do this
// inside createScript, with the write; updates and deletes right after theirs. Every Store
// subscribes to that channel once and fans events out to its own
// subscribers through an eventhub.Hub. go-redis re-subscribes after an
// outage; events published while a replica was cut off reach its
// subscribers only through EventsAfter.

// eventHistory is about how many events per account the stream keeps.
const eventHistory = 1000

var publishScript = redis.NewScript(`
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2])
redis.call('PUBLISH', ARGV[3], id .. ' ' .. ARGV[2])
return id
`)

func (k accountKeys) events() string { return k.base + "ev" }

func (s *Store) channel() string { return s.prefix + "events" }

// listen feeds the hub from the channel until the Store is closed.
func (s *Store) listen(ps *redis.PubSub) {
	defer close(s.listening)
	for msg := range ps.Channel(redis.WithChannelSize(4096)) {
		id, payload, ok := strings.Cut(msg.Payload, " ")
		if !ok {
			continue
		}
		var e store.Event
		if json.Unmarshal([]byte(payload), &e) != nil {
			continue
		}
		e.ID = id
		s.hub.Publish(e)
	}
}

// publish announces a committed change to every replica. The change is
// already durable, so a failure here is not the caller's failure: it only
// delays subscribers until they resume with EventsAfter.
func (s *Store) publish(ctx context.Context, typ store.EventType, accountID, id string, e *store.Email) {
	payload, err := eventPayload(typ, accountID, id, e)
	if err != nil {
		return
	}
	k := s.account(accountID)
	_ = publishScript.Run(ctx, s.client, []string{k.events()}, eventHistory, payload, s.channel()).Err()
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
func (s *Store) Subscribe(accountID string) store.Subscription {
	return s.hub.Subscribe(accountID)
}

// EventsAfter implements store.Notifier from the account's event stream in
// Redis. It returns Invalid for a malformed id and Unavailable when Redis
// cannot be reached.
func (s *Store) EventsAfter(ctx context.Context, accountID, afterID string) ([]store.Event, bool, error) {
	after, err := eventhub.ParseID(afterID)
	if err != nil {
		return nil, false, err
	}
	key := s.account(accountID).events()
	msgs, err := s.client.XRangeN(ctx, key, "("+after.String(), "+", eventHistory).Result()
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
		var e store.Event
		if json.Unmarshal([]byte(raw), &e) != nil {
			continue
		}
		e.ID = m.ID
		events = append(events, e)
	}
	return events, complete, nil
}
