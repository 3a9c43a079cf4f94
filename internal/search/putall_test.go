package search

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// TestPutAllEqualsPutOneByOne applies the same random changes to two
// indexes, putting emails one by one into the first and in pages into the
// second (newest first, as a load reads them, or in any order), with
// deletes and changes of time between: both end with the same entries in
// order, positions that point back at them, and the same counts.
func TestPutAllEqualsPutOneByOne(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	email := func(i int) *store.Email {
		subject := fmt.Sprintf("email %d", r.IntN(5))
		return &store.Email{ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i), AccountID: "a", Sender: "s@x.example",
			Recipient: fmt.Sprintf("r%d@acme.test", r.IntN(4)), Subject: &subject, Status: store.StatusReceived,
			Labels: []string{fmt.Sprintf("l%d", r.IntN(3))}, Read: r.IntN(2) == 0,
			// Few distinct times, so that the id decides the order often.
			ReceivedAt: base.Add(time.Duration(r.IntN(50)) * time.Minute)}
	}
	for round := range 20 {
		one, all := NewIndex(), NewIndex()
		next := 0
		for step := range 30 {
			var page []*store.Email
			for range r.IntN(40) {
				if next > 0 && r.IntN(4) == 0 {
					page = append(page, email(r.IntN(next))) // again: changed, maybe to another time
				} else {
					page = append(page, email(next))
					next++
				}
			}
			if r.IntN(2) == 0 {
				slices.SortFunc(page, func(a, b *store.Email) int { // newest first, as a load reads
					return compareOrder(&entry{id: b.ID, doc: docOf(b, nil)}, &entry{id: a.ID, doc: docOf(a, nil)})
				})
			}
			for _, e := range page {
				one.Put(e)
			}
			all.PutAll("a", page)
			for range r.IntN(10) {
				if next > 0 {
					id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", r.IntN(next))
					one.Delete("a", id)
					all.Delete("a", id)
				}
			}
			if got, want := indexState(t, all), indexState(t, one); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, step %d: PutAll left\n%v\nPut one by one\n%v", round, step, got, want)
			}
		}
	}
}

// indexState is what account "a" of x holds: its live entries in order,
// with their fields, and its counts. It fails t when an entry's position
// does not point back at it.
func indexState(t *testing.T, x *Index) []any {
	t.Helper()
	a := x.accounts["a"]
	if a == nil {
		return nil
	}
	var live []any
	var last *entry
	for i, e := range a.entries {
		if e == nil {
			continue
		}
		if e.pos != i || a.byID[e.id] != e {
			t.Fatalf("entry %s at %d says it is at %d (in byID: %v)", e.id, i, e.pos, a.byID[e.id] == e)
		}
		if last != nil && compareOrder(last, e) >= 0 {
			t.Fatalf("entry %s (%s) at %d comes after %s (%s)", e.id, e.doc.ReceivedAt, i, last.id, last.doc.ReceivedAt)
		}
		last = e
		live = append(live, e.id, e.doc.Subject, e.doc.Recipient, e.doc.Labels, e.doc.Read, e.doc.ReceivedAt)
	}
	if len(a.byID)*6 != len(live) {
		t.Fatalf("%d emails by id, %d in order", len(a.byID), len(live)/6)
	}
	return []any{live, x.Stats("a")}
}

// BenchmarkLoad puts 100,000 emails into an index newest first, as loading
// an account does: loadBatch at a time with PutAll, or one by one
// with Put.
func BenchmarkLoad(b *testing.B) {
	const n = 100_000
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	emails := make([]*store.Email, n)
	for i := range emails {
		emails[i] = &store.Email{ID: fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", n-i), AccountID: "a", Sender: "s@x.example",
			Recipient: "r@acme.test", Status: store.StatusReceived, Labels: []string{}, ReceivedAt: base.Add(-time.Duration(i) * time.Second)}
	}
	b.Run("PutAll", func(b *testing.B) {
		for b.Loop() {
			x := NewIndex()
			for page := range slices.Chunk(emails, loadBatch) {
				x.PutAll("a", page)
			}
		}
	})
	b.Run("Put", func(b *testing.B) {
		for b.Loop() {
			x := NewIndex()
			for _, e := range emails {
				x.Put(e)
			}
		}
	})
}
