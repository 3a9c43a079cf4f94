package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// TestGroupCommitIsolatesFailures runs many creates at once, every fourth of
// them a conflict with an email already stored: each conflict fails alone,
// every other create is stored once, and the account's totals count exactly
// the stored ones. Writes that overlap share commits, so the conflicts land
// in batches with good writes.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"), WithMaxBatchSize(16))
	existing := testEmail(fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", 0), "x@example.com", 1000)
	body := func() *store.Body {
		return &store.Body{Raw: []byte("raw"), Given: &store.Parts{Headers: map[string]string{}}}
	}
	if err := s.CreateEmails(ctx, body(), []*store.Email{existing}); err != nil {
		t.Fatal(err)
	}

	const writers = 200
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i+1)
			if i%4 == 0 {
				id = existing.ID
			}
			errs[i] = s.CreateEmails(ctx, body(), []*store.Email{testEmail(id, "x@example.com", int64(2000+i))})
		}()
	}
	wg.Wait()

	want := int64(1)
	for i, err := range errs {
		switch {
		case i%4 == 0 && store.CodeOf(err) != store.Conflict:
			t.Errorf("create %d (a duplicate): err %v, want Conflict", i, err)
		case i%4 != 0 && err != nil:
			t.Errorf("create %d: %v", i, err)
		case i%4 != 0:
			want++
		}
	}
	got, err := s.ListEmails(ctx, store.ListQuery{AccountID: "acct", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != want {
		t.Errorf("listed %d emails, want %d", len(got), want)
	}
	emails, _, err := s.AccountStats(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	if emails != want {
		t.Errorf("stats count %d emails, want %d", emails, want)
	}
}

// TestWriteAfterClose checks that a write after Close fails as Unavailable
// instead of hanging, and that Close waits for writes under way.
func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "mailsink.db"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("0190b6d2-7c3e-7a1b-8c2d-%012d", i+1)
			err := s.CreateEmails(ctx, &store.Body{Raw: []byte("r")}, []*store.Email{testEmail(id, "x@example.com", 1000)})
			if err != nil && store.CodeOf(err) != store.Unavailable {
				t.Errorf("create during Close: %v, want success or Unavailable", err)
			}
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	err = s.CreateEmails(ctx, &store.Body{Raw: []byte("r")}, []*store.Email{testEmail("0190b6d2-7c3e-7a1b-8c2d-999999999999", "x@example.com", 1000)})
	if store.CodeOf(err) != store.Unavailable {
		t.Errorf("create after Close: %v, want Unavailable", err)
	}
}

// A write that panics fails alone with an error; the writes sharing its
// batch commit, and later writes still run.
func TestPanickingWriteFailsAlone(t *testing.T) {
	t.Parallel()
	s := openTemp(t, filepath.Join(t.TempDir(), "mailsink.db"))
	errs := make([]error, 3)
	calls := []*writeCall{
		{fn: func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("a"), []byte("1")) }},
		{fn: func(*bolt.Tx) error { panic("boom") }},
		{fn: func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("b"), []byte("2")) }},
	}
	s.commits.commit(calls)
	for i, c := range calls {
		errs[i] = c.err
	}
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("errors %v; want only the panicking write's", errs)
	}
	if err := s.commits.write(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("c"), []byte("3")) }); err != nil {
		t.Fatalf("a write after the panic: %v", err)
	}
	s.db.View(func(tx *bolt.Tx) error {
		for _, k := range []string{"a", "b", "c"} {
			if tx.Bucket(bucketMeta).Get([]byte(k)) == nil {
				t.Errorf("key %q was not committed", k)
			}
		}
		return nil
	})
}
