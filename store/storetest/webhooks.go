package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

func webhookStore(t *testing.T, s Store) store.Webhooks {
	t.Helper()
	ws := s
	return ws
}

func newWebhook(accountID string, n int) *store.Webhook {
	return &store.Webhook{ID: id(n), AccountID: accountID, URL: fmt.Sprintf("https://hooks.example.com/%d", n),
		Events: []store.EventType{store.EmailCreated}, Filter: store.WebhookFilter{Subject: "code"},
		Secret: "whsec_c2VjcmV0", CreatedAt: at(int64(n))}
}

func newDelivery(h *store.Webhook, n int, due time.Time) *store.Delivery {
	return &store.Delivery{ID: fmt.Sprintf("msg_%s_%d", h.ID, n), AccountID: h.AccountID, WebhookID: h.ID,
		EventID: fmt.Sprintf("%d-0", n), Type: store.EmailCreated, EmailID: id(n), Payload: []byte(`{"n":1}`),
		CreatedAt: due, Status: store.DeliveryPending, NextAttemptAt: due}
}

// testWebhooks checks a store.Webhooks: webhooks per account with a
// cap, isolation, disabling, and deletion with their deliveries.
func testWebhooks(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		if err := ws.CreateWebhook(ctx, newWebhook(acctA, n), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws.CreateWebhook(ctx, newWebhook(acctA, 4), 3); !store.IsCode(err, store.Conflict) {
		t.Fatalf("fourth webhook over a cap of 3: got %v, want Conflict", err)
	}
	if err := ws.CreateWebhook(ctx, newWebhook(acctB, 9), 3); err != nil {
		t.Fatal(err)
	}
	hooks, err := ws.ListWebhooks(ctx, acctA)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hooks {
		got = append(got, h.ID)
	}
	if want := idsOf(1, 2, 3); !slices.Equal(got, want) {
		t.Fatalf("ListWebhooks = %v, want %v (oldest first)", got, want)
	}
	h, err := ws.GetWebhook(ctx, acctA, id(2))
	if err != nil {
		t.Fatal(err)
	}
	want := newWebhook(acctA, 2)
	if h.URL != want.URL || h.Secret != want.Secret || !h.CreatedAt.Equal(want.CreatedAt) ||
		h.Filter != want.Filter || !slices.Equal(h.Events, want.Events) || h.DisabledAt != nil {
		t.Fatalf("GetWebhook = %+v, want %+v", h, want)
	}
	if _, err := ws.GetWebhook(ctx, acctB, id(2)); !store.IsCode(err, store.NotFound) {
		t.Fatalf("another account's webhook: got %v, want NotFound", err)
	}
	if err := ws.DeleteWebhook(ctx, acctB, id(2)); !store.IsCode(err, store.NotFound) {
		t.Fatalf("deleting another account's webhook: got %v, want NotFound", err)
	}
	accs, err := ws.WebhookAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(accs)
	if !slices.Equal(accs, []string{acctA, acctB}) {
		t.Fatalf("WebhookAccounts = %v", accs)
	}

	if err := ws.DisableWebhook(ctx, acctA, id(1), "failing", at(100)); err != nil {
		t.Fatal(err)
	}
	if err := ws.DisableWebhook(ctx, acctA, id(1), "second reason", at(200)); err != nil {
		t.Fatal(err)
	}
	if h, _ := ws.GetWebhook(ctx, acctA, id(1)); h.DisabledAt == nil || !h.DisabledAt.Equal(at(100)) || h.DisabledReason != "failing" {
		t.Fatalf("disabled webhook = %+v, want the first reason kept", h)
	}

	h2 := newWebhook(acctA, 2)
	if err := ws.EnqueueDeliveries(ctx, acctA, "5-0", []*store.Delivery{newDelivery(h2, 1, at(0))}); err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteWebhook(ctx, acctA, id(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.GetWebhook(ctx, acctA, id(2)); !store.IsCode(err, store.NotFound) {
		t.Fatalf("deleted webhook: got %v, want NotFound", err)
	}
	if ds, _ := ws.ClaimDeliveries(ctx, acctA, at(10_000), time.Minute, "tok", 10); len(ds) != 0 {
		t.Fatalf("a deleted webhook's deliveries are still claimed: %d", len(ds))
	}
	if ds, _ := ws.ListDeliveries(ctx, acctA, id(2), 10); len(ds) != 0 {
		t.Fatalf("a deleted webhook's log still has %d deliveries", len(ds))
	}
}

// testDeliveryQueue checks the delivery queue: enqueueing is idempotent by
// id, the cursor only moves forward, claims respect due times and leases,
// finishing needs the lease, and the log lists newest first.
func testDeliveryQueue(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	h := newWebhook(acctA, 1)
	if err := ws.CreateWebhook(ctx, h, 10); err != nil {
		t.Fatal(err)
	}
	if cur, err := ws.WebhookCursor(ctx, acctA); err != nil || cur != "" {
		t.Fatalf("cursor before any enqueue = %q, %v; want empty", cur, err)
	}
	d1, d2 := newDelivery(h, 1, at(0)), newDelivery(h, 2, at(1000))
	if err := ws.EnqueueDeliveries(ctx, acctA, "1700000000000-3", []*store.Delivery{d1, d2}); err != nil {
		t.Fatal(err)
	}
	// Again, with the first changed: stored once, as first written.
	again := *d1
	again.Payload = []byte(`{"changed":true}`)
	if err := ws.EnqueueDeliveries(ctx, acctA, "1700000000000-1", []*store.Delivery{&again}); err != nil {
		t.Fatal(err)
	}
	if cur, _ := ws.WebhookCursor(ctx, acctA); cur != "1700000000000-3" {
		t.Fatalf("cursor = %q, want it kept at 1700000000000-3 (it never moves back)", cur)
	}
	if err := ws.EnqueueDeliveries(ctx, acctA, "1700000000001-0", nil); err != nil {
		t.Fatal(err)
	}
	if cur, _ := ws.WebhookCursor(ctx, acctA); cur != "1700000000001-0" {
		t.Fatalf("cursor = %q, want 1700000000001-0", cur)
	}

	// At at(500) only d1 is due.
	got, err := ws.ClaimDeliveries(ctx, acctA, at(500), time.Minute, "tok-1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != d1.ID || string(got[0].Payload) != `{"n":1}` {
		t.Fatalf("claim at 500ms = %+v, want only d1 as first enqueued", got)
	}
	// Leased: a second worker gets only d2, even later.
	other, err := ws.ClaimDeliveries(ctx, acctA, at(2000), time.Minute, "tok-2", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(other) != 1 || other[0].ID != d2.ID {
		t.Fatalf("second claim = %v, want only d2 (d1 is leased)", other)
	}
	// The lease of tok-1 ends: d1 can be taken over, and tok-1 can no
	// longer finish it.
	taken, err := ws.ClaimDeliveries(ctx, acctA, at(500).Add(2*time.Minute), time.Minute, "tok-3", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 2 {
		t.Fatalf("after the leases ended got %d deliveries, want 2", len(taken))
	}
	d := got[0]
	d.Attempts, d.LastStatusCode, d.LastResponse = 1, 500, "oops"
	d.NextAttemptAt = at(1_000_000)
	if err := ws.FinishDelivery(ctx, d, "tok-1"); !store.IsCode(err, store.Conflict) {
		t.Fatalf("finish with a lost lease: got %v, want Conflict", err)
	}
	if err := ws.FinishDelivery(ctx, d, "tok-3"); err != nil {
		t.Fatal(err)
	}
	later := taken[0]
	if later.ID == d1.ID {
		later = taken[1]
	}
	later.NextAttemptAt = at(2_000_000)
	if err := ws.FinishDelivery(ctx, later, "tok-3"); err != nil {
		t.Fatal(err)
	}
	// Pending again, due at 1000s: not claimable before.
	if ds, _ := ws.ClaimDeliveries(ctx, acctA, at(999_000), time.Minute, "tok-4", 10); len(ds) != 0 {
		t.Fatalf("claimed %d deliveries before they were due", len(ds))
	}
	ds, err := ws.ClaimDeliveries(ctx, acctA, at(1_000_000), time.Minute, "tok-4", 10)
	if err != nil || len(ds) != 1 || ds[0].Attempts != 1 || ds[0].LastResponse != "oops" {
		t.Fatalf("claim when due = %+v, %v; want d1 with its first attempt recorded", ds, err)
	}
	ds[0].Status, ds[0].Attempts = store.DeliverySucceeded, 2
	if err := ws.FinishDelivery(ctx, ds[0], "tok-4"); err != nil {
		t.Fatal(err)
	}
	if ds, _ := ws.ClaimDeliveries(ctx, acctA, at(1e9), time.Minute, "tok-5", 10); len(ds) != 1 || ds[0].ID != d2.ID {
		t.Fatalf("after d1 succeeded, claims = %v; want only d2", ds)
	}

	log, err := ws.ListDeliveries(ctx, acctA, h.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].ID != d2.ID || log[1].ID != d1.ID || log[1].Status != store.DeliverySucceeded || log[1].Attempts != 2 {
		t.Fatalf("log = %+v, want d2 then d1 (succeeded, 2 attempts)", log)
	}
	if log, _ := ws.ListDeliveries(ctx, acctA, h.ID, 1); len(log) != 1 {
		t.Fatalf("log with limit 1 has %d entries", len(log))
	}
	if log, _ := ws.ListDeliveries(ctx, acctB, h.ID, 10); len(log) != 0 {
		t.Fatalf("another account sees %d deliveries", len(log))
	}
}

// testConcurrentClaims checks that concurrent claimers never hold one
// delivery at once.
func testConcurrentClaims(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	h := newWebhook(acctA, 1)
	if err := ws.CreateWebhook(ctx, h, 10); err != nil {
		t.Fatal(err)
	}
	var ds []*store.Delivery
	for n := range 50 {
		ds = append(ds, newDelivery(h, n, at(0)))
	}
	if err := ws.EnqueueDeliveries(ctx, acctA, "", ds); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				got, err := ws.ClaimDeliveries(ctx, acctA, at(1), time.Hour, fmt.Sprint("tok-", w), 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 50 {
		t.Fatalf("claimed %d distinct deliveries, want 50", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s claimed %d times under one lease", id, n)
		}
	}
}

// testDeliveryLogBound checks that a webhook's log keeps its newest
// store.MaxDeliveryLog deliveries, and that the dropped ones leave the
// queue too.
func testDeliveryLogBound(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	h := newWebhook(acctA, 1)
	if err := ws.CreateWebhook(ctx, h, 10); err != nil {
		t.Fatal(err)
	}
	const extra = 5
	var ds []*store.Delivery
	for n := range store.MaxDeliveryLog + extra {
		ds = append(ds, newDelivery(h, n, at(int64(n))))
		if len(ds) == 400 {
			if err := ws.EnqueueDeliveries(ctx, acctA, "", ds); err != nil {
				t.Fatal(err)
			}
			ds = nil
		}
	}
	if err := ws.EnqueueDeliveries(ctx, acctA, "", ds); err != nil {
		t.Fatal(err)
	}
	// Pending deliveries are never dropped for the log's bound.
	log, err := ws.ListDeliveries(ctx, acctA, h.ID, 2*store.MaxDeliveryLog)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != store.MaxDeliveryLog+extra {
		t.Fatalf("log holds %d pending deliveries, want all %d", len(log), store.MaxDeliveryLog+extra)
	}
	var claimed []*store.Delivery
	for {
		got, err := ws.ClaimDeliveries(ctx, acctA, at(1e6), time.Hour, "tok", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		claimed = append(claimed, got...)
	}
	if len(claimed) != store.MaxDeliveryLog+extra {
		t.Fatalf("claimed %d deliveries, want all %d", len(claimed), store.MaxDeliveryLog+extra)
	}
	// Once finished, the oldest beyond the bound go with the next enqueue.
	for _, d := range claimed {
		d.Status = store.DeliverySucceeded
		if err := ws.FinishDelivery(ctx, d, "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws.EnqueueDeliveries(ctx, acctA, "", []*store.Delivery{newDelivery(h, store.MaxDeliveryLog+extra, at(2e6))}); err != nil {
		t.Fatal(err)
	}
	log, err = ws.ListDeliveries(ctx, acctA, h.ID, 2*store.MaxDeliveryLog)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != store.MaxDeliveryLog {
		t.Fatalf("log holds %d deliveries after they finished, want %d", len(log), store.MaxDeliveryLog)
	}
}

// testConcurrentWebhookCap checks that concurrent creations never pass the
// cap.
func testConcurrentWebhookCap(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for n := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ws.CreateWebhook(ctx, newWebhook(acctA, n), 3)
			if err != nil && !store.IsCode(err, store.Conflict) {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				created++
			}
		}()
	}
	wg.Wait()
	hooks, err := ws.ListWebhooks(ctx, acctA)
	if err != nil {
		t.Fatal(err)
	}
	if created != 3 || len(hooks) != 3 {
		t.Fatalf("%d creations succeeded and %d webhooks are stored, want 3 under a cap of 3", created, len(hooks))
	}
}

// testDeliveryOfDeletedWebhook checks that a delivery enqueued after its
// webhook was deleted (a fan-out round that listed it before) leaves no
// queued delivery and no log behind.
func testDeliveryOfDeletedWebhook(t *testing.T, s Store) {
	ws := webhookStore(t, s)
	ctx := context.Background()
	h := newWebhook(acctA, 1)
	if err := ws.CreateWebhook(ctx, h, 10); err != nil {
		t.Fatal(err)
	}
	if err := ws.DeleteWebhook(ctx, acctA, h.ID); err != nil {
		t.Fatal(err)
	}
	if err := ws.EnqueueDeliveries(ctx, acctA, "", []*store.Delivery{newDelivery(h, 1, at(1))}); err != nil {
		t.Fatal(err)
	}
	got, err := ws.ClaimDeliveries(ctx, acctA, at(1e6), time.Hour, "tok", 10)
	if err != nil || len(got) != 0 {
		t.Errorf("claimed %d deliveries of a deleted webhook, %v; want none", len(got), err)
	}
	if log, err := ws.ListDeliveries(ctx, acctA, h.ID, 10); err == nil && len(log) != 0 {
		t.Errorf("a deleted webhook has a log of %d deliveries", len(log))
	}
}
