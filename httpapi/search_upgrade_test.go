package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// TestSearchBackfill: mail stored before search existed (written to the
// store directly, as an earlier release did: no digest, no read state) is
// found by its body words after the upgrade, and is unread; a second
// mailsink on the same Redis (a replica, or the next start) finds it at
// once from the digests the first one kept.
func TestSearchBackfill(t *testing.T) {
	t.Parallel()
	accs, err := config.ParseAccounts([]byte(testenv.AccountsYAML))
	if err != nil {
		t.Fatal(err)
	}
	var acmeID string
	for _, a := range accs {
		if a.Slug == "acme" {
			acmeID = a.ID
		}
	}
	backends := []testenv.Backend{{Name: "embedded", Open: testenv.OpenEmbedded}}
	if testenv.RedisURL(t) != "" {
		backends = append(backends, testenv.SharedRedis(t))
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			st := b.Open(t)
			ctx := context.Background()
			var want []string
			at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
			for i := range 30 {
				raw := fmt.Sprintf("From: Old Shop <shop@old.example>\r\nTo: ada@acme.test\r\nSubject: Old %d\r\n\r\n"+
					"Stored before the upgrade, word%d and zebra.\r\n", i, i)
				subject := fmt.Sprintf("Old %d", i)
				e := &store.Email{ID: uuid.Must(uuid.NewV7()).String(), AccountID: acmeID, Sender: "shop@old.example",
					Recipient: "ada@acme.test", Subject: &subject, Status: store.StatusReceived, Labels: []string{},
					RawSize: int64(len(raw)), ReceivedAt: at.Add(time.Duration(i) * time.Second)}
				e.CreatedAt, e.UpdatedAt = e.ReceivedAt, e.ReceivedAt
				if err := st.CreateEmails(ctx, &store.Body{Raw: []byte(raw)}, []*store.Email{e}); err != nil {
					t.Fatal(err)
				}
				want = append([]string{e.ID}, want...)
			}
			e := testenv.Start(t, testenv.Backend{Name: b.Name, Open: func(*testing.T) store.Store { return st }}, nil)
			// A query in the moment after start waits for the index of the
			// account rather than answering from an empty one.
			if got := searchIDs(t, e, "from:old.example", ""); len(got) != 30 {
				t.Errorf("the first search after start found %d of the 30 older emails by sender", len(got))
			}
			waitSearch(t, e, "word7", []string{want[30-1-7]})
			waitSearch(t, e, "zebra from:\"old shop\"", want)
			if got := searchIDs(t, e, "is:unread", ""); len(got) != 30 {
				t.Errorf("is:unread selects %d of the 30 older emails, want all", len(got))
			}
			if item := list(t, e, acme, "limit=1")[0]; item["fromName"] != "Old Shop" || item["read"] != false {
				t.Errorf("an older email's summary after the backfill: fromName %v read %v; want Old Shop, false", item["fromName"], item["read"])
			}
			if b.Name == "embedded" {
				return
			}
			// The replica reads the digests the first one made: body words
			// find mail as soon as it answers, without reading a body.
			replica := testenv.Start(t, b, nil)
			if got := searchIDs(t, replica, "zebra", ""); len(got) != 30 {
				t.Errorf("a replica's first search for a body word found %d of 30", len(got))
			}
		})
	}
}
