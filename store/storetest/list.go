package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// testOrder checks list order: ReceivedAt descending, then ID descending,
// across ties, dates before 1970 and far in the future.
func testOrder(t *testing.T, s Store) {
	times := map[int]time.Time{
		1:  base,
		2:  base, // ties with 1 and 3: ordered by id
		3:  base,
		4:  at(1),
		5:  time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		6:  time.UnixMilli(-1).UTC(), // 1969-12-31T23:59:59.999Z
		7:  time.UnixMilli(0).UTC(),
		8:  time.UnixMilli(253_402_300_799_999).UTC(), // 9999-12-31T23:59:59.999Z
		9:  time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		10: at(-1),
		11: time.UnixMilli(-1).UTC(),
		12: time.Date(1000, 1, 1, 0, 0, 0, 1e6, time.UTC),
	}
	// Created in an order unrelated to list order.
	for _, n := range []int{5, 12, 1, 8, 3, 10, 6, 2, 9, 11, 4, 7} {
		create(t, s, newEmail(acctA, n, withReceivedAt(times[n])))
	}
	want := idsOf(8, 9, 4, 3, 2, 1, 10, 7, 11, 6, 5, 12)
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 100}); !equalIDs(got, want) {
		t.Errorf("ListEmails:\ngot  %v\nwant %v", got, want)
	}
	// The same order holds within an index.
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Recipient: "rcpt@example.com", Limit: 100}); !equalIDs(got, want) {
		t.Errorf("ListEmails by recipient:\ngot  %v\nwant %v", got, want)
	}
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Status: store.StatusReceived, Limit: 100}); !equalIDs(got, want) {
		t.Errorf("ListEmails by status:\ngot  %v\nwant %v", got, want)
	}
	wantTime := map[string]time.Time{}
	for n, tm := range times {
		wantTime[id(n)] = tm
	}
	for _, e := range list(t, s, store.ListQuery{AccountID: acctA, Limit: 100}) {
		if !e.ReceivedAt.Equal(wantTime[e.ID]) || e.ReceivedAt.Location() != time.UTC {
			t.Errorf("email %s: ReceivedAt = %s, want %s", e.ID, e.ReceivedAt, wantTime[e.ID])
		}
	}
}

// filterFixture is a set of emails whose addresses and subjects sit close to
// each other, to catch prefix, suffix and case mistakes.
func filterFixture() []*store.Email {
	r, p, a := store.StatusReceived, store.StatusProcessed, store.StatusArchived
	return []*store.Email{
		newEmail(acctA, 1, withRecipient("alice@example.com"), withSender("Bob@X.io"), withSubject("Welcome to Acme"), withStatus(r), withLabels("a")),
		newEmail(acctA, 2, withRecipient("ALICE@example.COM"), withSender("bob@x.io"), withSubject("Your RESET code"), withStatus(p), withLabels("A", "b")),
		newEmail(acctA, 3, withRecipient("alice@example.com.evil"), withSender("bob@x.io.evil"), withSubject("reset password"), withStatus(r), withLabels("a", "b")),
		newEmail(acctA, 4, withRecipient("malice@example.com"), withSender("carol@y.org"), withNoSubject(), withStatus(a)),
		newEmail(acctA, 5, withRecipient("alice@example.co"), withSender("xbob@x.io"), withSubject(""), withStatus(p), withLabels("ab")),
		newEmail(acctA, 6, withRecipient("dave@example.com"), withSender("bob@x.io"), withSubject("Preset reset"), withStatus(a), withLabels("b", "a")),
		// Received in the same millisecond as 6.
		newEmail(acctA, 7, withRecipient("alice@example.com"), withSender("carol@y.org"), withSubject("100% off"), withStatus(r), withReceivedAt(at(6000)), withLabels("a")),
		newEmail(acctA, 8, withRecipient("dave@example.com"), withSender("Carol@Y.org"), withSubject("snake_case [tag] a*b what?"), withStatus(p), withLabels("a ")),
		// Another account with matching fields, which no query of acctA sees.
		newEmail(acctB, 9, withRecipient("alice@example.com"), withSender("bob@x.io"), withSubject("reset"), withStatus(r), withLabels("a")),
	}
}

// testFilters checks each filter alone and combined, with explicit answers.
func testFilters(t *testing.T, s Store) {
	createAll(t, s, filterFixture())
	q := func(mod func(*store.ListQuery)) store.ListQuery {
		q := store.ListQuery{AccountID: acctA, Limit: 100}
		mod(&q)
		return q
	}
	r, p, a := store.StatusReceived, store.StatusProcessed, store.StatusArchived
	tests := []struct {
		name string
		q    store.ListQuery
		want []int
	}{
		{"none", q(func(q *store.ListQuery) {}), []int{8, 7, 6, 5, 4, 3, 2, 1}},
		{"recipient", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com" }), []int{7, 2, 1}},
		{"recipient other case", q(func(q *store.ListQuery) { q.Recipient = "Alice@EXAMPLE.com" }), []int{7, 2, 1}},
		{"recipient shorter domain", q(func(q *store.ListQuery) { q.Recipient = "alice@example.co" }), []int{5}},
		{"recipient longer domain", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com.evil" }), []int{3}},
		{"recipient unknown", q(func(q *store.ListQuery) { q.Recipient = "nobody@example.com" }), nil},
		{"sender", q(func(q *store.ListQuery) { q.Sender = "Bob@X.io" }), []int{6, 2, 1}},
		{"sender lower case", q(func(q *store.ListQuery) { q.Sender = "bob@x.io" }), []int{6, 2, 1}},
		{"sender longer domain", q(func(q *store.ListQuery) { q.Sender = "bob@x.io.evil" }), []int{3}},
		{"sender other", q(func(q *store.ListQuery) { q.Sender = "CAROL@y.org" }), []int{8, 7, 4}},
		{"sender unknown", q(func(q *store.ListQuery) { q.Sender = "ob@x.io" }), nil},
		{"status received", q(func(q *store.ListQuery) { q.Status = r }), []int{7, 3, 1}},
		{"status processed", q(func(q *store.ListQuery) { q.Status = p }), []int{8, 5, 2}},
		{"status archived", q(func(q *store.ListQuery) { q.Status = a }), []int{6, 4}},
		{"subject", q(func(q *store.ListQuery) { q.Subject = "reset" }), []int{6, 3, 2}},
		{"subject upper case", q(func(q *store.ListQuery) { q.Subject = "RESET" }), []int{6, 3, 2}},
		{"subject whole", q(func(q *store.ListQuery) { q.Subject = "welcome to acme" }), []int{1}},
		{"subject unknown", q(func(q *store.ListQuery) { q.Subject = "zzz" }), nil},
		{"subject space", q(func(q *store.ListQuery) { q.Subject = " " }), []int{8, 7, 6, 3, 2, 1}},
		{"recipient+status", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com"; q.Status = r }), []int{7, 1}},
		{"recipient+sender", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com"; q.Sender = "BOB@x.io" }), []int{2, 1}},
		{"sender+subject", q(func(q *store.ListQuery) { q.Sender = "bob@x.io"; q.Subject = "Reset" }), []int{6, 2}},
		{"sender+status", q(func(q *store.ListQuery) { q.Sender = "carol@y.org"; q.Status = a }), []int{4}},
		{"status+subject", q(func(q *store.ListQuery) { q.Status = p; q.Subject = "a*b" }), []int{8}},
		{"all four", q(func(q *store.ListQuery) {
			q.Recipient, q.Sender, q.Status, q.Subject = "alice@example.com", "carol@y.org", r, "100%"
		}), []int{7}},
		{"recipient+status, no match", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com"; q.Status = a }), nil},
		{"sender+since", q(func(q *store.ListQuery) { q.Sender = "carol@y.org"; q.Since = at(6000) }), []int{8}},
		{"recipient+since", q(func(q *store.ListQuery) { q.Recipient = "alice@example.com"; q.Since = at(1000) }), []int{7, 2}},
		{"other account", store.ListQuery{AccountID: acctB, Recipient: "alice@example.com", Limit: 100}, []int{9}},
	}
	for _, tt := range tests {
		if got, want := listIDs(t, s, tt.q), idsOf(tt.want...); !equalIDs(got, want) {
			t.Errorf("%s: ListEmails(%s):\ngot  %v\nwant %v", tt.name, describe(tt.q), got, want)
		}
	}
}

// testFilterCombinations checks every combination of a few values of each
// filter, with and without paging, against the reference in matches.
func testFilterCombinations(t *testing.T, s Store) {
	emails := filterFixture()
	createAll(t, s, emails)
	recipients := []string{"", "alice@example.com", "ALICE@EXAMPLE.COM", "dave@example.com", "alice@example.co", "nobody@none.io"}
	senders := []string{"", "bob@x.io", "BOB@X.IO", "carol@y.org", "bob@x.io.evil"}
	statuses := []store.Status{"", store.StatusReceived, store.StatusProcessed, store.StatusArchived}
	subjects := []string{"", "reset", "RESET", "%", "_", "*", "?", "[", "e", "zzz"}
	sinces := []time.Time{{}, at(2000), at(6000)}
	pages := []struct {
		limit  int
		offset int64
	}{{100, 0}, {1, 1}, {2, 1}}
	var checked int
	for _, rc := range recipients {
		for _, se := range senders {
			for _, st := range statuses {
				for _, su := range subjects {
					for _, si := range sinces {
						for _, pg := range pages {
							q := store.ListQuery{AccountID: acctA, Recipient: rc, Sender: se, Status: st, Subject: su, Since: si, Limit: pg.limit, Offset: pg.offset}
							got, want := listIDs(t, s, q), expect(emails, q)
							if !equalIDs(got, want) {
								t.Errorf("ListEmails(%s):\ngot  %v\nwant %v", describe(q), got, want)
								if checked++; checked > 20 {
									t.Fatal("too many failures")
								}
							}
						}
					}
				}
			}
		}
	}
}

// testSubjectIsLiteral checks that characters special to SQL LIKE, globs
// and regular expressions match only themselves.
func testSubjectIsLiteral(t *testing.T, s Store) {
	subjects := map[int]string{
		1: "100% off", 2: "100 percent off",
		3: "file_name.txt", 4: "filename.txt",
		5: "a*b", 6: "ab",
		7: "what?", 8: "what",
		9: "[tag] news", 10: "tag news",
		11: "a.b", 12: `a\b`,
		13: "^start$", 14: "café",
	}
	var emails []*store.Email
	for n, subj := range subjects {
		emails = append(emails, newEmail(acctA, n, withSubject(subj)))
	}
	createAll(t, s, emails)
	tests := []struct {
		subject string
		want    []int
	}{
		{"%", []int{1}},
		{"100%", []int{1}},
		{"0%_", nil},
		{"%off", nil},
		{"_", []int{3}},
		{"e_n", []int{3}},
		{"*", []int{5}},
		{"a*b", []int{5}},
		{"?", []int{7}},
		{"what?", []int{7}},
		{"[", []int{9}},
		{"[tag]", []int{9}},
		{"[a-z]", nil},
		{".", []int{11, 4, 3}},
		{"a.b", []int{11}},
		{".*", nil},
		{`\`, []int{12}},
		{`a\b`, []int{12}},
		{"^", []int{13}},
		{"$", []int{13}},
		{"^start$", []int{13}},
		{"é", []int{14}},
		{"caf", []int{14}},
	}
	for _, tt := range tests {
		q := store.ListQuery{AccountID: acctA, Subject: tt.subject, Limit: 100}
		if got, want := listIDs(t, s, q), idsOf(tt.want...); !equalIDs(got, want) {
			t.Errorf("ListEmails(subject=%q): got %v, want %v", tt.subject, got, want)
		}
	}
}

// testSince checks that Since keeps only emails received strictly after it.
func testSince(t *testing.T, s Store) {
	times := map[int]time.Time{
		1: time.UnixMilli(-5000).UTC(),
		2: time.UnixMilli(-1).UTC(),
		3: time.UnixMilli(0).UTC(),
		4: base,
		5: base, // ties with 4
		6: at(1),
		7: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var emails []*store.Email
	for n, tm := range times {
		recipient := "even@example.com"
		if n%2 == 1 {
			recipient = "odd@example.com"
		}
		emails = append(emails, newEmail(acctA, n, withReceivedAt(tm), withRecipient(recipient)))
	}
	createAll(t, s, emails)
	tests := []struct {
		name      string
		since     time.Time
		recipient string
		offset    int64
		want      []int
	}{
		{"zero is no filter", time.Time{}, "", 0, []int{7, 6, 5, 4, 3, 2, 1}},
		{"before all", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), "", 0, []int{7, 6, 5, 4, 3, 2, 1}},
		{"equal excludes", base, "", 0, []int{7, 6}},
		{"1ms before includes", at(-1), "", 0, []int{7, 6, 5, 4}},
		{"half a ms before includes", base.Add(-500 * time.Microsecond), "", 0, []int{7, 6, 5, 4}},
		{"half a ms after excludes", base.Add(500 * time.Microsecond), "", 0, []int{7, 6}},
		{"before 1970", time.UnixMilli(-2).UTC(), "", 0, []int{7, 6, 5, 4, 3, 2}},
		{"at -1ms", time.UnixMilli(-1).UTC(), "", 0, []int{7, 6, 5, 4, 3}},
		{"at the epoch", time.UnixMilli(0).UTC(), "", 0, []int{7, 6, 5, 4}},
		{"at the newest", times[7], "", 0, nil},
		{"after all", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "", 0, nil},
		{"other time zone", base.Add(-time.Millisecond).In(time.FixedZone("X", -7*3600)), "", 0, []int{7, 6, 5, 4}},
		{"with recipient", time.UnixMilli(-1).UTC(), "odd@example.com", 0, []int{7, 5, 3}},
		{"with recipient and offset", time.UnixMilli(-1).UTC(), "odd@example.com", 1, []int{5, 3}},
		{"with offset past the end", time.UnixMilli(-1).UTC(), "", 5, nil},
	}
	for _, tt := range tests {
		q := store.ListQuery{AccountID: acctA, Since: tt.since, Recipient: tt.recipient, Offset: tt.offset, Limit: 100}
		if got, want := listIDs(t, s, q), idsOf(tt.want...); !equalIDs(got, want) {
			t.Errorf("%s: ListEmails(%s):\ngot  %v\nwant %v", tt.name, describe(q), got, want)
		}
	}
}

// testLimitOffset checks paging, including offsets at and far past the end.
func testLimitOffset(t *testing.T, s Store) {
	var emails []*store.Email
	for n := 1; n <= 10; n++ {
		st := store.StatusReceived
		if n%3 == 0 {
			st = store.StatusArchived
		}
		emails = append(emails, newEmail(acctA, n, withStatus(st)))
	}
	createAll(t, s, emails)
	const maxOffset = 1<<53 - 1
	tests := []struct {
		limit  int
		offset int64
		status store.Status
		want   []int
	}{
		{1, 0, "", []int{10}},
		{3, 0, "", []int{10, 9, 8}},
		{3, 2, "", []int{8, 7, 6}},
		{100, 0, "", []int{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{100, 7, "", []int{3, 2, 1}},
		{5, 8, "", []int{2, 1}},
		{5, 9, "", []int{1}},
		{5, 10, "", nil},
		{5, 11, "", nil},
		{100, maxOffset, "", nil},
		{1, maxOffset - 1, "", nil},
		{2, 0, store.StatusArchived, []int{9, 6}},
		{2, 2, store.StatusArchived, []int{3}},
		{2, 3, store.StatusArchived, nil},
		{100, maxOffset, store.StatusArchived, nil},
		{1, 6, store.StatusReceived, []int{1}},
		{1, 7, store.StatusReceived, nil},
	}
	for _, tt := range tests {
		q := store.ListQuery{AccountID: acctA, Status: tt.status, Limit: tt.limit, Offset: tt.offset}
		got, err := s.ListEmails(context.Background(), q)
		if err != nil {
			t.Errorf("ListEmails(%s): %v", describe(q), err)
			continue
		}
		if got, want := ids(got), idsOf(tt.want...); !equalIDs(got, want) {
			t.Errorf("ListEmails(%s): got %v, want %v", describe(q), got, want)
		}
	}
	q := store.ListQuery{AccountID: acctA, Subject: "email", Limit: 100, Offset: maxOffset}
	if got := listIDs(t, s, q); len(got) != 0 {
		t.Errorf("ListEmails(%s): got %v, want none", describe(q), got)
	}
}

// testPagination pages through 250 emails, several received in each
// millisecond, and checks that every one is seen once and in order.
func testPagination(t *testing.T, s Store) {
	const total = 250
	emails := make([]*store.Email, total)
	for i, n := range rand.Perm(total) {
		// Three emails per millisecond, ids unrelated to time order.
		emails[i] = newEmail(acctA, n, withReceivedAt(at(int64(i/3))))
	}
	createAll(t, s, emails)
	sorted := slices.Clone(emails)
	sortListOrder(sorted)
	want := ids(sorted)
	for _, limit := range []int{1, 7, 25, 100} {
		var got []string
		for offset := int64(0); ; offset += int64(limit) {
			page := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: limit, Offset: offset})
			if len(page) > limit {
				t.Fatalf("limit %d offset %d: got %d emails", limit, offset, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
		}
		if !equalIDs(got, want) {
			t.Errorf("limit %d: pages joined differ from the list order: got %d ids, want %d\ngot  %v\nwant %v",
				limit, len(got), len(want), got, want)
		}
	}
}

// testPaginationWhileInserting pages through a stable set of emails while
// other goroutines insert emails that sort after the stable set (older) or
// that the query does not select (newer, with another recipient, status and
// subject). Pages of the stable set must come back with no gap or repeat.
func testPaginationWhileInserting(t *testing.T, s Store) {
	const (
		stable  = 60
		writers = 4
		each    = 40
	)
	var emails []*store.Email
	for n := range stable {
		emails = append(emails, newEmail(acctA, n, withRecipient("stable@example.com"), withSubject(fmt.Sprintf("stable %d", n))))
	}
	createAll(t, s, emails)
	sortListOrder(emails)
	want := ids(emails)

	queries := []store.ListQuery{
		{AccountID: acctA, Recipient: "stable@example.com"},
		{AccountID: acctA, Status: store.StatusReceived},
		{AccountID: acctA, Subject: "STABLE"},
		{AccountID: acctA, Sender: "sender@example.com", Status: store.StatusReceived},
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 1000 + w*each + i
				var e *store.Email
				if i%2 == 0 {
					// Older than every stable email: sorts after them.
					e = newEmail(acctA, n, withRecipient("stable@example.com"), withSubject("noise"), withReceivedAt(at(-int64(n)*1000)))
				} else {
					// Newer, but not selected by the queries.
					e = newEmail(acctA, n, withRecipient("other@example.com"), withSender("other@example.com"),
						withStatus(store.StatusArchived), withSubject("noise"), withReceivedAt(at(int64(n)*1000)))
				}
				if err := s.CreateEmails(context.Background(), newBody(n), []*store.Email{e}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	// Page through at least once after the writers finish, and as often as
	// possible while they run.
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for _, q := range queries {
			var got []string
			for q.Offset = 0; len(got) < stable; q.Offset += 7 {
				q.Limit = min(7, stable-len(got))
				page := listIDs(t, s, q)
				if len(page) == 0 {
					break
				}
				got = append(got, page...)
			}
			if !equalIDs(got, want) {
				t.Fatalf("paging ListEmails(%s) while inserting:\ngot  %v\nwant %v", describe(q), got, want)
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("CreateEmails: %v", err)
	}
	total := len(list(t, s, store.ListQuery{AccountID: acctA, Limit: 100, Offset: 0})) +
		len(list(t, s, store.ListQuery{AccountID: acctA, Limit: 100, Offset: 100})) +
		len(list(t, s, store.ListQuery{AccountID: acctA, Limit: 100, Offset: 200}))
	if want := stable + writers*each; total != want {
		t.Errorf("after inserting: %d emails listed, want %d", total, want)
	}
}
