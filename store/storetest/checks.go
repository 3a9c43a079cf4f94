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
