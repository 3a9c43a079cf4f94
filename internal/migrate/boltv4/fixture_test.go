package boltv4

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mailsink/mailsink/store"
)

// The file testdata/schema2.db was written by the store as it was before
// compressed bodies (schema version 2: email format 1, body formats 2 and
// 3, a reference count for every body), at commit 592685a, by
//
//	MAILSINK_WRITE_FIXTURE=1 go test -run TestWriteFixture ./internal/migrate/boltv4
//
// TestReadFixture checks that every later build reads it: emails, bodies,
// stats, the event sequence, webhooks and idempotency keys.
const fixturePath = "testdata/schema2.db"

const (
	fixtureAccount = "6f1d5a8e-3c1b-4f7e-9a2d-5b8c0e4d7f10"
	fixtureOther   = "0b5e3c1d-2a4f-5e6d-8c7b-9a0f1e2d3c4b"
)

// fixtureEmails returns the emails of the fixture, as they are after
// fixtureWrite's updates and deletes; the first three share body 0 and the
// second was deleted.
func fixtureEmails() []*store.Email {
	at := func(ms int64) time.Time { return time.UnixMilli(1_767_225_600_000 + ms).UTC() }
	mk := func(acc, id, rcpt string, ms int64, raw int64) *store.Email {
		return &store.Email{
			ID: id, AccountID: acc, Sender: "Sender@Example.com", Recipient: rcpt,
			MessageID: ptr("<m" + id[len(id)-2:] + "@example.com>"), Subject: ptr("subject " + id[len(id)-2:]),
			Status: store.StatusReceived, Labels: []string{}, RawSize: raw,
			ReceivedAt: at(ms), CreatedAt: at(ms), UpdatedAt: at(ms),
		}
	}
	raws := fixtureBodies()
	return []*store.Email{
		mk(fixtureAccount, "0190b6d2-7c3e-7a1b-8c2d-000000000001", "a@example.com", 1, int64(len(raws[0].Raw))),
		mk(fixtureAccount, "0190b6d2-7c3e-7a1b-8c2d-000000000002", "b@example.com", 1, int64(len(raws[0].Raw))),
		mk(fixtureAccount, "0190b6d2-7c3e-7a1b-8c2d-000000000003", "c@example.com", 1, int64(len(raws[0].Raw))),
		mk(fixtureAccount, "0190b6d2-7c3e-7a1b-8c2d-000000000004", "a@example.com", 2, int64(len(raws[1].Raw))),
		mk(fixtureOther, "0190b6d2-7c3e-7a1b-8c2d-000000000005", "x@example.org", 3, int64(len(raws[2].Raw))),
	}
}

// fixtureBodies returns the three bodies: parsed with a transcript, unparsed
// with a transcript, and parsed without one.
func fixtureBodies() []*store.Body {
	tr := &store.Transcript{
		ClientAddress: "127.0.0.1:40001", Helo: "client.example.com", TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
		AuthMechanism: "PLAIN", AuthIdentity: "user",
		Mail: store.TranscriptCommand{Address: "sender@example.com", Params: []string{"SIZE=100"}, Reply: "250 2.0.0 Roger"},
		Rcpts: []store.TranscriptCommand{
			{Address: "a@example.com", Params: []string{}, Reply: "250 2.0.0 ok"},
			{Address: "b@example.com", Params: []string{"NOTIFY=NEVER"}, Reply: "250 2.0.0 ok"},
		},
		RcptsOmitted: 2,
		Data:         "250 2.0.0 OK: queued",
	}
	long := []byte("Subject: subject 04\r\n\r\n")
	for i := range 300 {
		long = append(long, "line of text that compresses well, number "...)
		long = append(long, byte('0'+i%10), '\r', '\n')
	}
	return []*store.Body{
		{
			Raw: []byte("Subject: subject 01\r\nContent-Type: text/html\r\n\r\n<p>hi \xff</p>\r\n"),
			Given: &store.Parts{Text: ptr("hi"), HTML: ptr("<p>hi</p>"), Headers: map[string]string{"subject": "subject 01", "content-type": "text/html"},
				Attachments: []store.Attachment{{ContentType: ptr("application/pdf"), Filename: ptr("a.pdf"), Size: 12}}},
			Transcript: tr,
		},
		{Raw: long, Transcript: tr},
		{Raw: []byte("Subject: subject 05\r\n\r\nplain\r\n"), Given: &store.Parts{Text: ptr("plain\r\n"), Headers: map[string]string{"subject": "subject 05"}, Attachments: []store.Attachment{}}},
	}
}

func fixtureWebhook() *store.Webhook {
	return &store.Webhook{
		ID: "0190b6d2-7c3e-7a1b-8c2d-0000000000aa", AccountID: fixtureAccount, URL: "https://hooks.example.com/x",
		Events: []store.EventType{store.EmailCreated}, Secret: "whsec_c2VjcmV0",
		CreatedAt: time.UnixMilli(1_767_225_600_000).UTC(),
	}
}

// TestWriteFixture writes testdata/schema2.db; see fixturePath.
func TestWriteFixture(t *testing.T) {
	if os.Getenv("MAILSINK_WRITE_FIXTURE") == "" {
		t.Skip("MAILSINK_WRITE_FIXTURE is not set")
	}
	ctx := context.Background()
	_ = os.Remove(fixturePath)
	s, err := Open(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	emails, bodies := fixtureEmails(), fixtureBodies()
	if err := s.CreateEmails(ctx, bodies[0], emails[0:3]); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEmails(ctx, bodies[1], emails[3:4]); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateEmails(ctx, bodies[2], emails[4:5]); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEmail(ctx, fixtureAccount, emails[1].ID); err != nil {
		t.Fatal(err)
	}
	archived := store.StatusArchived
	if _, err := s.UpdateEmail(ctx, fixtureAccount, emails[2].ID, store.Update{
		Status: &archived, Labels: &[]string{"l1", "l2"}, Notes: &store.Nullable{Value: ptr("note")},
		UpdatedAt: time.UnixMilli(1_767_225_700_000),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWebhook(ctx, fixtureWebhook(), 10); err != nil {
		t.Fatal(err)
	}
	r := store.Reservation{Digest: "d1", IDs: []string{emails[0].ID}}
	if _, _, err := s.Reserve(ctx, fixtureAccount, "key-1", r, 100*365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, fixtureAccount, "key-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadFixture opens a copy of a file written by the schema 2 store
// and checks that everything in it reads back, before and after Open
// upgraded it.
func TestReadFixture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mailsink.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		want, bodies := fixtureEmails(), fixtureBodies()
		want[2].Status, want[2].Labels, want[2].Notes = store.StatusArchived, []string{"l1", "l2"}, ptr("note")
		want[2].UpdatedAt = time.UnixMilli(1_767_225_700_000).UTC()
		wantBody := map[string]*store.Body{want[0].ID: bodies[0], want[2].ID: bodies[0], want[3].ID: bodies[1], want[4].ID: bodies[2]}
		for i, e := range want {
			got, err := s.GetEmail(ctx, e.AccountID, e.ID)
			if i == 1 {
				if !store.IsCode(err, store.NotFound) {
					t.Errorf("deleted email %s: got %v, %v", e.ID, got, err)
				}
				continue
			}
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Errorf("GetEmail(%s) = %+v, %v; want %+v", e.ID, got, err, e)
			}
			b, err := s.GetBody(ctx, e.AccountID, e.ID)
			if err != nil || !reflect.DeepEqual(b, wantBody[e.ID]) {
				t.Errorf("GetBody(%s) = %+v, %v; want %+v", e.ID, b, err, wantBody[e.ID])
			}
		}
		list, err := s.ListEmails(ctx, store.ListQuery{AccountID: fixtureAccount, Recipient: "A@example.com", Limit: 10})
		if err != nil || len(list) != 2 || list[0].ID != want[3].ID || list[1].ID != want[0].ID {
			t.Errorf("list by recipient: %v, %v", list, err)
		}
		list, err = s.ListEmails(ctx, store.ListQuery{AccountID: fixtureAccount, Status: store.StatusArchived, Limit: 10})
		if err != nil || len(list) != 1 || list[0].ID != want[2].ID {
			t.Errorf("list by status: %v, %v", list, err)
		}
		n, raw, err := s.AccountStats(ctx, fixtureAccount)
		if wantRaw := want[0].RawSize + want[2].RawSize + want[3].RawSize; err != nil || n != 3 || raw != wantRaw {
			t.Errorf("AccountStats = %d, %d, %v; want 3, %d", n, raw, err, wantRaw)
		}
		w, err := s.GetWebhook(ctx, fixtureAccount, fixtureWebhook().ID)
		if err != nil || !reflect.DeepEqual(w, fixtureWebhook()) {
			t.Errorf("GetWebhook = %+v, %v; want %+v", w, err, fixtureWebhook())
		}
		r, fresh, err := s.Reserve(ctx, fixtureAccount, "key-1", store.Reservation{Digest: "other"}, time.Hour)
		if err != nil || fresh || !r.Stored || r.Digest != "d1" || !reflect.DeepEqual(r.IDs, []string{want[0].ID}) {
			t.Errorf("Reserve of the stored key = %+v, %v, %v", r, fresh, err)
		}
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var version string
	_ = s.db.View(func(tx *bolt.Tx) error { version = string(tx.Bucket(bucketMeta).Get([]byte("version"))); return nil })
	if version != schemaVersion {
		t.Errorf("schema version after Open: %q, want %q", version, schemaVersion)
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Open upgraded the file: it reads the same again.
	check(openTemp(t, path))
}
