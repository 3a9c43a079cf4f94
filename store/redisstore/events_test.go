package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/store"
)

// TestPubSubReconnectEndsSubscriptions cuts the Store's pub/sub connection:
// events published until go-redis subscribes again reach no subscriber, so
// the open subscriptions must end (their holders resubscribe and catch up
// with EventsAfter), and new ones must get events again.
func TestPubSubReconnectEndsSubscriptions(t *testing.T) {
	t.Parallel()
	opts, err := redis.ParseURL(testRedisURL())
	if err != nil {
		t.Fatal(err)
	}
	name := "mailsinktest-" + randomHex(6)
	opts.ClientName = name
	s := New(redis.NewClient(opts), Options{Prefix: "mailsinktest:" + randomHex(8) + ":"})
	admin := singleClient(t)
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, admin, s.prefix)
		admin.Close()
	})
	ctx := context.Background()
	sub := s.Subscribe(acct)

	// Kill only this Store's pub/sub connection: other tests share Redis.
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " sub=1 ") {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					if err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
						t.Fatal(err)
					}
					killed++
				}
			}
		}
	}
	if killed != 1 {
		t.Fatalf("found %d pub/sub connections named %s, want 1:\n%s", killed, name, list)
	}
	select {
	case _, open := <-sub.Events():
		if open {
			t.Fatal("got an event, want the subscription to end")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription is still open 30s after its connection was cut")
	}

	// Subscribed again, events flow.
	again := s.Subscribe(acct)
	defer again.Close()
	e := testEmail(acct, "a@example.com", "b@example.com", 1700000000000)
	if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, open := <-again.Events():
		if !open || ev.EmailID != store.NormalizeID(e.ID) {
			t.Fatalf("event %+v (open %v), want the create of %s", ev, open, e.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event after the reconnect")
	}
}

func TestAccountOf(t *testing.T) {
	goPayload, err := eventPayload(store.EmailCreated, "acct-1", "id-1", &store.Email{AccountID: "acct-1", Subject: ptr(`"accountId":"other"`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		payload string
		want    string
		ok      bool
	}{
		{string(goPayload), "acct-1", true},
		{`{"fields":["subj","x"],"accountId":"acct-2","type":"email.updated"}`, "acct-2", true},
		{`{"type":"email.deleted","accountId":"a\/b"}`, "", false}, // escaped: decode to know
		{`{"type":"email.deleted"}`, "", false},
		{`{"accountId":"unterminated`, "", false},
	} {
		got, ok := accountOf(tc.payload)
		if got != tc.want || ok != tc.ok {
			t.Errorf("accountOf(%s) = %q, %v; want %q, %v", tc.payload, got, ok, tc.want, tc.ok)
		}
	}
}

// TestShardedEventsPerAccount runs on the test cluster: each account's
// events go through its own sharded channel on its own master, so when one
// master's subscription connections break (as in its failover), only the
// subscriptions of accounts on that master end; another shard's account
// keeps its subscription and its live events.
func TestShardedEventsPerAccount(t *testing.T) {
	t.Parallel()
	prefix := "mailsinktest:" + randomHex(8) + ":"
	s := New(clusterClient(t), Options{Prefix: prefix})
	admin := clusterClient(t).(*redis.ClusterClient)
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, admin, prefix)
		admin.Close()
	})
	ctx := context.Background()
	// Two accounts whose slots have different masters.
	master := func(account string) *redis.Client {
		c, err := admin.MasterForKey(ctx, s.account(account).channel())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := "shard-a-" + randomHex(4)
	var b string
	for i := 0; b == ""; i++ {
		if c := "shard-b-" + randomHex(4); master(c).Options().Addr != master(a).Options().Addr {
			b = c
		}
		if i > 1000 {
			t.Fatal("no account on another master")
		}
	}
	subA, subB := s.Subscribe(a), s.Subscribe(b)
	defer subA.Close()
	defer subB.Close()
	for _, acc := range []string{a, b} {
		ch, err := master(acc).PubSubShardChannels(ctx, s.account(acc).channel()).Result()
		if err != nil || len(ch) != 1 {
			t.Fatalf("PUBSUB SHARDCHANNELS on %s's master = %v, %v; want its channel", acc, ch, err)
		}
	}

	// Break the subscription connections of a's master only.
	if err := master(a).ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
	select {
	case _, open := <-subA.Events():
		if open {
			t.Fatal("an event on a's subscription, want it ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's subscription did not end after its connection broke")
	}
	e := testEmail(b, "x@example.com", "y@example.com", 1)
	if err := s.CreateEmails(ctx, testBody("b"), []*store.Email{e}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev, open := <-subB.Events():
		if !open || ev.EmailID != e.ID {
			t.Fatalf("b's subscription gave %+v, %v; want the email.created of %s", ev, open, e.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event for b, whose shard is healthy")
	}

	// Closing the last subscription of an account unsubscribes it.
	subB.Close()
	waitUntil(t, "b's channel is unsubscribed", func() bool {
		ch, err := master(b).PubSubShardChannels(ctx, s.account(b).channel()).Result()
		return err == nil && len(ch) == 0
	})
}
