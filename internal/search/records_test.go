package search

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// TestRecordsAsAModel applies random Puts, PutAlls (with an email twice in
// a page), Deletes and SetDigests to an index and to a map, over few ids so
// that the text is compacted again and again, inside PutAll and Delete
// too: every email reads as the map has it, its digest is the last given,
// and every label set and digest slot counts exactly the emails using it.
func TestRecordsAsAModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ids = 60
	type want struct {
		e      *store.Email
		digest string // the digest's Snippet, "" for none
	}
	model := map[string]*want{}
	email := func(i int) *store.Email {
		subject := fmt.Sprintf("subject %d %s", r.IntN(1000), strings.Repeat("s", r.IntN(300)))
		mid := fmt.Sprintf("<%d@x>", r.IntN(1000))
		var labels []string
		for range r.IntN(3) {
			labels = append(labels, fmt.Sprintf("l%d", r.IntN(4)))
		}
		return &store.Email{ID: testID(i), AccountID: "a", Sender: fmt.Sprintf("s%d@x.example", r.IntN(1000)),
			Recipient: fmt.Sprintf("r%d@acme.test", r.IntN(5)), Subject: &subject, MessageID: &mid,
			Status: []store.Status{store.StatusReceived, "other"}[r.IntN(2)], Labels: labels, Read: r.IntN(2) == 0,
			ReceivedAt: base.Add(time.Duration(r.IntN(20)) * time.Millisecond), RawSize: int64(r.IntN(100))}
	}
	put := func(e *store.Email) {
		w := model[e.ID]
		if w == nil {
			w = &want{}
			model[e.ID] = w
		}
		w.e = e
	}
	x := NewIndex()
	compactions := 0
	for step := range 2500 {
		switch op := r.IntN(10); {
		case op < 3:
			e := email(r.IntN(ids))
			x.Put(e)
			put(e)
		case op < 6:
			var page []*store.Email
			for range r.IntN(12) {
				e := email(r.IntN(ids))
				page = append(page, e)
				if r.IntN(4) == 0 {
					again := *email(r.IntN(ids))
					again.ID = e.ID
					page = append(page, &again)
				}
			}
			x.PutAll("a", page)
			for _, e := range page {
				put(e)
			}
		case op < 8:
			id := testID(r.IntN(ids))
			x.Delete("a", id)
			delete(model, id)
		default:
			d := &Digest{Snippet: fmt.Sprintf("d%d", step), Text: "w"}
			var some []string
			for range r.IntN(4) {
				some = append(some, testID(r.IntN(ids)))
			}
			x.SetDigests("a", some, d)
			for _, id := range some {
				if w := model[id]; w != nil {
					w.digest = d.Snippet
				}
			}
		}
		if step%20 == 0 {
			checkSearch(t, step, r, x, base, func() []*store.Email {
				var all []*store.Email
				for _, w := range model {
					all = append(all, w.e)
				}
				return all
			}())
		}
		a := x.accounts["a"]
		if a.stale == 0 {
			compactions++
		}
		checkRecords(t, step, a, func(id string) (*store.Email, string, bool) {
			w, ok := model[id]
			if !ok {
				return nil, "", false
			}
			return w.e, w.digest, true
		}, len(model))
	}
	if compactions < 3 {
		t.Fatalf("the text was compacted %d times", compactions)
	}
}

// checkRecords fails t unless a holds exactly n emails, each as model has
// it, in order, with label sets and digest slots counted right.
func checkRecords(t *testing.T, step int, a *accountIndex, model func(id string) (*store.Email, string, bool), n int) {
	t.Helper()
	labelRefs := make([]int, len(a.labels.sets))
	digestRefs := make([]int, len(a.digests.slots))
	live := 0
	stats := Stats{Statuses: map[store.Status]int64{}, Labels: map[string]LabelStats{}}
	var last *record
	ghosts := 0
	for _, s := range a.order {
		r := &a.recs[s]
		if !r.used {
			if slices.Contains(a.free, s) {
				t.Fatalf("step %d: order holds free slot %d", step, s)
			}
			ghosts++
			continue
		}
		live++
		id := a.id(r)
		if got, ok := a.slot(id); !ok || got != s {
			t.Fatalf("step %d: %s in slot %d leads to %d, %v", step, id, s, got, ok)
		}
		if last != nil && a.compare(last, a.keyOf(r)) >= 0 {
			t.Fatalf("step %d: %s out of order", step, id)
		}
		last = r
		e, digest, ok := model(id)
		if !ok {
			t.Fatalf("step %d: %s is in the index, not in the model", step, id)
		}
		d := a.doc(r, allDocFields)
		if d.Sender != e.Sender || d.Recipient != e.Recipient || d.Subject != *e.Subject || d.MessageID != *e.MessageID ||
			d.Status != e.Status || d.Read != e.Read || d.RawSize != e.RawSize || !d.ReceivedAt.Equal(e.ReceivedAt) ||
			!slices.Equal(d.Labels, e.Labels) {
			t.Fatalf("step %d: %s reads\n%+v\nwant\n%+v", step, id, d, e)
		}
		gotDigest := ""
		if d.packed != "" {
			gotDigest = d.packed.unpack().Snippet
		}
		if gotDigest != digest {
			t.Fatalf("step %d: %s has digest %q, want %q", step, id, gotDigest, digest)
		}
		labelRefs[r.labels]++
		digestRefs[r.digest]++
		stats.Total++
		unread := int64(0)
		if !d.Read {
			unread = 1
		}
		stats.Unread += unread
		stats.Statuses[d.Status]++
		for i, l := range d.Labels {
			if !slices.Contains(d.Labels[:i], l) {
				stats.Labels[l] = LabelStats{Total: stats.Labels[l].Total + 1, Unread: stats.Labels[l].Unread + unread}
			}
		}
	}
	if got := a.counts; got.Total != stats.Total || got.Unread != stats.Unread ||
		!maps.Equal(got.Statuses, stats.Statuses) || !maps.Equal(got.Labels, stats.Labels) {
		t.Fatalf("step %d: counts %+v, want %+v", step, got, stats)
	}
	used := 0
	for s := range a.recs {
		if a.recs[s].used {
			used++
		}
	}
	if live != n || used != n || a.len() != n || len(a.recs)-len(a.free) != n+ghosts || ghosts != a.ghosts {
		t.Fatalf("step %d: %d in order, %d slots used, %d by id, %d slots not free, %d ghosts (%d counted); want %d",
			step, live, used, a.len(), len(a.recs)-len(a.free), ghosts, a.ghosts, n)
	}
	for i := 1; i < len(a.labels.sets); i++ {
		if got := a.labels.sets[i].refs; got != labelRefs[i] {
			t.Fatalf("step %d: label set %d %v counts %d, used by %d", step, i, a.labels.sets[i].labels, got, labelRefs[i])
		}
	}
	if free := len(a.labels.free); len(a.labels.byKey)+free != len(a.labels.sets)-1 {
		t.Fatalf("step %d: %d label sets by key, %d free, of %d", step, len(a.labels.byKey), free, len(a.labels.sets)-1)
	}
	for i := 1; i < len(a.digests.slots); i++ {
		if got := a.digests.slots[i].refs; got != digestRefs[i] {
			t.Fatalf("step %d: digest slot %d counts %d, used by %d", step, i, got, digestRefs[i])
		}
		if (a.digests.slots[i].p == "") != (digestRefs[i] == 0) {
			t.Fatalf("step %d: digest slot %d used by %d holds %v", step, i, digestRefs[i], a.digests.slots[i].p)
		}
	}
	if got, want := len(a.digests.free), len(a.digests.slots)-1-countNonZero(digestRefs[1:]); got != want {
		t.Fatalf("step %d: %d digest slots free, want %d", step, got, want)
	}
}

func countNonZero(n []int) int {
	c := 0
	for _, v := range n {
		if v != 0 {
			c++
		}
	}
	return c
}

// TestTextAtTheChunkBounds: strings that fill a chunk to its last byte,
// that do not fit what is left of one, and that are too long for a span
// (65,535 bytes and more) read back as they were, and after a compaction.
func TestTextAtTheChunkBounds(t *testing.T) {
	var tx text
	var spans []span
	var strs []string
	for i, n := range []int{1, chunkSize - 2, 1, 1, 2, chunkSize - 1, chunkSize, 65534, 65535, 65536, 1 << 20, 3, chunkSize - 3} {
		s := strings.Repeat(string(rune('a'+i%26)), n)
		strs = append(strs, s)
		spans = append(spans, tx.add(s))
	}
	for i, sp := range spans {
		if got := tx.get(sp); got != strs[i] {
			t.Fatalf("string %d (%d bytes): read back %d bytes", i, len(strs[i]), len(got))
		}
	}
	for i, c := range tx.chunks {
		if c.Len() > chunkSize || c.Cap() != chunkSize {
			t.Fatalf("chunk %d: %d bytes of %d", i, c.Len(), c.Cap())
		}
	}
	// And through an index, across a compaction.
	x := NewIndex()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range strs {
		x.Put(&store.Email{ID: testID(i), AccountID: "a", Subject: &strs[i], Sender: s, ReceivedAt: base.Add(time.Duration(i) * time.Millisecond)})
	}
	x.accounts["a"].compactText()
	a := x.accounts["a"]
	for i, s := range strs {
		sl, ok := a.slot(testID(i))
		if !ok {
			t.Fatalf("%s is gone", testID(i))
		}
		if d := a.doc(&a.recs[sl], allDocFields); d.Subject != s || d.Sender != s {
			t.Fatalf("string %d (%d bytes): read back %d and %d bytes", i, len(s), len(d.Subject), len(d.Sender))
		}
	}
}

// TestScanGoesOnAfterChangesDuringARead changes the account while a
// search reads bodies without the lock, deleting the email where it is and
// adding emails around it: the search goes on from where that email was,
// each email it returns is met once, in order, and it does not fail.
func TestScanGoesOnAfterChangesDuringARead(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	const n = 500
	at := map[string]int{}
	email := func(i int, ms int) *store.Email {
		at[testID(i)] = ms
		return &store.Email{ID: testID(i), AccountID: "a", Status: store.StatusReceived,
			ReceivedAt: base.Add(time.Duration(ms) * time.Millisecond)}
	}
	for i := range n {
		x.Put(email(i, i/3)) // three to a millisecond: the id decides
		x.SetDigest("a", testID(i), &Digest{Text: "word"})
	}
	q, err := Parse("word")
	if err != nil {
		t.Fatal(err)
	}
	next := n
	reads := 0
	texts := func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		reads++
		last := ids[len(ids)-1]
		// Delete the email the scan is at, and ones before and after it,
		// and add new ones, older and newer.
		x.Delete("a", last)
		for k := range 80 {
			x.Delete("a", testID(next-n+k*3))
		}
		for k := range 10 {
			x.Put(email(next, k*50))
			next++
		}
		got := map[string]string{}
		for _, id := range ids {
			got[id] = "word"
		}
		return got, nil
	}
	var out []string
	err = x.scan(context.Background(), store.ListQuery{AccountID: "a"}, q, texts, func(id string) bool {
		out = append(out, id)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if reads < 3 {
		t.Fatalf("%d reads", reads)
	}
	for i := 1; i < len(out); i++ {
		if c := cmpInt(at[out[i-1]], at[out[i]]); c < 0 || c == 0 && out[i-1] <= out[i] {
			t.Fatalf("%s (%d ms) returned after %s (%d ms)", out[i], at[out[i]], out[i-1], at[out[i-1]])
		}
	}
}

func cmpInt(a, b int) int { return a - b }

// TestEmptyIDIsOrderedAndRemoved: an id of no characters is an id of
// another form like any (migrated data is not checked), ordered before
// every other of its millisecond; deleting it leaves nothing in the
// account's order.
func TestEmptyIDIsOrderedAndRemoved(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	for _, id := range []string{"+", "", testID(1)} {
		x.Put(&store.Email{ID: id, AccountID: "a", Status: store.StatusReceived, ReceivedAt: at})
	}
	a := x.accounts["a"]
	var got []string
	for _, s := range a.order {
		got = append(got, a.id(&a.recs[s]))
	}
	if want := []string{"", "+", testID(1)}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	for _, id := range []string{"", "+", testID(1)} {
		x.Delete("a", id)
	}
	ids, err := x.Search(context.Background(), store.ListQuery{AccountID: "a", Limit: 10}, Query{}, nil)
	if err != nil || len(ids) != 0 {
		t.Fatalf("after deleting every email: %q, %v", ids, err)
	}
}

// TestIndexUnderConcurrentChanges searches, reading bodies, while other
// goroutines put, delete and digest the account's emails: with -race, any
// access outside the lock shows.
func TestIndexUnderConcurrentChanges(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	const ids = 300
	email := func(r *rand.Rand) *store.Email {
		subject := fmt.Sprintf("subject %d", r.IntN(10))
		return &store.Email{ID: testID(r.IntN(ids)), AccountID: "a", Subject: &subject, Status: store.StatusReceived,
			Labels: []string{fmt.Sprintf("l%d", r.IntN(3))}, ReceivedAt: base.Add(time.Duration(r.IntN(100)) * time.Millisecond)}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range ids {
		x.Put(email(r))
	}
	q, err := Parse("word label:l1")
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	texts := func(_ context.Context, _ string, ids []string) (map[string]string, error) {
		reads.Add(1)
		got := map[string]string{}
		for _, id := range ids {
			got[id] = "word"
		}
		return got, nil
	}
	for range ids / 2 {
		x.SetDigest("a", testID(r.IntN(ids)), &Digest{Text: "word"})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				switch i % 4 {
				case 0:
					x.Put(email(r))
				case 1:
					x.PutAll("a", []*store.Email{email(r), email(r), email(r)})
				case 2:
					x.Delete("a", testID(r.IntN(ids)))
				default:
					x.SetDigests("a", []string{testID(r.IntN(ids)), testID(r.IntN(ids))}, &Digest{Text: "word", Snippet: "s"})
				}
			}
		}()
	}
	for range 200 {
		if _, err := x.Search(context.Background(), store.ListQuery{AccountID: "a", Limit: 1000}, q, texts); err != nil {
			t.Fatal(err)
		}
		x.Stats("a")
		x.Undigested("a", 10)
	}
	close(done)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no bodies were read")
	}
}

// checkSearch fails t unless x's searches of account "a", after a random
// email and since a random time (not on a millisecond), return the emails
// as ordering them does.
func checkSearch(t *testing.T, step int, r *rand.Rand, x *Index, base time.Time, emails []*store.Email) {
	t.Helper()
	slices.SortFunc(emails, func(a, b *store.Email) int { // newest first
		if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	f := store.ListQuery{AccountID: "a", Limit: 1000}
	want := emails
	if len(emails) > 0 && r.IntN(2) == 0 {
		i := r.IntN(len(emails))
		f.Before, want = emails[i].ID, emails[i+1:]
	}
	if r.IntN(2) == 0 {
		f.Since = base.Add(time.Duration(r.IntN(20))*time.Millisecond + time.Duration(r.IntN(3))*time.Millisecond/2)
		want = slices.DeleteFunc(slices.Clone(want), func(e *store.Email) bool { return !e.ReceivedAt.After(f.Since) })
	}
	got, err := x.Search(context.Background(), f, Query{}, nil)
	if err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	var wantIDs []string
	for _, e := range want {
		wantIDs = append(wantIDs, e.ID)
	}
	if !slices.Equal(got, wantIDs) {
		t.Fatalf("step %d: search before %q since %v:\n%q\nwant\n%q", step, f.Before, f.Since, got, wantIDs)
	}
}

// TestDeletingTheOldestLeavesNoDeletedEntries deletes an account's emails
// oldest first, as retention does, and newest first: no deleted entry is
// left at either end of the order, where every later delete would step
// over all of them.
func TestDeletingTheOldestLeavesNoDeletedEntries(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	const n = 200
	for i := range n {
		x.Put(&store.Email{ID: testID(i), AccountID: "a", Status: store.StatusReceived, ReceivedAt: base.Add(time.Duration(i) * time.Second)})
	}
	x.Delete("a", testID(1))
	for i := range 50 {
		x.Delete("a", testID(i))
		x.Delete("a", testID(n-1-i))
	}
	a := x.accounts["a"]
	if a.ghosts != 0 || len(a.order) != n-100 {
		t.Fatalf("%d entries in order, %d ghosts; want %d, none", len(a.order), a.ghosts, n-100)
	}
	indexState(t, x)
}
