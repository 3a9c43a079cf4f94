package redisstore

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/eventhub"
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
// events go through its own sharded channel on its own master. When one
// master's subscription connections break, the feeds of its accounts
// subscribe again and catch up, so their subscribers miss nothing; another
// shard's account keeps its live events throughout.
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

	// Break the subscription connections of a's master only: a's feed
	// subscribes again and catches up from the event stream, so a's
	// subscriber stays open and gets the email created meanwhile.
	if err := master(a).ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
	createAwaiting(t, s, subA, testEmail(a, "x@example.com", "y@example.com", 1), 10*time.Second,
		"a's event after its connection broke")
	createAwaiting(t, s, subB, testEmail(b, "x@example.com", "y@example.com", 1), 5*time.Second,
		"b's live event, whose shard is healthy")

	// Closing the last subscription of an account unsubscribes it.
	subB.Close()
	waitUntil(t, "b's channel is unsubscribed", func() bool {
		ch, err := master(b).PubSubShardChannels(ctx, s.account(b).channel()).Result()
		return err == nil && len(ch) == 0
	})
}

// TestCatchUpPublishesMissedEvents catches a feed up from the account's
// event stream: it publishes the events after the feed's position that it
// has not published already (one acknowledged late, out of stream order,
// arrived live), and nothing from before its position; a second catch-up
// publishes nothing.
func TestCatchUpPublishesMissedEvents(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, backends[0])
	ctx := context.Background()
	account := "catchup-" + randomHex(4)
	// Subscribe waits for the Store's own subscription to Redis: one taken
	// from the hub before it is confirmed is ended then (it may have missed
	// events), which a loaded machine showed as no live event at all.
	sub := s.Subscribe(account)
	defer sub.Close()
	var ids []string
	for i := range 4 {
		e := testEmail(account, "a@example.com", "b@example.com", int64(i+1))
		if err := s.CreateEmails(ctx, testBody("x"), []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	// The Store's own subscription delivers the four live; then the hub
	// is quiet.
	events := make([]store.Event, 0, 4)
	for len(events) < 4 {
		select {
		case e := <-sub.Events():
			events = append(events, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d live events, want 4", len(events))
		}
	}
	for i, e := range events {
		if e.EmailID != ids[i] {
			t.Fatalf("live event %d is of %s, want %s", i, e.EmailID, ids[i])
		}
	}

	first, _ := eventhub.ParseID(events[0].ID)
	cur := newCursor(s.lateBy())
	cur.reset(first)        // the feed started after the first email
	cur.admit(events[2].ID) // and published the third
	if !s.catchUp(ctx, account, cur) {
		t.Fatal("catchUp reported that it could not read the stream")
	}
	var got []string
	for done := false; !done; {
		select {
		case e := <-sub.Events():
			got = append(got, e.EmailID)
		default:
			done = true
		}
	}
	if want := []string{ids[1], ids[3]}; !slices.Equal(got, want) {
		t.Errorf("catchUp published the events of %v, want %v", got, want)
	}
	if !s.catchUp(ctx, account, cur) {
		t.Fatal("second catchUp reported that it could not read the stream")
	}
	select {
	case e := <-sub.Events():
		t.Errorf("second catchUp published %+v, want nothing", e)
	default:
	}
}

func TestCursor(t *testing.T) {
	id := func(ms, seq int64) string { return eventhub.ID{MS: ms, Seq: seq}.String() }
	c := newCursor(time.Second)
	c.reset(eventhub.ID{MS: 1000})
	if got, want := c.from(), (eventhub.ID{MS: 1000}); got != want {
		t.Errorf("from() after reset = %v, want the floor %v", got, want)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{id(5000, 0), true},
		{id(5000, 0), false}, // published already
		{id(4500, 2), true},  // late, out of order
		{id(4500, 2), false},
		{"not-an-id", true},
	} {
		if got := c.admit(tc.id); got != tc.want {
			t.Errorf("admit(%s) = %v, want %v", tc.id, got, tc.want)
		}
	}
	if got, want := c.from(), (eventhub.ID{MS: 3999, Seq: math.MaxInt64}); got != want {
		t.Errorf("from() = %v, want a second before the newest event, %v", got, want)
	}
	// Ids older than a second before the newest are forgotten: a catch-up
	// no longer reads them.
	c.admit(id(7000, 0))
	if _, ok := c.seen[eventhub.ID{MS: 4500, Seq: 2}]; ok {
		t.Error("4500-2 is still remembered with 7000-0 published")
	}
	if got := c.from(); !(eventhub.ID{MS: 4500, Seq: 2}).Less(got) {
		t.Errorf("from() = %v, which reads 4500-2 again", got)
	}
	for i := range maxSeen + 10 {
		c.admit(id(8000, int64(i)))
	}
	if len(c.seen) > maxSeen || len(c.order) > maxSeen {
		t.Errorf("the cursor remembers %d ids (%d in order), want at most %d", len(c.seen), len(c.order), maxSeen)
	}
}
