package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// testChecks: an email's check results are kept by name, seen only through
// the email's own account, replaced by a later put, and deleted with the
// email; a result for an email that does not exist (any more) is refused.
func testChecks(t *testing.T, s Store) {
	ctx := context.Background()
	e := newEmail(acctA, 1)
	// Two recipients of one message share a body but not their results.
	twin := newEmail(acctA, 2)
	if err := s.CreateEmails(ctx, newBody(1), []*store.Email{e, twin}); err != nil {
		t.Fatal(err)
	}
	get := func(accountID, id, name string) ([]byte, error) {
		t.Helper()
		return s.GetCheck(ctx, accountID, id, name)
	}
	_, err := get(acctA, e.ID, "html")
	wantCode(t, err, store.NotFound, "GetCheck before any put")

	html, links := []byte(`{"warnings":[]}`), []byte(`{"items":[{"url":"https://a.example/"}]}`)
	if err := s.PutCheck(ctx, acctA, e.ID, "html", html); err != nil {
		t.Fatalf("PutCheck(html): %v", err)
	}
	if err := s.PutCheck(ctx, acctA, e.ID, "links", []byte(`{"items":[]}`)); err != nil {
		t.Fatalf("PutCheck(links): %v", err)
	}
	if err := s.PutCheck(ctx, acctA, e.ID, "links", links); err != nil {
		t.Fatalf("PutCheck(links) again: %v", err)
	}
	for _, tc := range []struct {
		name string
		want []byte
	}{{"html", html}, {"links", links}} {
		got, err := get(acctA, e.ID, tc.name)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("GetCheck(%s) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	_, err = get(acctA, e.ID, "spam")
	wantCode(t, err, store.NotFound, "GetCheck of a name never put")
	_, err = get(acctB, e.ID, "html")
	wantCode(t, err, store.NotFound, "GetCheck from another account")
	_, err = get(acctA, twin.ID, "html")
	wantCode(t, err, store.NotFound, "GetCheck of the other recipient's email")
	wantCode(t, s.PutCheck(ctx, acctB, e.ID, "html", html), store.NotFound, "PutCheck for another account's email")
	wantCode(t, s.PutCheck(ctx, acctA, id(99), "html", html), store.NotFound, "PutCheck for an email that does not exist")
	wantCode(t, s.PutCheck(ctx, acctA, e.ID, "big", make([]byte, store.MaxCheckBytes+1)), store.TooLarge, "PutCheck over MaxCheckBytes")

	if err := s.PutCheck(ctx, acctA, twin.ID, "html", html); err != nil {
		t.Fatal(err)
	}
	// In one call: what each email has, nothing of another account's or of
	// an email that does not exist.
	got, err := s.GetChecks(ctx, acctA, []string{e.ID, twin.ID, id(99)}, "html")
	if err != nil || len(got) != 2 || !bytes.Equal(got[e.ID], html) || !bytes.Equal(got[twin.ID], html) {
		t.Errorf("GetChecks(html) = %q, %v; want both emails' results", got, err)
	}
	if got, err := s.GetChecks(ctx, acctB, []string{e.ID}, "html"); err != nil || len(got) != 0 {
		t.Errorf("GetChecks from another account = %q, %v; want nothing", got, err)
	}
	if got, err := s.GetChecks(ctx, acctA, []string{e.ID}, "spam"); err != nil || len(got) != 0 {
		t.Errorf("GetChecks of a name never put = %q, %v; want nothing", got, err)
	}
	_, err = s.GetChecks(ctx, acctA, make([]string, store.MaxCheckBatch+1), "html")
	wantCode(t, err, store.Invalid, "GetChecks of more than MaxCheckBatch ids")
	if err := s.DeleteEmail(ctx, acctA, e.ID); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"html", "links"} {
		_, err := get(acctA, e.ID, name)
		wantCode(t, err, store.NotFound, "GetCheck("+name+") after the email was deleted")
	}
	wantCode(t, s.PutCheck(ctx, acctA, e.ID, "html", html), store.NotFound, "PutCheck after the email was deleted")
	if got, err := get(acctA, twin.ID, "html"); err != nil || !bytes.Equal(got, html) {
		t.Errorf("the twin's result after the other recipient's email was deleted = %q, %v", got, err)
	}
}

// testPutChecks: one PutChecks stores each result like a PutCheck of its
// own, skips the ids of emails that do not exist (never did, were deleted,
// or are another account's) without keeping anything for them, and holds
// to the limits of a batch.
func testPutChecks(t *testing.T, s Store) {
	ctx := context.Background()
	one, two, gone, other := newEmail(acctA, 1), newEmail(acctA, 2), newEmail(acctA, 3), newEmail(acctB, 4)
	create(t, s, one, two, gone, other)
	if err := s.PutCheck(ctx, acctA, two.ID, "digest", []byte("old")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCheck(ctx, acctB, other.ID, "digest", []byte("b's")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEmail(ctx, acctA, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.PutChecks(ctx, acctA, "digest", nil); err != nil {
		t.Errorf("PutChecks of nothing: %v", err)
	}
	err := s.PutChecks(ctx, acctA, "digest", map[string][]byte{
		one.ID:   []byte("one"),
		two.ID:   []byte("two"),
		gone.ID:  []byte("gone"),
		id(99):   []byte("never"),
		other.ID: []byte("a's"),
	})
	if err != nil {
		t.Fatalf("PutChecks: %v", err)
	}
	got, err := s.GetChecks(ctx, acctA, []string{one.ID, two.ID, gone.ID, id(99), other.ID}, "digest")
	want := map[string]string{one.ID: "one", two.ID: "two"}
	if err != nil || len(got) != len(want) {
		t.Errorf("GetChecks after PutChecks = %q, %v; want %q", got, err, want)
	}
	for eid, w := range want {
		if v, err := s.GetCheck(ctx, acctA, eid, "digest"); err != nil || string(v) != w {
			t.Errorf("GetCheck(%s) after PutChecks = %q, %v; want %q", eid, v, err, w)
		}
	}
	for _, eid := range []string{gone.ID, id(99), other.ID} {
		_, err := s.GetCheck(ctx, acctA, eid, "digest")
		wantCode(t, err, store.NotFound, "GetCheck of an id PutChecks skipped")
	}
	if v, err := s.GetCheck(ctx, acctB, other.ID, "digest"); err != nil || string(v) != "b's" {
		t.Errorf("the other account's result after PutChecks = %q, %v; want it untouched", v, err)
	}
	if _, err := s.GetCheck(ctx, acctA, one.ID, "html"); !store.IsCode(err, store.NotFound) {
		t.Errorf("GetCheck of another name after PutChecks: %v, want NotFound", err)
	}
	// An email created again with a deleted one's id starts without the
	// results of the put that skipped it.
	again := newEmail(acctA, 3)
	create(t, s, again)
	_, err = s.GetCheck(ctx, acctA, again.ID, "digest")
	wantCode(t, err, store.NotFound, "GetCheck of an email created again after PutChecks skipped its id")

	// Past the limits nothing is stored.
	wantCode(t, s.PutChecks(ctx, acctA, "big", map[string][]byte{one.ID: []byte("ok"), two.ID: make([]byte, store.MaxCheckBytes+1)}),
		store.TooLarge, "PutChecks with a result over MaxCheckBytes")
	many := make(map[string][]byte, store.MaxCheckBatch+1)
	for i := range store.MaxCheckBatch + 1 {
		many[id(1000+i)] = []byte("x")
	}
	many[one.ID] = []byte("ok")
	wantCode(t, s.PutChecks(ctx, acctA, "big", many), store.Invalid, "PutChecks of more than MaxCheckBatch results")
	if got, err := s.GetChecks(ctx, acctA, []string{one.ID, two.ID}, "big"); err != nil || len(got) != 0 {
		t.Errorf("results of refused PutChecks = %q, %v; want none", got, err)
	}

	// A result put by the batch is deleted with its email.
	if err := s.DeleteEmail(ctx, acctA, one.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetCheck(ctx, acctA, one.ID, "digest")
	wantCode(t, err, store.NotFound, "GetCheck after the email of a PutChecks result was deleted")
}
