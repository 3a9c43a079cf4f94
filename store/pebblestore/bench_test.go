package pebblestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

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
	// The level-0 sublevels a list merges, as the listing starts.
	sublevels := s.db.Metrics().Levels[0].Sublevels
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
	b.ReportMetric(float64(sublevels), "l0-sublevels")
}

// BenchmarkIngestCompactions stores 60,000 emails of 2 KB, then 5,000 of
// 100 KB, into a new store as SMTP deliveries (fillLikeSMTP: prose, where
// make bench's 100 KB row sends an attachment), and reports the bytes
// Pebble's compactions wrote per email once they and the flushes are
// done, to tables and, when a table would refer to more than
// MaxBlobReferenceDepth overlapping blob files, to bodies rewritten into
// new blob files: the work memTableSize and l0Compaction trade against
// memory. It also reports the most level-0 sublevels seen during the fill
// (sampled every 10 ms), which a list merges: how many depends on whether
// compactions keep up, so on the machine's load. It stops with the last
// memtable unflushed and up to about l0Compaction/2 sublevels waiting
// after the last compaction, so runs a few per cent apart compact about
// the same. An iteration takes 10 to 30 s: run it with -benchtime 1x.
func BenchmarkIngestCompactions(b *testing.B) {
	var compacted, blobs, flushes, emails int64
	var sublevels int32
	for b.Loop() {
		s, err := Open(filepath.Join(b.TempDir(), "store"))
		if err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		sampled := make(chan int32)
		go func() {
			most := int32(0)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					sampled <- most
					return
				case <-tick.C:
					most = max(most, s.db.Metrics().Levels[0].Sublevels)
				}
			}
		}()
		fillLikeSMTP(b, s, "acc-bench", 60000, 2048)
		fillLikeSMTP(b, s, "acc-bench", 5000, 100<<10)
		close(stop)
		sublevels = max(sublevels, <-sampled)
		if b.Failed() {
			_ = s.Close()
			b.FailNow()
		}
		emails += 65000
		m := settled(b, s)
		compacted += int64(m.Total().TableBytesCompacted)
		blobs += int64(m.Total().BlobBytesCompacted)
		flushes += m.Flush.Count
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(compacted)/float64(emails), "compacted-B/email")
	b.ReportMetric(float64(blobs)/float64(emails), "blob-rewritten-B/email")
	b.ReportMetric(float64(flushes)/float64(b.N), "flushes/op")
	b.ReportMetric(float64(sublevels), "most-l0-sublevels")
}

// settled waits until no flush or compaction runs, nor starts within
// 100 ms, and returns Pebble's metrics then.
func settled(b *testing.B, s *Store) *pebble.Metrics {
	b.Helper()
	m, deadline := s.db.Metrics(), time.Now().Add(time.Minute)
	for {
		time.Sleep(100 * time.Millisecond)
		now := s.db.Metrics()
		if m.Compact.NumInProgress == 0 && now.Compact.NumInProgress == 0 && now.Compact.Count == m.Compact.Count &&
			m.Flush.NumInProgress == 0 && now.Flush.NumInProgress == 0 && now.Flush.Count == m.Flush.Count {
			return now
		}
		if time.Now().After(deadline) {
			b.Fatalf("flushes or compactions still running a minute after the writes: %s", now)
		}
		m = now
	}
}
