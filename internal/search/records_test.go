package search

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

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
