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

// coveringEmails creates n emails of two recipients and two senders in a
// new account, every third with notes too long for its index entries to
// hold its record (maxCovered), and returns them.
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
		if i%3 == 0 {
			notes := strings.Repeat("n", maxCovered)
			e.Notes = &notes
		}
		if err := s.CreateEmails(context.Background(), &store.Body{Raw: []byte("Subject: x\r\n\r\nhi\r\n")}, []*store.Email{e}); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// listsMatchGets checks that every list of the queries, paged two at a
// time, lists what looking each email up returns, in the order of listing
// everything at once.
func listsMatchGets(t *testing.T, s *Store, queries []store.ListQuery) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		q.Limit = 1000
		all, err := s.ListEmails(ctx, q)
		if err != nil {
			t.Fatalf("ListEmails(%+v): %v", q, err)
		}
		if len(all) == 0 {
			t.Fatalf("ListEmails(%+v): nothing", q)
		}
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
		if len(paged) != len(all) {
			t.Fatalf("%+v: %d emails paged, %d at once", q, len(paged), len(all))
		}
		for i, e := range all {
			got, err := s.GetEmail(ctx, e.AccountID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e, got) {
				t.Errorf("%+v: listed\n%+v\nGetEmail\n%+v", q, *e, *got)
			}
			if !reflect.DeepEqual(paged[i], got) {
				t.Errorf("%+v: paged %d is %+v, want %+v", q, i, *paged[i], *got)
			}
		}
	}
}

func coveringQueries(accountID string) []store.ListQuery {
	return []store.ListQuery{
		{AccountID: accountID},
		{AccountID: accountID, Recipient: "r1@example.com"},
		{AccountID: accountID, Sender: "s0@example.com"},
		{AccountID: accountID, Status: store.StatusProcessed},
		{AccountID: accountID, Status: store.StatusReceived, Recipient: "r0@example.com"},
		{AccountID: accountID, Label: "l1"},
		{AccountID: accountID, Subject: "subject 1", Recipient: "r2@example.com"},
	}
}

// TestIndexEntriesHoldRecords: a list reads its emails from the index
// entries' copies of their records (a long record's entries hold none),
// and after updates of every field the copies are those of the records:
// lists, pages and lookups agree.
func TestIndexEntriesHoldRecords(t *testing.T) {
	t.Parallel()
	s := openTemp(t, filepath.Join(t.TempDir(), "store"))
	ctx := context.Background()
	emails := coveringEmails(t, s, "acc", 30)

	covered, empty := indexValues(t, s, "acc")
	if covered != 4*20 || empty != 4*10 {
		t.Errorf("index entries: %d with a record, %d empty; want 80 and 40", covered, empty)
	}

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
	listsMatchGets(t, s, coveringQueries("acc"))
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
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	emails := coveringEmails(t, s, "acc", 20)
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
	if covered, empty := indexValues(t, s, "acc"); covered != 0 || empty != 80 {
		t.Fatalf("index entries: %d with a record, %d empty; want 0 and 80", covered, empty)
	}
	listsMatchGets(t, s, coveringQueries("acc")[:3])

	// Updated and new emails' entries hold their records; lists of
	// both kinds of entries agree with lookups.
	ctx := context.Background()
	for _, e := range emails[1:6] {
		if _, err := s.UpdateEmail(ctx, "acc", e.ID, store.Update{Status: ptr(store.StatusProcessed), Read: ptr(true)}); err != nil {
			t.Fatal(err)
		}
	}
	coveringEmails(t, s, "acc", 6)
	if covered, _ := indexValues(t, s, "acc"); covered == 0 {
		t.Error("no index entry holds a record after updates and creates")
	}
	listsMatchGets(t, s, coveringQueries("acc"))

	// A version this build does not know.
	if err := s.db.Set([]byte{tagVersion}, []byte("3"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	if err == nil || !strings.Contains(err.Error(), `schema version "3"`) || !strings.Contains(err.Error(), "newer mailsink") {
		t.Errorf("Open of version 3: %v; want a refusal naming the version", err)
	}
}
