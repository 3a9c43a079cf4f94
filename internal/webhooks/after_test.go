package webhooks_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/apijson"
	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// TestOnlyEmailsCreatedAfterTheWebhook: a webhook never gets the creation
// of an email created before it, although the event is still to be read
// when the webhook is made: behind another webhook's cursor, or in an
// account whose first webhook it is. Nor is a delivery of such an email
// made when one is already queued for it (as an earlier release queued
// those of the moments before a webhook).
func TestOnlyEmailsCreatedAfterTheWebhook(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st := b.Open(t)
			defer st.Close()
			earlier, later, first := newReceiver(t), newReceiver(t), newReceiver(t)

			// acct has a webhook whose cursor is at e0's event.
			w := startWorker(t, st, testConfig(), nil)
			earlierHook := createWebhook(t, w.Service, acct, earlier.url(), store.WebhookFilter{}, store.EmailCreated)
			e0 := createEmail(t, st, acct, "user@acme.test", "e0")
			// Stopped before it has the receiver's answer, the worker
			// would try the delivery again after the restart (the same
			// delivery, by its id): wait for its success to be kept.
			testenv.WaitFor(t, 10*time.Second, "the earlier webhook's first delivery to succeed", func() bool {
				ds := deliveries(t, w.Service, earlierHook)
				return len(ds) == 1 && ds[0].Status == store.DeliverySucceeded
			})
			w.stop()

			// Emails of both accounts, then, a millisecond later at least,
			// a webhook in each (otherAcct's first) and an email after it.
			old := createEmail(t, st, acct, "user@acme.test", "old")
			oldOther := createEmail(t, st, otherAcct, "user@globex.test", "old other")
			testenv.WaitFor(t, time.Second, "the clock to pass the emails' millisecond", func() bool {
				return time.Now().UTC().Truncate(time.Millisecond).After(oldOther.CreatedAt)
			})
			hook := createWebhook(t, w.Service, acct, later.url(), store.WebhookFilter{}, store.EmailCreated)
			hookOther := createWebhook(t, w.Service, otherAcct, first.url(), store.WebhookFilter{}, store.EmailCreated)
			fresh := createEmail(t, st, acct, "user@acme.test", "fresh")
			freshOther := createEmail(t, st, otherAcct, "user@globex.test", "fresh other")

			// A delivery of old to the new webhook, queued as an earlier
			// release queued it.
			payload, _ := json.Marshal(map[string]any{"type": store.EmailCreated, "timestamp": apijson.Time(old.CreatedAt),
				"data": apijson.NewEmail(old, nil)})
			now := time.Now().UTC()
			queued := &store.Delivery{ID: "msg_queued_by_an_earlier_release", AccountID: acct, WebhookID: hook.ID,
				EventID: eventhub.ID{MS: old.CreatedAt.UnixMilli()}.String(), Type: store.EmailCreated, EmailID: old.ID,
				Payload: payload, CreatedAt: now, Status: store.DeliveryPending, NextAttemptAt: now}
			if err := w.Store().EnqueueDeliveries(ctx, acct, "", []*store.Delivery{queued}); err != nil {
				t.Fatal(err)
			}

			w = startWorker(t, st, testConfig(), nil)
			w.SetPrivateTargets([]string{acct, otherAcct})
			testenv.WaitFor(t, 10*time.Second, "the deliveries of the fresh emails and the queued one's end", func() bool {
				ds := deliveries(t, w.Service, hook)
				settled := len(ds) >= 2
				for _, d := range ds {
					settled = settled && d.Status != store.DeliveryPending
				}
				return settled && later.count() >= 1 && first.count() >= 1 && earlier.count() >= 3
			})

			for _, tc := range []struct {
				name      string
				rc        *receiver
				want      []*store.Email
				wantNever []*store.Email
			}{
				{"the earlier webhook", earlier, []*store.Email{e0, old, fresh}, nil},
				{"the webhook made after old", later, []*store.Email{fresh}, []*store.Email{old}},
				{"the account's first webhook", first, []*store.Email{freshOther}, []*store.Email{oldOther}},
			} {
				// Deliveries are attempted concurrently: in any order.
				reqs := tc.rc.requests()
				if len(reqs) != len(tc.want) {
					t.Errorf("%s got %d deliveries, want %d", tc.name, len(reqs), len(tc.want))
				}
				for _, e := range tc.want {
					if !slices.ContainsFunc(reqs, func(r request) bool { return strings.Contains(string(r.Body), e.ID) }) {
						t.Errorf("%s did not get %q", tc.name, *e.Subject)
					}
				}
				for _, e := range tc.wantNever {
					for _, r := range reqs {
						if strings.Contains(string(r.Body), e.ID) {
							t.Errorf("%s got %q, created before it: %s", tc.name, *e.Subject, r.Body)
						}
					}
				}
			}
			for _, d := range deliveries(t, w.Service, hook) {
				if d.ID == queued.ID && (d.Status != store.DeliveryFailed || d.Attempts != 0 || !strings.Contains(d.LastError, "created before the webhook")) {
					t.Errorf("the queued delivery of old: %s after %d attempts, %q; want failed without an attempt, saying why", d.Status, d.Attempts, d.LastError)
				}
			}
			if ds := deliveries(t, w.Service, hookOther); len(ds) != 1 || ds[0].EmailID != freshOther.ID {
				t.Errorf("the first webhook of %s has %d deliveries, want only the fresh email's", otherAcct, len(ds))
			}
		})
	}
}
