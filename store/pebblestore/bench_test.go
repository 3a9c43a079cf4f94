package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// BenchmarkIngestCompactions stores what make bench's ingest rows store,
// without SMTP or search: 60,000 emails of 2 KB of prose, one recipient each
// out of 100, then 5,000 of 100 KB, into a new store. It reports the bytes
// Pebble's compactions wrote per email once they are done, the work that
// memTableSize and l0Compaction trade against memory, and the memtables
// flushed. An iteration takes about half a minute: run it with
// -benchtime 1x.
func BenchmarkIngestCompactions(b *testing.B) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 5000)
	for i := range words {
		w := make([]byte, 3+r.IntN(8))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		words[i] = string(w)
	}
	prose := func(n int) []byte {
		out := make([]byte, 0, n+16)
		for len(out) < n {
			out = append(append(out, words[r.IntN(len(words))]...), ' ')
		}
		return out
	}
	rows := []struct{ emails, size int }{{60000, 2048}, {5000, 100 << 10}}
	var compacted, flushes, emails int64
	for b.Loop() {
		s := openTemp(b, filepath.Join(b.TempDir(), "store"))
		for _, row := range rows {
			for i := range row.emails {
				subj, at := fmt.Sprintf("bench run m%d", i), time.Now()
				e := &store.Email{ID: store.NewID(), AccountID: "acc-bench", Sender: "sender@bench.test",
					Recipient: fmt.Sprintf("rcpt%d@bench.test", i%100), Subject: &subj, Status: store.StatusReceived,
					Labels: []string{}, RawSize: int64(row.size), ReceivedAt: at, CreatedAt: at, UpdatedAt: at}
				if err := s.CreateEmails(ctx, &store.Body{Raw: prose(row.size)}, []*store.Email{e}); err != nil {
					b.Fatal(err)
				}
			}
			emails += int64(row.emails)
		}
		// Done when no compaction runs, nor starts within 100 ms.
		m, deadline := s.db.Metrics(), time.Now().Add(time.Minute)
		for {
			time.Sleep(100 * time.Millisecond)
			now := s.db.Metrics()
			if now.Compact.NumInProgress == 0 && m.Compact.NumInProgress == 0 && now.Compact.Count == m.Compact.Count {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("compactions still running a minute after the writes: %s", now)
			}
			m = now
		}
		compacted += int64(m.Total().TableBytesCompacted)
		flushes += m.Flush.Count
	}
	b.ReportMetric(float64(compacted)/float64(emails), "compacted-B/email")
	b.ReportMetric(float64(flushes)/float64(b.N), "flushes/op")
}
