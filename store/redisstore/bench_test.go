package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// benchStore returns a Store on the test Redis under a fresh prefix whose
// keys are deleted after the benchmark.
func benchStore(b *testing.B) *Store {
	b.Helper()
	return newTestStore(b, backends[0])
}

// BenchmarkCreate stores emails with a 2 KB raw body, one per operation,
// from parallel goroutines.
func BenchmarkCreate(b *testing.B) {
	s := benchStore(b)
	raw := strings.Repeat("x", 2048)
	body := testBody(raw)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	before := redisCPU(b, s)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			i++
			e := testEmail(acct, fmt.Sprintf("r%d@example.com", i%10), "s@example.com", 1700000000000+int64(i))
			if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64((redisCPU(b, s)-before).Microseconds())/float64(b.N), "redis-µs/op")
}

// BenchmarkListByRecipient lists pages of one recipient's emails in an
// account of 100,000 (10,000 per recipient), and for comparison in an
// account of 1,000: the cost of a page must not depend on the account's
// size.
func BenchmarkListByRecipient(b *testing.B) {
	s := benchStore(b)
	const big, small = "big-account", "small-account"
	start := time.Now()
	loadAccount(b, s, big, 100_000)
	b.Logf("loaded 100,000 emails in %v", time.Since(start).Round(time.Millisecond))
	loadAccount(b, s, small, 1_000)

	rcpt := "r0@example.com"
	for _, bm := range []struct {
		name string
		q    store.ListQuery
	}{
		{"small/first page", store.ListQuery{AccountID: small, Recipient: rcpt, Limit: 25}},
		{"first page", store.ListQuery{AccountID: big, Recipient: rcpt, Limit: 25}},
		{"page of 100", store.ListQuery{AccountID: big, Recipient: rcpt, Limit: 100}},
		{"offset 5000", store.ListQuery{AccountID: big, Recipient: rcpt, Offset: 5000, Limit: 25}},
		{"since", store.ListQuery{AccountID: big, Recipient: rcpt, Since: time.UnixMilli(1700000000000 + 50_000), Limit: 25}},
		{"and status", store.ListQuery{AccountID: big, Recipient: rcpt, Status: store.StatusArchived, Limit: 25}},
		{"and status offset 1000", store.ListQuery{AccountID: big, Recipient: rcpt, Status: store.StatusArchived, Offset: 1000, Limit: 25}},
		{"and subject 1 in 7", store.ListQuery{AccountID: big, Recipient: rcpt, Subject: "SEVENTH", Limit: 25}},
		{"and subject none", store.ListQuery{AccountID: big, Recipient: rcpt, Subject: "nowhere", Limit: 25}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ListEmails(ctx, bm.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCountAndCursor counts and pages by cursor in an account of
// 100,000 emails: counts from one index cost O(log N); counts that test
// each email (two indexes, label) grow with the emails examined; a page
// after a cursor costs what a first page does. It reports the CPU
// redis-server used per operation, like BenchmarkListPage.
func BenchmarkCountAndCursor(b *testing.B) {
	s := benchStore(b)
	const big = "big-account"
	loadAccount(b, s, big, 100_000)
	rcpt := "r0@example.com"
	ctx := context.Background()
	// The cursor sits in the middle of r0's 10,000 emails.
	mid, err := s.ListEmails(ctx, store.ListQuery{AccountID: big, Recipient: rcpt, Offset: 5000, Limit: 1})
	if err != nil || len(mid) != 1 {
		b.Fatalf("ListEmails: %v, %v", mid, err)
	}
	cursor := mid[0].ID
	for _, bm := range []struct {
		name  string
		q     store.ListQuery
		count bool
	}{
		{"count all", store.ListQuery{AccountID: big}, true},
		{"count recipient", store.ListQuery{AccountID: big, Recipient: rcpt}, true},
		{"count recipient before", store.ListQuery{AccountID: big, Recipient: rcpt, Before: cursor}, true},
		{"count recipient and status", store.ListQuery{AccountID: big, Recipient: rcpt, Status: store.StatusArchived}, true},
		{"count label", store.ListQuery{AccountID: big, Label: "seventh"}, true},
		{"list before", store.ListQuery{AccountID: big, Recipient: rcpt, Before: cursor, Limit: 25}, false},
		{"list label", store.ListQuery{AccountID: big, Label: "seventh", Limit: 25}, false},
		{"list label before", store.ListQuery{AccountID: big, Label: "seventh", Before: cursor, Limit: 25}, false},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			before := redisCPU(b, s)
			for b.Loop() {
				var err error
				if bm.count {
					_, err = s.CountEmails(ctx, bm.q)
				} else {
					_, err = s.ListEmails(ctx, bm.q)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((redisCPU(b, s)-before).Microseconds())/float64(b.N), "redis-µs/op")
		})
	}
}

// loadAccount stores n emails in account through pipelined create scripts:
// 10 recipients in turn, every third email archived, every seventh with
// "seventh" in its subject and as its label.
func loadAccount(b *testing.B, s *Store, account string, n int) {
	b.Helper()
	ctx := context.Background()
	if err := createScript.Load(ctx, s.client).Err(); err != nil {
		b.Fatal(err)
	}
	const chunk = 1000
	for lo := 0; lo < n; lo += chunk {
		pipe := s.client.Pipeline()
		for i := lo; i < min(lo+chunk, n); i++ {
			e := testEmail(account, fmt.Sprintf("r%d@example.com", i%10), "s@example.com", 1700000000000+int64(i))
			if i%3 == 0 {
				e.Status = store.StatusArchived
			}
			if i%7 == 0 {
				e.Subject = ptr("every seventh email")
				e.Labels = []string{"seventh"}
			}
			c, err := s.createArgs(ctx, testBody("Subject: Hello\r\n\r\nhi\r\n"), []*store.Email{e})
			if err != nil {
				b.Fatal(err)
			}
			pipe.Set(ctx, c.keys[1], c.body, bodyTTL)
			pipe.EvalSha(ctx, createScript.Hash(), c.keys, c.args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateArgs measures what a create costs mailsink before Redis
// sees it: the email's fields, the body record and the event, encoded.
func BenchmarkCreateArgs(b *testing.B) {
	s := &Store{prefix: "bench:"}
	text := strings.Repeat("Hello, this is line of a plain text message.\r\n", 44)
	body := testBody(text)
	body.Given = &store.Parts{Text: &text, Headers: map[string]string{"subject": "Order 1234 confirmed", "from": "shop@example.com",
		"to": "user@example.com", "date": "Sun, 22 Nov 2026 16:00:00 +0000", "message-id": "<abc@example.com>",
		"content-type": "text/plain; charset=utf-8"}}
	e := testEmail(acct, "user@example.com", "shop@example.com", 1700000000000)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.createArgs(context.Background(), body, []*store.Email{e}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePage decodes a list script's answer for a page of 25
// emails, as it comes from go-redis: mailsink's CPU per page beyond the
// round trip.
func BenchmarkDecodePage(b *testing.B) {
	var v []any
	for i := range 25 {
		e := testEmail(acct, "r0@example.com", "s@example.com", 1700000000000+int64(i))
		if i%2 == 0 {
			e.Labels = []string{"bench", "ünïcode"}
		}
		r := newRecord(e, e.ID, "body-1")
		v = append(v, e.ID, packRecord(r.storedValues(r.values()), e.RawSize))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeItems(v, "page", acct); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListPage lists the first page of 25 of one recipient's emails
// in an account of 1,000, and reports the CPU redis-server used per page
// (from INFO cpu, so other clients of the same Redis add to it).
func BenchmarkListPage(b *testing.B) {
	s := benchStore(b)
	const account = "page-account"
	loadAccount(b, s, account, 1_000)
	ctx := context.Background()
	q := store.ListQuery{AccountID: account, Recipient: "r0@example.com", Limit: 25}
	if _, err := s.ListEmails(ctx, q); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	before := redisCPU(b, s)
	for b.Loop() {
		if _, err := s.ListEmails(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((redisCPU(b, s)-before).Microseconds())/float64(b.N), "redis-µs/op")
}

// redisCPU returns the CPU time redis-server has used, user and system.
func redisCPU(b *testing.B, s *Store) time.Duration {
	b.Helper()
	info, err := s.client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}
