package redisstore

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

// TestFeedMovesOffAReplica gives the Store a cluster map that names the
// replica of an account's slot as its master, as a map taken before a
// failover names a node that rejoined as a replica, until the account's
// first subscriber has subscribed. Redis accepts a sharded subscription on
// a replica, but relays the shard's messages to it only once its master
// counts it as one, so the feed must not stay there: it must end up
// subscribed on the slot's master alone, and deliver events from there.
func TestFeedMovesOffAReplica(t *testing.T) {
	t.Parallel()
	seeds := strings.Split(os.Getenv("MAILSINK_TEST_REDIS_CLUSTER"), ",")
	clusterClient(t).Close() // skips without a cluster
	ctx := context.Background()
	prefix := "mailsinktest:" + randomHex(8) + ":"
	account := "replica-" + randomHex(4)
	// The channel before the Store: its client's map needs the slot.
	channel := (&Store{prefix: prefix}).account(account).channel()

	seed := redis.NewClient(&redis.Options{Addr: seeds[0]})
	defer seed.Close()
	slot := seed.ClusterKeySlot(ctx, channel).Val()
	var lie atomic.Bool
	lie.Store(true)
	var master, replica string
	var mapMu sync.Mutex
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, ContextTimeoutEnabled: true,
		ClusterStateReloadInterval: clusterReloadInterval,
		ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) {
			slots, err := seed.ClusterSlots(ctx).Result()
			if err != nil {
				return nil, err
			}
			for i, r := range slots {
				if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 1 {
					mapMu.Lock()
					master, replica = r.Nodes[0].Addr, r.Nodes[1].Addr
					mapMu.Unlock()
					if lie.Load() {
						slots[i].Nodes = []redis.ClusterNode{r.Nodes[1], r.Nodes[0]}
					}
				}
			}
			return slots, nil
		}})
	s := New(client, Options{Prefix: prefix})
	t.Cleanup(func() {
		s.Close()
		deletePrefix(t, clusterClient(t), prefix)
	})

	s.Subscribe(account).Close()
	lie.Store(false)
	mapMu.Lock()
	if replica == "" {
		t.Fatalf("slot %d of %q has no replica in the cluster map", slot, channel)
	}
	m, r := redis.NewClient(&redis.Options{Addr: master}), redis.NewClient(&redis.Options{Addr: replica})
	mapMu.Unlock()
	defer m.Close()
	defer r.Close()
	subs := func(n *redis.Client) int64 {
		got, err := n.PubSubShardNumSub(ctx, channel).Result()
		if err != nil {
			return -1
		}
		return got[channel]
	}
	sub := s.Subscribe(account)
	defer sub.Close()
	waitUntil(t, "the feed is subscribed on the master "+master+" and not on the replica "+replica, func() bool {
		return subs(m) == 1 && subs(r) == 0
	})

	// Subscribers that came before the feed's first confirmed subscription
	// are ended by it (onSubscribed): this one came after.
	sub = s.Subscribe(account)
	defer sub.Close()
	createAwaiting(t, s, sub, testEmail(account, "a@example.com", "b@example.com", 1), 10*time.Second,
		"the event of an email created once the feed is on the master")
}
