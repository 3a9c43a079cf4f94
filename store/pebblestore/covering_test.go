package pebblestore

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/mailsink/mailsink/store"
)

// coveringEmails creates n emails of three recipients and two senders in
// an account, every third with notes too long for its index entries to
// hold its record (maxCovered), some with a record of exactly maxCovered
// bytes, and returns them.
func coveringEmails(t *testing.T, s *Store, accountID string, n int) []*store.Email {
	t.Helper()
	base := time.UnixMilli(1_700_000_000_000).UTC()
	var out []*store.Email
	for i := range n {
		at := base.Add(time.Duration(i/2) * time.Second) // pairs share a time
		subj := fmt.Sprintf("subject %d", i)
		e := &store.Email{
			ID: store.NewID(), AccountID: accountID, Sender: fmt.Sprintf("s%d@example.com", i%2),
			Recipient: fmt.Sprintf("r%d@example.com", i%3), Subject: &subj, Status: store.StatusReceived,
			Labels: []string{"l" + fmt.Sprint(i%4)}, RawSize: int64(100 + i), ReceivedAt: at, CreatedAt: at, UpdatedAt: at,
		}
		switch {
		case i%3 == 0:
			notes := strings.Repeat("n", maxCovered)
			e.Notes = &notes
		case i%9 == 1:
			// A record of exactly maxCovered bytes: its entries hold it.
			notes := ""
			e.Notes = &notes
			// The notes' length takes a byte more than the empty one's.
			notes = strings.Repeat("n", maxCovered-len(encodeEmail(&emailRecord{Email: *e, BodyID: e.ID}))-1)
			e.Notes = &notes
			if n := len(encodeEmail(&emailRecord{Email: *e, BodyID: e.ID})); n != maxCovered {
				t.Fatalf("a record of %d bytes, want %d", n, maxCovered)
			}
		}
		if err := s.CreateEmails(context.Background(), &store.Body{Raw: []byte("Subject: x\r\n\r\nhi\r\n")}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// listsMatchGets checks each query, with the account's emails ids: its list
// (at once, paged two at a time with Before, with an Offset and with a
// Since) and its count are what looking every email up and filtering gives,
// in list order.
func listsMatchGets(t *testing.T, s *Store, ids []string, queries []store.ListQuery) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		var want []*store.Email
		m := store.NewMatcher(q)
		for _, id := range ids {
			e, err := s.GetEmail(ctx, q.AccountID, id)
			if err != nil {
				t.Fatal(err)
			}
			if m.Match(e) {
				want = append(want, e)
			}
		}
		slices.SortFunc(want, func(a, b *store.Email) int {
			if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		if len(want) < 4 {
			t.Fatalf("%+v matches %d emails: too few to test", q, len(want))
		}
		q.Limit = 1000
		same(t, s, q, want, "at once")
		q.Offset = 3
		same(t, s, q, want[3:], "offset 3")
		q.Offset = 0
		var paged []*store.Email
		for q.Limit, q.Before = 2, ""; ; {
			page, err := s.ListEmails(ctx, q)
			if err != nil {
				t.Fatalf("ListEmails(%+v): %v", q, err)
			}
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			q.Before = page[len(page)-1].ID
		}
		q.Limit, q.Before = 1000, ""
		if !reflect.DeepEqual(paged, want) {
			t.Errorf("%+v paged: %d emails, want %d, or others", q, len(paged), len(want))
		}
		if n, err := s.CountEmails(ctx, q); err != nil || n != int64(len(want)) {
			t.Errorf("CountEmails(%+v) = %d, %v; want %d", q, n, err, len(want))
		}
		since := want[len(want)/2].ReceivedAt
		q.Since = since
		var after []*store.Email
		for _, e := range want {
			if e.ReceivedAt.After(since) {
				after = append(after, e)
			}
		}
		same(t, s, q, after, "since")
	}
}

// same checks that ListEmails(q) lists want.
func same(t *testing.T, s *Store, q store.ListQuery, want []*store.Email, what string) {
	t.Helper()
	got, err := s.ListEmails(context.Background(), q)
	if err != nil {
		t.Fatalf("ListEmails(%+v): %v", q, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%+v %s: %d emails, want %d", q, what, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%+v %s: email %d is\n%+v\nwant\n%+v", q, what, i, *got[i], *want[i])
		}
	}
}

func idsOf(emails []*store.Email) []string {
	out := make([]string, len(emails))
	for i, e := range emails {
		out[i] = e.ID
	}
	return out
}

// coveringQueries are lists of every index and filter; with updated, a
// list of status processed too, which only updates make.
func coveringQueries(accountID string, updated bool) []store.ListQuery {
	q := []store.ListQuery{
		{AccountID: accountID},
		{AccountID: accountID, Recipient: "r1@example.com"},
		{AccountID: accountID, Sender: "s0@example.com"},
		{AccountID: accountID, Status: store.StatusReceived, Recipient: "r0@example.com"},
		{AccountID: accountID, Label: "l1"},
		{AccountID: accountID, Subject: "subject 2", Recipient: "r2@example.com"},
	}
	if updated {
		q = append(q, store.ListQuery{AccountID: accountID, Status: store.StatusProcessed},
			store.ListQuery{AccountID: accountID, Status: store.StatusProcessed, Sender: "s1@example.com"})
	}
	return q
}

// TestIndexEntriesHoldRecords: a list reads its emails from the index
// entries' copies of their records (a long record's entries hold none),
// and after updates of every field the copies are those of the records:
// lists, pages and lookups agree.
func TestIndexEntriesHoldRecords(t *testing.T) {
	t.Parallel()
	s := openTemp(t, filepath.Join(t.TempDir(), "store"))
	ctx := context.Background()
	// More than a page (100 emails) in every list of the account.
	emails := coveringEmails(t, s, "acc", 330)

	covered, empty := indexValues(t, s, "acc")
	if covered != 4*220 || empty != 4*110 {
		t.Errorf("index entries: %d with a record, %d empty; want 880 and 440", covered, empty)
	}
	listsMatchGets(t, s, idsOf(emails), coveringQueries("acc", false))

	for i, e := range emails {
		u := store.Update{UpdatedAt: e.UpdatedAt.Add(time.Hour)}
		switch i % 5 {
		case 0:
			u.Status = ptr(store.StatusProcessed)
		case 1:
			u.Labels = &[]string{"l1", "changed"}
		case 2:
			u.Read = ptr(true)
		case 3:
			u.Subject = &store.Nullable{Value: ptr("subject 1 changed")}
		case 4:
			// A short record made long, and back.
			u.Notes = &store.Nullable{Value: ptr(strings.Repeat("x", maxCovered))}
			if i%3 == 0 {
				u.Notes = &store.Nullable{}
			}
		}
		if _, err := s.UpdateEmail(ctx, "acc", e.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	listsMatchGets(t, s, idsOf(emails), coveringQueries("acc", true))
}

// indexValues counts the account's index entries that hold a record and
// those that are empty, checking that each record is that of its email.
func indexValues(t *testing.T, s *Store, accountID string) (covered, empty int) {
	t.Helper()
	prefix := accountKey(accountID, partIndex, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		v := it.Value()
		if len(v) == 0 {
			empty++
			continue
		}
		covered++
		k := it.Key()
		id := string(k[len(k)-len(store.NewID()):]) // every id here is NewID's
		rec, closer, err := s.db.Get(emailKey(accountID, id))
		if err != nil {
			t.Fatalf("index entry %x: %v", k, err)
		}
		if string(rec) != string(v) {
			t.Errorf("index entry of %s holds %x, its record is %x", id, v, rec)
		}
		closer.Close()
	}
	return covered, empty
}

// TestSchemaVersion1 opens a store as schema version 1 left it (index
// entries without records): it lists everything as before, raises the
// version to 2, and the entries of emails created or updated since hold
// their records. A version it does not know is refused.
func TestSchemaVersion1(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	s := openTemp(t, dir)
	emails := coveringEmails(t, s, "acc", 60)
	// What version 1 wrote: empty entries, and its version.
	b := s.db.NewBatch()
	prefix := accountKey("acc", partIndex, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		if err := b.Set(slices.Clone(it.Key()), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Set([]byte{tagVersion}, []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	if v, closer, err := s.db.Get([]byte{tagVersion}); err != nil || string(v) != schemaVersion {
		t.Fatalf("version after open: %q, %v; want %s", v, err, schemaVersion)
	} else {
		closer.Close()
	}
	if covered, empty := indexValues(t, s, "acc"); covered != 0 || empty != 240 {
		t.Fatalf("index entries: %d with a record, %d empty; want 0 and 240", covered, empty)
	}
	listsMatchGets(t, s, idsOf(emails), coveringQueries("acc", false))

	// Updated and new emails' entries hold their records; lists of
	// both kinds of entries agree with lookups.
	ctx := context.Background()
	for _, e := range emails[1:40] {
		if _, err := s.UpdateEmail(ctx, "acc", e.ID, store.Update{Status: ptr(store.StatusProcessed), Read: ptr(true)}); err != nil {
			t.Fatal(err)
		}
	}
	emails = append(emails, coveringEmails(t, s, "acc", 30)...)
	if covered, _ := indexValues(t, s, "acc"); covered == 0 {
		t.Error("no index entry holds a record after updates and creates")
	}
	listsMatchGets(t, s, idsOf(emails), coveringQueries("acc", true))

	// A version this build does not know.
	if err := s.db.Set([]byte{tagVersion}, []byte("3"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir)
	if err == nil {
		s3.Close()
	}
	if err == nil || !strings.Contains(err.Error(), `schema version "3"`) || !strings.Contains(err.Error(), "newer mailsink") {
		t.Errorf("Open of version 3: %v; want a refusal naming the version", err)
	}
}
