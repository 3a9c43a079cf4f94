package search

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// BenchmarkIndexMemory loads an account of a million emails into an
// index as loading it does (loadBatch at a time, newest first), shaped as
// make bench-large's account: messages to 50 recipients of a mailbox of
// 25 addresses, each message with its own subject, Message-ID and digest.
// It reports the heap the index keeps per email, how long a collection
// that must mark it takes, and the CPU of a list by recipient.
func BenchmarkIndexMemory(b *testing.B) {
	const (
		emails     = 1_000_000
		recipients = 50
	)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := NewIndex()
	words := make([]string, 0, 200)
	for w := range 200 {
		words = append(words, fmt.Sprintf("word%d", w%150))
	}
	n := emails
	for n > 0 {
		page := make([]*store.Email, 0, loadBatch)
		digests := map[*Digest][]string{}
		for len(page) < loadBatch && n > 0 {
			msg := n / recipients
			subject := fmt.Sprintf("Your code is %06d", msg)
			mid := fmt.Sprintf("<%d@shop.example>", msg)
			d := &Digest{FromAddresses: []string{"noreply@shop.example"}, FromNames: []string{"Shop"},
				Snippet: subject, Text: fmt.Sprint(words, msg)}
			for r := 0; r < recipients && n > 0; r++ {
				n--
				e := &store.Email{ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", n), AccountID: "a",
					Sender: "noreply@shop.example", Recipient: fmt.Sprintf("user%d@acme.test", r%25),
					Subject: &subject, MessageID: &mid, Status: store.StatusReceived, Labels: []string{},
					RawSize: 2048, ReceivedAt: base.Add(time.Duration(msg) * time.Millisecond)}
				page = append(page, e)
				digests[d] = append(digests[d], e.ID)
			}
		}
		x.PutAll("a", page)
		for d, ids := range digests {
			x.SetDigests("a", ids, d)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	start := time.Now()
	runtime.GC()
	gc := time.Since(start)
	runtime.ReadMemStats(&after)
	q := store.ListQuery{AccountID: "a", Recipient: "user7@acme.test", Limit: 50}
	b.ResetTimer()
	for b.Loop() {
		ids, err := x.Search(context.Background(), q, Query{}, nil)
		if err != nil || len(ids) != 50 {
			b.Fatal(ids, err)
		}
	}
	// After the loop: ResetTimer drops metrics reported before it.
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/emails, "heap-B/email")
	b.ReportMetric(float64(gc.Microseconds()), "gc-µs")
	runtime.KeepAlive(x)
}

// BenchmarkScan lists 25 emails of an index of 100,000 with queries that
// scan few emails (a recipient's newest) and all of them (terms that
// match none): the CPU of the index's own walk, without the store.
func BenchmarkScan(b *testing.B) {
	const n = 100_000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	page := make([]*store.Email, 0, n)
	for i := range n {
		subject := fmt.Sprintf("Order %d shipped", i%5000)
		page = append(page, &store.Email{ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i), AccountID: "a",
			Sender: fmt.Sprintf("shop%d@x.example", i%150), Recipient: fmt.Sprintf("user%d@acme.test", i%500),
			Subject: &subject, Status: store.StatusReceived, Labels: []string{}, Read: i%20 == 0,
			RawSize: 2048, ReceivedAt: base.Add(time.Duration(i) * time.Second)})
	}
	x.PutAll("a", page)
	for i, e := range page {
		x.SetDigest("a", e.ID, &Digest{FromNames: []string{fmt.Sprintf("Shop %d", i%150)}, FromAddresses: []string{e.Sender},
			ToAddresses: []string{e.Recipient}, Snippet: "Your order has shipped and is on its way", Text: "your order has shipped"})
	}
	for _, c := range []struct {
		name string
		f    store.ListQuery
		q    string
	}{
		{"recipient", store.ListQuery{Recipient: "user7@acme.test"}, ""},
		{"all-match-none", store.ListQuery{}, "from:nobody label:vip"},
		{"word-in-none", store.ListQuery{}, "zebra"},
		{"status-match-none", store.ListQuery{Status: store.StatusArchived}, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			q, err := Parse(c.q)
			if err != nil {
				b.Fatal(err)
			}
			c.f.AccountID, c.f.Limit = "a", 25
			for b.Loop() {
				if _, err := x.Search(context.Background(), c.f, q, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeleteBlock deletes a block of 100,000 emails, one by one, from
// the middle of an account of 400,000 (a bulk delete of one burst of mail
// while newer mail stays): the CPU of the index's deletes.
func BenchmarkDeleteBlock(b *testing.B) {
	const n = 400_000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	page := make([]*store.Email, 0, n)
	for i := range n {
		page = append(page, &store.Email{ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i), AccountID: "a",
			Sender: "s@x.example", Recipient: "r@acme.test", Status: store.StatusReceived, Labels: []string{},
			ReceivedAt: base.Add(time.Duration(i) * time.Second)})
	}
	for b.Loop() {
		b.StopTimer()
		x := NewIndex()
		x.PutAll("a", page)
		b.StartTimer()
		for _, e := range page[n/4 : n/2] {
			x.Delete("a", e.ID)
		}
	}
}
