package pebblestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// BenchmarkListByRecipient lists 25 of one recipient's emails, a recipient
// at a time, from an account of 16,000 emails spread over 100 recipients,
// the load tool's list scenario (mailsink-bench -mode list), without HTTP.
func BenchmarkListByRecipient(b *testing.B) {
	s := openTemp(b, filepath.Join(b.TempDir(), "store"))
	ctx := context.Background()
	const recipients, perRecipient = 100, 160
	base := time.UnixMilli(1_700_000_000_000).UTC()
	for i := range perRecipient {
		emails := make([]*store.Email, recipients)
		for j := range emails {
			subj, mid := fmt.Sprintf("bench run m%d", i*recipients+j), fmt.Sprintf("<m%d.run@bench.test>", i)
			at := base.Add(time.Duration(i*recipients+j) * time.Millisecond)
			emails[j] = &store.Email{
				ID: store.NewID(), AccountID: "acc-bench", MessageID: &mid,
				Sender: "sender@bench.test", Recipient: fmt.Sprintf("rcpt%d@bench.test", j),
				Subject: &subj, Status: store.StatusReceived, Labels: []string{},
				RawSize: 2048, ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
			}
		}
		// A body each, as one message to one recipient stores.
		for _, e := range emails {
			if err := s.CreateEmails(ctx, &store.Body{Raw: make([]byte, 2048)}, []*store.Email{e}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		q := store.ListQuery{AccountID: "acc-bench", Recipient: fmt.Sprintf("rcpt%d@bench.test", n%recipients), Limit: 25}
		n++
		got, err := s.ListEmails(ctx, q)
		if err != nil || len(got) != 25 {
			b.Fatalf("ListEmails: %d emails, %v", len(got), err)
		}
	}
}
