package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/internal/testenv/clustertest"
	"github.com/mailsink/mailsink/store"
)

// TestShardedEventsSurviveFailover fails the master of an account's slot
// over to its replica while emails are created in the account, first
// gracefully (CLUSTER FAILOVER), then back by CLUSTER FAILOVER TAKEOVER.
// Each time Redis unsubscribes the demoted master's subscribers; the
// Store's subscriber of the account must get the event of every email
// created (none missed), stay open, and be subscribed on the new master.
func TestShardedEventsSurviveFailover(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	client, err := NewClient("", cluster.Seeds)
	if err != nil {
		t.Fatal(err)
	}
	s := New(client, Options{Prefix: "mailsinktest:" + randomHex(8) + ":"})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	account := "failover-" + randomHex(4)
	channel := s.account(account).channel()

	sub := s.Subscribe(account)
	defer sub.Close()
	var (
		mu       sync.Mutex
		received = map[string]bool{}
		ended    bool
	)
	go func() {
		for e := range sub.Events() {
			mu.Lock()
			if e.Type == store.EmailCreated {
				received[e.EmailID] = true
			}
			mu.Unlock()
		}
		mu.Lock()
		ended = true
		mu.Unlock()
	}()

	// Creators, about 200 a second in all (a subscriber's buffer holds
	// 256 events), until stop; created holds the acknowledged emails.
	var created []string
	stop := make(chan struct{})
	var creating sync.WaitGroup
	for range 3 {
		creating.Add(1)
		go func() {
			defer creating.Done()
			tick := time.NewTicker(15 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				e := testEmail(account, "a@example.com", "b@example.com", int64(n+1))
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				err := s.CreateEmails(cctx, testBody("x"), []*store.Email{e})
				cancel()
				if err == nil {
					mu.Lock()
					created = append(created, e.ID)
					mu.Unlock()
				}
			}
		}()
	}
	// moreCreated waits until n more creates have been acknowledged.
	moreCreated := func(what string, n int) {
		t.Helper()
		mu.Lock()
		want := len(created) + n
		mu.Unlock()
		waitUntil(t, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(created) >= want
		})
	}

	slot := int(client.ClusterKeySlot(ctx, channel).Val())
	for _, takeover := range []bool{false, true} {
		moreCreated("emails are created before the failover", 20)
		_, master := cluster.FailOver(t, slot, takeover)
		n := redis.NewClient(&redis.Options{Addr: master})
		waitUntil(t, "the Store subscribes again on the new master "+master, func() bool {
			subs, err := n.PubSubShardNumSub(ctx, channel).Result()
			return err == nil && subs[channel] == 1
		})
		n.Close()
		moreCreated("emails are created after the failover", 20)
	}
	close(stop)
	creating.Wait()

	mu.Lock()
	all := append([]string(nil), created...)
	mu.Unlock()
	missed := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, id := range all {
			if !received[id] {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(missed()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if m := missed(); len(m) > 0 {
		for _, id := range m[:min(5, len(m))] {
			_, err := s.GetEmail(ctx, account, id)
			t.Logf("no event for %s (GetEmail: %v)", id, err)
		}
		t.Errorf("the subscriber missed %d of %d acknowledged emails' events", len(m), len(all))
	}
	mu.Lock()
	defer mu.Unlock()
	if ended {
		t.Error("the subscription ended; want it kept open through the failovers")
	}
	t.Logf("%d emails created through a graceful failover and a takeover, %d events received", len(all), len(received))
}
