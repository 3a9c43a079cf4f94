package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/internal/rawzip"
	"github.com/mailsink/mailsink/store"
)

// benchRaw returns the source of the create benchmarks' emails: 2 KB.
func benchRaw() []byte {
	return []byte("Subject: benchmark\r\n\r\n" + strings.Repeat("0123456789abcdef", 2048/16))
}

// benchEmail returns the body and email of the create benchmarks' email n,
// to one of 100 recipients, with raw (benchRaw) as its source.
func benchEmail(raw []byte, n int64, now time.Time) (*store.Body, *store.Email) {
	text := string(raw[22:])
	e := &store.Email{
		ID: store.NewID(), AccountID: "acct", Sender: "sender@example.com",
		Recipient: fmt.Sprintf("user%d@example.com", n%100), Subject: ptr("benchmark"),
		Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)),
		ReceivedAt: now, CreatedAt: now, UpdatedAt: now,
	}
	return &store.Body{Raw: raw, Given: &store.Parts{Text: &text, Headers: map[string]string{"subject": "benchmark"}}}, e
}

// BenchmarkCreate stores one email with a 2 KB body per operation, from
// 1×GOMAXPROCS and 16×GOMAXPROCS goroutines: the second shows how much
// batching lets concurrent writers share commits and fsyncs.
func BenchmarkCreate(b *testing.B) {
	raw := benchRaw()
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallelism=%d", par), func(b *testing.B) {
			s := openTemp(b, filepath.Join(b.TempDir(), "bench.db"))
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Millisecond)
			var n atomic.Int64
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body, e := benchEmail(raw, n.Add(1), now)
					if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkListByRecipient lists pages of one recipient's emails in an
// account of 100,000 (and, for comparison, 1,000): the cost should depend on
// offset+limit, not on the size of the account.
func BenchmarkListByRecipient(b *testing.B) {
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("emails=%d", size), func(b *testing.B) {
			s := openTemp(b, filepath.Join(b.TempDir(), "bench.db"))
			bulkLoad(b, s, size)
			ctx := context.Background()
			// Recipient user0 has one email in ten.
			queries := []struct {
				name string
				q    store.ListQuery
			}{
				{"recipient/offset=0", store.ListQuery{Recipient: "USER0@example.com"}},
				{"recipient/offset=50", store.ListQuery{Recipient: "user0@example.com", Offset: 50}},
				{"recipient+status/offset=0", store.ListQuery{Recipient: "user0@example.com", Status: store.StatusArchived}},
				{"all/offset=0", store.ListQuery{}},
				{"all/offset=500", store.ListQuery{Offset: 500}},
			}
			for _, qq := range queries {
				q := qq.q
				q.AccountID, q.Limit = "acct", 25
				b.Run(qq.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						got, err := s.ListEmails(ctx, q)
						if err != nil {
							b.Fatal(err)
						}
						if len(got) != 25 {
							b.Fatalf("ListEmails(%+v): got %d emails, want 25", q, len(got))
						}
					}
				})
			}
		})
	}
}

// BenchmarkCountAndCursor counts and pages by cursor in an account of
// 100,000 emails: a count without filters reads the stats record; with one
// index it counts index entries; a label filter reads every email; a page
// after a cursor costs what a first page does.
func BenchmarkCountAndCursor(b *testing.B) {
	s := openTemp(b, filepath.Join(b.TempDir(), "bench.db"))
	bulkLoad(b, s, 100_000)
	ctx := context.Background()
	// Email 50,000 is user0's: the cursor is in the middle of its emails.
	cursor := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012x", 50_000)
	for _, bm := range []struct {
		name  string
		q     store.ListQuery
		count bool
	}{
		{"count all", store.ListQuery{}, true},
		{"count recipient", store.ListQuery{Recipient: "user0@example.com"}, true},
		{"count recipient before", store.ListQuery{Recipient: "user0@example.com", Before: cursor}, true},
		{"count recipient and status", store.ListQuery{Recipient: "user0@example.com", Status: store.StatusArchived}, true},
		{"count label", store.ListQuery{Label: "seventh"}, true},
		{"list before", store.ListQuery{Recipient: "user0@example.com", Before: cursor, Limit: 25}, false},
		{"list label", store.ListQuery{Label: "seventh", Limit: 25}, false},
		{"list label before", store.ListQuery{Label: "seventh", Before: cursor, Limit: 25}, false},
	} {
		q := bm.q
		q.AccountID = "acct"
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if bm.count {
					_, err = s.CountEmails(ctx, q)
				} else {
					_, err = s.ListEmails(ctx, q)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bulkLoad stores n emails in account "acct" in a few large transactions,
// through the same createOp that CreateEmails uses: email i goes to
// user(i%10)@example.com, with one status in three archived and one label
// "seventh" in seven, and is received i milliseconds after a fixed time.
func bulkLoad(b *testing.B, s *Store, n int) {
	b.Helper()
	const perTx = 10_000
	start := time.UnixMilli(1_767_225_600_000).UTC()
	body := &store.Body{Raw: []byte("Subject: bulk\r\n\r\nbody\r\n"), Given: &store.Parts{Headers: map[string]string{"subject": "bulk"}}}
	for lo := 0; lo < n; lo += perTx {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := lo; i < min(lo+perTx, n); i++ {
				at := start.Add(time.Duration(i) * time.Millisecond)
				st := store.StatusReceived
				if i%3 == 0 {
					st = store.StatusArchived
				}
				labels := []string{}
				if i%7 == 0 {
					labels = []string{"seventh"}
				}
				e := &store.Email{
					ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012x", i), AccountID: "acct",
					Sender: "sender@example.com", Recipient: fmt.Sprintf("user%d@example.com", i%10),
					Subject: ptr(fmt.Sprintf("bulk %d", i)), Status: st, Labels: labels,
					ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
				}
				if err := newCreateOp(new(rawzip.Compressor), body, []*store.Email{e}).apply(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkApply applies logged creates to bbolt as the applier does: 250
// emails of 2 KB to 100 recipients per transaction (what walApplyEvery
// gathers at 5,000 msg/s), in a store that grows as it runs. The
// transaction skips its fdatasyncs (NoSync), so ns/email is the applier's
// CPU: its lookups, its puts and its page writes.
func BenchmarkApply(b *testing.B) {
	const perTx = 250
	s := openTemp(b, filepath.Join(b.TempDir(), "bench.db"))
	s.db.NoSync = true
	raw := benchRaw()
	var lsn uint64
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		ops := make([]walOp, perTx)
		now := time.Now().UTC().Truncate(time.Millisecond)
		for i := range ops {
			n++
			body, e := benchEmail(raw, int64(n), now)
			lsn++
			ops[i] = walOp{lsn: lsn, op: newCreateOp(new(rawzip.Compressor), body, []*store.Email{e})}
		}
		b.StartTimer()
		if err := s.write(func(tx *bolt.Tx) error { return applyOps(tx, ops, nil) }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/email")
	st := s.db.Stats()
	b.ReportMetric(float64(st.TxStats.GetWrite())/float64(n), "pages/email")
}

// BenchmarkFaults reads an account's fault rules as the SMTP server does in
// every transaction, for an account with none and one with three: from the
// cache (faultCache), and from the file, as after every change to them.
func BenchmarkFaults(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b, filepath.Join(b.TempDir(), "bench.db"))
	for i := range 3 {
		r := &store.FaultRule{ID: fmt.Sprintf("rule-%d", i), AccountID: "three", Stage: store.FaultRcpt,
			Recipient: "nobody@example.com", Reply: &store.FaultReply{Code: 451, Text: "4.3.0 try later"}}
		if err := s.CreateFault(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	for _, account := range []string{"none", "three"} {
		for _, cached := range []bool{true, false} {
			b.Run(fmt.Sprintf("rules=%s/cached=%v", account, cached), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !cached {
						s.faults.forget(account)
					}
					if _, err := s.Faults(ctx, account); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
