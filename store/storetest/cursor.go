package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// The label filter, the Before cursor and CountEmails.

// count returns CountEmails(q), failing the test on an error.
func count(t *testing.T, s Store, q store.ListQuery) int64 {
	t.Helper()
	n, err := s.CountEmails(context.Background(), q)
	if err != nil {
		t.Fatalf("CountEmails(%s): %v", describe(q), err)
	}
	return n
}

// testLabel checks that the label filter is exact and case-sensitive, and
// follows updates.
func testLabel(t *testing.T, s Store) {
	emails := []*store.Email{
		newEmail(acctA, 1, withLabels("urgent")),
		newEmail(acctA, 2, withLabels("Urgent")),
		newEmail(acctA, 3, withLabels("urgent ", "x")),
		newEmail(acctA, 4, withLabels("x", "urgent")),
		newEmail(acctA, 5, withLabels("urgen")),
		newEmail(acctA, 6, withLabels(`say "hi"`, "<b>&amp;</b>", `a\b`)),
		newEmail(acctA, 7, withLabels("café", "日本", "a,b")),
		newEmail(acctA, 8),
		newEmail(acctB, 9, withLabels("urgent")),
	}
	createAll(t, s, emails)
	tests := []struct {
		label string
		want  []int
	}{
		{"urgent", []int{4, 1}},
		{"Urgent", []int{2}},
		{"URGENT", nil},
		{"urgent ", []int{3}},
		{"urgen", []int{5}},
		{"rgent", nil},
		{"x", []int{4, 3}},
		{`say "hi"`, []int{6}},
		{"<b>&amp;</b>", []int{6}},
		{`a\b`, []int{6}},
		{"say", nil},
		{"café", []int{7}},
		{"cafe", nil},
		{"日本", []int{7}},
		{"a", nil},
		{"a,b", []int{7}},
		{"*", nil},
		{"%", nil},
	}
	for _, tt := range tests {
		q := store.ListQuery{AccountID: acctA, Label: tt.label, Limit: 100}
		want := idsOf(tt.want...)
		if got := listIDs(t, s, q); !equalIDs(got, want) {
			t.Errorf("ListEmails(%s): got %v, want %v", describe(q), got, want)
		}
		if got := count(t, s, q); got != int64(len(want)) {
			t.Errorf("CountEmails(%s) = %d, want %d", describe(q), got, len(want))
		}
	}
	// Labels changed by an update are what the filter sees next.
	ctx := context.Background()
	if _, err := s.UpdateEmail(ctx, acctA, id(1), store.Update{Labels: &[]string{"done"}}); err != nil {
		t.Fatalf("UpdateEmail: %v", err)
	}
	if _, err := s.UpdateEmail(ctx, acctA, id(8), store.Update{Labels: &[]string{"urgent"}}); err != nil {
		t.Fatalf("UpdateEmail: %v", err)
	}
	q := store.ListQuery{AccountID: acctA, Label: "urgent", Limit: 100}
	if got, want := listIDs(t, s, q), idsOf(8, 4); !equalIDs(got, want) {
		t.Errorf("after updates, ListEmails(%s): got %v, want %v", describe(q), got, want)
	}
	q.Label = "done"
	if got, want := listIDs(t, s, q), idsOf(1); !equalIDs(got, want) {
		t.Errorf("after updates, ListEmails(%s): got %v, want %v", describe(q), got, want)
	}
	q = store.ListQuery{AccountID: acctA, Label: "urgent", Offset: 1, Limit: 1}
	if got, want := listIDs(t, s, q), idsOf(4); !equalIDs(got, want) {
		t.Errorf("ListEmails(%s): got %v, want %v", describe(q), got, want)
	}
}

// testBefore checks the cursor: it starts after its email in list order,
// across emails received in the same millisecond, whether or not the
// cursor's email matches the filters, and an unknown id is NotFound.
func testBefore(t *testing.T, s Store) {
	emails := []*store.Email{
		newEmail(acctA, 1, withReceivedAt(at(0))),
		newEmail(acctA, 2, withReceivedAt(at(10)), withStatus(store.StatusArchived)),
		newEmail(acctA, 3, withReceivedAt(at(10))),
		newEmail(acctA, 4, withReceivedAt(at(10)), withStatus(store.StatusArchived)),
		newEmail(acctA, 5, withReceivedAt(at(20))),
		newEmail(acctA, 6, withReceivedAt(time.UnixMilli(-5).UTC())),
		newEmail(acctB, 7, withReceivedAt(at(5))),
	}
	createAll(t, s, emails)
	tests := []struct {
		name string
		q    store.ListQuery
		want []int
	}{
		{"newest", store.ListQuery{Before: id(5)}, []int{4, 3, 2, 1, 6}},
		{"tie, highest id", store.ListQuery{Before: id(4)}, []int{3, 2, 1, 6}},
		{"tie, middle", store.ListQuery{Before: id(3)}, []int{2, 1, 6}},
		{"tie, lowest id", store.ListQuery{Before: id(2)}, []int{1, 6}},
		{"oldest", store.ListQuery{Before: id(6)}, nil},
		{"upper case id", store.ListQuery{Before: "0190B6D2-7C3E-7A1B-8C2D-000000000004"}, []int{3, 2, 1, 6}},
		{"cursor matches the filter", store.ListQuery{Before: id(4), Status: store.StatusArchived}, []int{2}},
		{"cursor does not match the filter", store.ListQuery{Before: id(3), Status: store.StatusArchived}, []int{2}},
		{"cursor does not match, received", store.ListQuery{Before: id(4), Status: store.StatusReceived}, []int{3, 1, 6}},
		{"with offset", store.ListQuery{Before: id(5), Offset: 2}, []int{2, 1, 6}},
		{"with limit", store.ListQuery{Before: id(5), Limit: 2}, []int{4, 3}},
		{"with since", store.ListQuery{Before: id(4), Since: at(0)}, []int{3, 2}},
		{"with since, none", store.ListQuery{Before: id(1), Since: at(0)}, nil},
		{"with subject", store.ListQuery{Before: id(5), Subject: "email 3"}, []int{3}},
		{"with label", store.ListQuery{Before: id(5), Label: "x"}, nil},
		{"with two indexes", store.ListQuery{Before: id(5), Status: store.StatusReceived, Recipient: "rcpt@example.com"}, []int{3, 1, 6}},
	}
	for _, tt := range tests {
		q := tt.q
		q.AccountID = acctA
		if q.Limit == 0 {
			q.Limit = 100
		}
		want := idsOf(tt.want...)
		if got := listIDs(t, s, q); !equalIDs(got, want) {
			t.Errorf("%s: ListEmails(%s):\ngot  %v\nwant %v", tt.name, describe(q), got, want)
		}
		if tt.q.Limit == 0 && tt.q.Offset == 0 {
			if got := count(t, s, q); got != int64(len(want)) {
				t.Errorf("%s: CountEmails(%s) = %d, want %d", tt.name, describe(q), got, len(want))
			}
		}
	}
	ctx := context.Background()
	for _, q := range []store.ListQuery{
		{AccountID: acctA, Before: id(7), Limit: 10},                                     // another account's
		{AccountID: acctA, Before: id(99), Limit: 10},                                    // none
		{AccountID: acctA, Before: id(99), Status: store.StatusArchived, Limit: 10},      // none, with a filter
		{AccountID: acctA, Before: id(99), Subject: "x", Label: "y", Limit: 10},          // none, scanning
		{AccountID: acctB, Before: id(1), Recipient: "rcpt@example.com", Limit: 10},      // another account's
		{AccountID: "acct-none", Before: id(1), Recipient: "rcpt@example.com", Limit: 1}, // no such account
	} {
		_, err := s.ListEmails(ctx, q)
		wantCode(t, err, store.NotFound, fmt.Sprintf("ListEmails(%s)", describe(q)))
		_, err = s.CountEmails(ctx, q)
		wantCode(t, err, store.NotFound, fmt.Sprintf("CountEmails(%s)", describe(q)))
	}
	// A deleted cursor is unknown too.
	if err := s.DeleteEmail(ctx, acctA, id(3)); err != nil {
		t.Fatalf("DeleteEmail: %v", err)
	}
	_, err := s.ListEmails(ctx, store.ListQuery{AccountID: acctA, Before: id(3), Limit: 10})
	wantCode(t, err, store.NotFound, "ListEmails(before a deleted email)")
}

// testCursorCombinations checks label, Before and CountEmails combined with
// the other filters and paging, against the reference in selected.
func testCursorCombinations(t *testing.T, s Store) {
	emails := filterFixture()
	createAll(t, s, emails)
	var checked int
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if checked++; checked > 20 {
			t.Fatal("too many failures")
		}
	}
	for _, rc := range []string{"", "alice@example.com"} {
		for _, st := range []store.Status{"", store.StatusReceived} {
			for _, su := range []string{"", "reset"} {
				for _, la := range []string{"", "a", "A", "b", "a "} {
					for _, be := range []string{"", id(8), id(7), id(6), id(3), id(1)} {
						for _, si := range []time.Time{{}, at(2000)} {
							q := store.ListQuery{AccountID: acctA, Recipient: rc, Status: st, Subject: su, Label: la, Before: be, Since: si}
							if got, want := count(t, s, q), int64(len(selected(emails, q))); got != want {
								fail("CountEmails(%s) = %d, want %d", describe(q), got, want)
							}
							for _, pg := range []struct {
								limit  int
								offset int64
							}{{100, 0}, {1, 1}, {2, 0}} {
								q.Limit, q.Offset = pg.limit, pg.offset
								if got, want := listIDs(t, s, q), expect(emails, q); !equalIDs(got, want) {
									fail("ListEmails(%s):\ngot  %v\nwant %v", describe(q), got, want)
								}
							}
						}
					}
				}
			}
		}
	}
	q := store.ListQuery{AccountID: acctB}
	if got := count(t, s, q); got != 1 {
		t.Errorf("CountEmails(%s) = %d, want 1", describe(q), got)
	}
	q = store.ListQuery{AccountID: "acct-none", Label: "a"}
	if got := count(t, s, q); got != 0 {
		t.Errorf("CountEmails(%s) = %d, want 0", describe(q), got)
	}
}

// testCount checks CountEmails on more emails than one scan batch, with each
// kind of filter, and that it follows creates, updates and deletes.
func testCount(t *testing.T, s Store) {
	const total = 1200
	emails := make([]*store.Email, total)
	for n := range total {
		var opts []emailOpt
		if n%3 == 0 {
			opts = append(opts, withStatus(store.StatusArchived), withLabels("third"))
		}
		if n%2 == 0 {
			opts = append(opts, withRecipient("even@example.com"))
		}
		emails[n] = newEmail(acctA, n, append(opts, withReceivedAt(at(int64(n/4))))...)
	}
	createAll(t, s, emails)
	queries := []store.ListQuery{
		{},
		{Status: store.StatusArchived},
		{Recipient: "even@example.com"},
		{Recipient: "even@example.com", Status: store.StatusArchived},
		{Label: "third"},
		{Label: "third", Recipient: "EVEN@example.com"},
		{Subject: "email 1"},
		{Subject: "email 1", Label: "third"},
		{Since: at(100)},
		{Before: id(1000)},
		{Before: id(1000), Since: at(100), Label: "third"},
	}
	check := func(when string) {
		t.Helper()
		for _, q := range queries {
			q.AccountID = acctA
			if got, want := count(t, s, q), int64(len(selected(emails, q))); got != want {
				t.Errorf("%s: CountEmails(%s) = %d, want %d", when, describe(q), got, want)
			}
		}
	}
	check("after creates")

	ctx := context.Background()
	archived := store.StatusArchived
	for n := 1; n < 100; n += 3 {
		e, err := s.UpdateEmail(ctx, acctA, id(n), store.Update{Status: &archived, Labels: &[]string{"third"}})
		if err != nil {
			t.Fatalf("UpdateEmail: %v", err)
		}
		emails[n] = e
	}
	check("after updates")

	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 500 + w; n < 700; n += 4 {
				if err := s.DeleteEmail(ctx, acctA, id(n)); err != nil {
					t.Errorf("DeleteEmail: %v", err)
					return
				}
				mu.Lock()
				emails[n] = newEmail("deleted", n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	check("after deletes")
}

// testPagingByCursor pages with Before while other goroutines insert newer
// emails, some of which match: every email that was there when paging
// started is seen once, in order.
func testPagingByCursor(t *testing.T, s Store) {
	const (
		stable  = 60
		writers = 3
		each    = 30
	)
	var emails []*store.Email
	for n := range stable {
		// Two emails per millisecond, so pages end inside a millisecond.
		emails = append(emails, newEmail(acctA, n, withReceivedAt(at(int64(n/2))), withLabels("l")))
	}
	createAll(t, s, emails)
	sortListOrder(emails)
	want := ids(emails)

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1000 + w*each + i
				e := newEmail(acctA, n, withReceivedAt(at(int64(100+n))), withLabels("l"))
				if err := s.CreateEmails(context.Background(), newBody(n), []*store.Email{e}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	queries := []store.ListQuery{
		{AccountID: acctA},
		{AccountID: acctA, Label: "l"},
		{AccountID: acctA, Status: store.StatusReceived, Recipient: "rcpt@example.com"},
	}
	for _, q := range queries {
		// Newer emails arrive above the stable set, so the walk starts
		// after the stable set's newest, as a client does after its first
		// page.
		got := []string{want[0]}
		q.Before, q.Limit = want[0], 7
		for {
			page := listIDs(t, s, q)
			got = append(got, page...)
			if len(page) < q.Limit {
				break
			}
			q.Before = page[len(page)-1]
		}
		if !equalIDs(got, want) {
			t.Errorf("paging by cursor ListEmails(%s) while inserting:\ngot  %v\nwant %v", describe(q), got, want)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("CreateEmails: %v", err)
	}
}
