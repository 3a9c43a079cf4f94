package search

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
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
		return &store.Email{ID: testID(i), AccountID: "a", Sender: "s@x.example",
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
					if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
						return c
					}
					return strings.Compare(b.ID, a.ID)
				})
			}
			for _, e := range page {
				one.Put(e)
			}
			all.PutAll("a", page)
			for range r.IntN(10) {
				if next > 0 {
					id := testID(r.IntN(next))
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

// testID is the id of the test's email i: a UUID, or for one in three an
// id of another form (none that mailsink makes; an index keeps them apart).
func testID(i int) string {
	if i%3 == 0 {
		return fmt.Sprintf("odd-%d", i)
	}
	return fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i)
}

// indexState is what account "a" of x holds: its live entries in order,
// with their fields, and its counts. It fails t when the order is wrong,
// or an email's id does not lead to its entry.
func indexState(t *testing.T, x *Index) []any {
	t.Helper()
	a := x.accounts["a"]
	if a == nil {
		return nil
	}
	var live []any
	var last, lastAny *record
	ghosts := 0
	for i, s := range a.order {
		r := &a.recs[s]
		if lastAny != nil && a.compare(lastAny, a.keyOf(r)) > 0 {
			t.Fatalf("entry %d (slot %d, a ghost: %v) is ordered before the one before it", i, s, !r.used)
		}
		lastAny = r
		if !r.used {
			if slices.Contains(a.free, s) {
				t.Fatalf("ghost %d at %d is a free slot too", s, i)
			}
			ghosts++
			continue
		}
		id := a.id(r)
		if got, ok := a.slot(id); !ok || got != s {
			t.Fatalf("entry %s at %d is in slot %d; its id leads to %d, %v", id, i, s, got, ok)
		}
		if last != nil && a.compare(last, a.keyOf(r)) >= 0 {
			t.Fatalf("entry %s at %d comes after %s", id, i, a.id(last))
		}
		last = r
		d := a.doc(r, allDocFields)
		live = append(live, id, d.Subject, d.Recipient, d.Labels, d.Read, d.ReceivedAt)
	}
	if a.len()*6 != len(live) || ghosts != a.ghosts || len(a.recs)-len(a.free) != a.len()+ghosts {
		t.Fatalf("%d emails by id, %d in order; %d ghosts, %d counted; %d slots, %d free",
			a.len(), len(live)/6, ghosts, a.ghosts, len(a.recs), len(a.free))
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

// TestTextOfRemovedEmailsIsGivenBack removes most of an account's emails:
// the chunks that held their strings are given back, and the emails left
// read as they would in an index that only ever had them.
func TestTextOfRemovedEmailsIsGivenBack(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	email := func(i int) *store.Email {
		subject := fmt.Sprintf("email %d: %s", i, strings.Repeat("x", 200))
		mid := fmt.Sprintf("<%d@x.example>", i)
		return &store.Email{ID: testID(i), AccountID: "a", Sender: fmt.Sprintf("s%d@x.example", i%7),
			Recipient: fmt.Sprintf("r%d@acme.test", i), Subject: &subject, MessageID: &mid, Status: store.StatusReceived,
			Labels: []string{fmt.Sprintf("l%d", i%3)}, ReceivedAt: base.Add(time.Duration(i) * time.Second)}
	}
	x, kept := NewIndex(), NewIndex()
	const n = 3000
	for i := range n {
		x.Put(email(i))
		if i%10 == 0 {
			kept.Put(email(i))
		}
	}
	before := len(x.accounts["a"].text.chunks)
	for i := range n {
		if i%10 != 0 {
			x.Delete("a", testID(i))
		}
	}
	after := len(x.accounts["a"].text.chunks)
	if after >= before/2 {
		t.Errorf("%d chunks of text before the deletes, %d after", before, after)
	}
	if got, want := indexState(t, x), indexState(t, kept); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the deletes:\n%v\nwant\n%v", got, want)
	}
	for i := n; i < n+100; i++ { // and it goes on as before
		x.Put(email(i))
		kept.Put(email(i))
	}
	if got, want := indexState(t, x), indexState(t, kept); !reflect.DeepEqual(got, want) {
		t.Fatalf("after new emails:\n%v\nwant\n%v", got, want)
	}
}

// TestTextOfChangedFieldsIsGivenBack changes the subjects of an account's
// emails again and again: the strings they no longer read are given back,
// as those of removed emails are.
func TestTextOfChangedFieldsIsGivenBack(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	email := func(i, round int) *store.Email {
		subject := fmt.Sprintf("email %d, round %d: %s", i, round, strings.Repeat("x", 100))
		return &store.Email{ID: testID(i), AccountID: "a", Sender: "s@x.example", Recipient: "r@acme.test",
			Subject: &subject, Status: store.StatusReceived, Labels: []string{}, ReceivedAt: base.Add(time.Duration(i) * time.Second)}
	}
	x, last := NewIndex(), NewIndex()
	const n, rounds = 100, 100
	for round := range rounds {
		for i := range n {
			x.Put(email(i, round))
		}
	}
	for i := range n {
		last.Put(email(i, rounds-1))
	}
	// 10,000 subjects of about 130 bytes were written, 20 chunks; the text
	// is copied once 1,024 of them are no longer read, so at most 1,124
	// are kept: 3 chunks.
	if got := len(x.accounts["a"].text.chunks); got > 3 {
		t.Errorf("%d chunks of text for %d emails", got, n)
	}
	if got, want := indexState(t, x), indexState(t, last); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the changes:\n%v\nwant\n%v", got, want)
	}
}
