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
