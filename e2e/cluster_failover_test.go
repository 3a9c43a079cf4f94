package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/redis/go-redis/v9"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/internal/testenv/clustertest"
	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/redisstore"
)

// TestClusterFailoverKeepsLiveEvents runs mailsink on a Redis Cluster of
// its own, with replica acknowledgement, under SMTP load into one account,
// and fails the account's master over twice: gracefully (CLUSTER FAILOVER),
// then back by CLUSTER FAILOVER TAKEOVER. Redis ends the sharded
// subscriptions on each demoted master. Throughout, an event stream
// (/v1/events) is open and a wait (GET /v1/emails?wait=60) is held; after
// each promotion a new wait starts and both waits' emails are sent. The
// stream must carry every acknowledged email, and each wait must answer its
// email when it lands, not at its deadline: none missed.
func TestClusterFailoverKeepsLiveEvents(t *testing.T) {
	t.Parallel()
	cluster := clustertest.Start(t)
	prefix := "mailsink-e2e:" + testenv.RandomHex(6) + ":"
	b := testenv.Backend{Name: "cluster", Open: func(t *testing.T) store.Store {
		client, err := redisstore.NewClient("", cluster.Seeds)
		if err != nil {
			t.Fatal(err)
		}
		return redisstore.New(client, redisstore.Options{Prefix: prefix, AckReplicas: 1})
	}}
	e := testenv.Start(t, b, nil)
	accs, err := config.ParseAccounts([]byte(testenv.AccountsYAML))
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Seeds})
	defer admin.Close()
	slot := int(admin.ClusterKeySlot(context.Background(), prefix+"{"+accs[0].ID+"}:ch").Val())

	streamCtx, stopStream := context.WithCancel(context.Background())
	t.Cleanup(stopStream)
	stream, err := clustertest.OpenEventStream(streamCtx, e.BaseURL, testenv.AcmeKey)
	if err != nil {
		t.Fatal(err)
	}
	load := startPacedLoad(e.SMTP, 100)
	defer load.finish()

	var waits []*heldWait
	for _, takeover := range []bool{false, true} {
		kind := map[bool]string{false: "graceful", true: "takeover"}[takeover]
		held := startWait(e.BaseURL, testenv.AcmeKey, "held-"+kind+"@"+testenv.AcmeDomain)
		testenv.WaitFor(t, 10*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() >= 2 })
		load.waitAcked(t, 20)
		from, to := cluster.FailOver(t, slot, takeover)
		fresh := startWait(e.BaseURL, testenv.AcmeKey, "fresh-"+kind+"@"+testenv.AcmeDomain)
		testenv.WaitFor(t, 10*time.Second, "the new wait to be held", func() bool { return e.App.HeldRequests() >= 3 })
		for _, w := range []*heldWait{held, fresh} {
			w.landed = sendUntilAcked(t, e.SMTP, w.recipient)
			waits = append(waits, w)
		}
		for _, w := range []*heldWait{held, fresh} {
			w.finish()
		}
		t.Logf("%s failover of slot %d from %s to %s", kind, slot, from, to)
		load.waitAcked(t, 20)
	}
	load.finish()

	acked := load.subjects()
	missed := stream.Missing(acked)
	for deadline := time.Now().Add(20 * time.Second); len(missed) > 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		missed = stream.Missing(acked)
	}
	if len(missed) > 0 {
		t.Errorf("the event stream missed %d of %d acknowledged emails, e.g. %q", len(missed), len(acked), missed[0])
	}
	var waitsMissed int
	var slowest time.Duration
	for _, w := range waits {
		if !w.got || w.answered.Sub(w.started) >= w.timeout-500*time.Millisecond {
			waitsMissed++
			t.Errorf("the wait for %s answered %d (its email listed: %v) %v after the email landed, at %v of its %v: "+
				"want the email when it lands", w.recipient, w.status, w.got, w.answered.Sub(w.landed), w.answered.Sub(w.started), w.timeout)
		}
		slowest = max(slowest, w.answered.Sub(w.landed))
	}
	figures("cluster failover (graceful, then takeover) with replica acknowledgement: %d acknowledged, "+
		"the event stream missed %d (%d reconnects); waits missed %d of %d, slowest answered %dms after its email's 250",
		len(acked), len(missed), stream.Reconnects(), waitsMissed, len(waits), slowest.Milliseconds())
}

// pacedLoad sends to load@acme.test over SMTP, about rate messages a second
// on two connections, and records the subjects acknowledged with 250.
type pacedLoad struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	mu   sync.Mutex
	acks []string
}

func startPacedLoad(addr string, rate int) *pacedLoad {
	l := &pacedLoad{stop: make(chan struct{})}
	for w := range 2 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(2 * time.Second / time.Duration(rate))
			defer tick.Stop()
			var c *smtp.Client
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				if c == nil {
					var err error
					if c, err = smtp.Dial(addr); err != nil {
						c = nil
						continue
					}
				}
				subject := fmt.Sprintf("load-%d-%d", w, n)
				raw := "From: app@example.com\r\nTo: load@" + testenv.AcmeDomain + "\r\nSubject: " + subject + "\r\n\r\nbody\r\n"
				err := c.SendMail("app@example.com", []string{"load@" + testenv.AcmeDomain}, strings.NewReader(raw))
				switch {
				case err == nil:
					l.mu.Lock()
					l.acks = append(l.acks, subject)
					l.mu.Unlock()
				case isTempFailure(err):
					_ = c.Reset()
				default:
					c.Close()
					c = nil
				}
			}
		}()
	}
	return l
}

// waitAcked waits until n more messages have been acknowledged.
func (l *pacedLoad) waitAcked(t *testing.T, n int) {
	t.Helper()
	want := len(l.subjects()) + n
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d more acknowledged messages", n), func() bool {
		return len(l.subjects()) >= want
	})
}

func (l *pacedLoad) subjects() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acks...)
}

func (l *pacedLoad) finish() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// heldWait is a list request with wait=60 (the most) for one recipient.
type heldWait struct {
	recipient string
	timeout   time.Duration
	started   time.Time
	landed    time.Time // when its email was acknowledged
	done      chan struct{}
	// The answer, once done is closed.
	answered time.Time
	status   int  // 0 when the request failed
	got      bool // the answer lists the recipient's email
}

func startWait(base, key, recipient string) *heldWait {
	w := &heldWait{recipient: recipient, timeout: 60 * time.Second, started: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/emails?wait=60&recipient="+url.QueryEscape(recipient), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		w.answered = time.Now()
		if err != nil {
			return
		}
		defer resp.Body.Close()
		var page struct {
			Items []struct {
				Recipient string `json:"recipient"`
			} `json:"items"`
		}
		w.status = resp.StatusCode
		if err := json.NewDecoder(resp.Body).Decode(&page); err == nil {
			w.got = len(page.Items) == 1 && page.Items[0].Recipient == recipient
		}
	}()
	return w
}

func (w *heldWait) finish() { <-w.done }

// sendUntilAcked sends one message to recipient until it is acknowledged
// (a failover answers 451 for a moment) and returns when it was.
func sendUntilAcked(t *testing.T, addr, recipient string) time.Time {
	t.Helper()
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		raw := "From: app@example.com\r\nTo: " + recipient + "\r\nSubject: for " + recipient + "\r\n\r\nbody\r\n"
		if err = sendOne(addr, "app@example.com", recipient, raw); err == nil {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the message to %s was not acknowledged within 20s: %v", recipient, err)
	return time.Time{}
}
