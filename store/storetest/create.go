package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
)

// testRoundTrip checks that every field of an email and its body comes back
// as it was stored, from GetEmail, GetBody and ListEmails.
func testRoundTrip(t *testing.T, s Store) {
	tests := []struct {
		name  string
		email *store.Email
		body  *store.Body
		// wantBody is what GetBody returns when it is not body itself.
		wantBody *store.Body
	}{
		{
			name: "every field set",
			email: &store.Email{
				ID:         id(1),
				AccountID:  acctA,
				MessageID:  ptr("<abc.123@Mail.Example.COM>"),
				Sender:     "Bob.Smith+tag@Example.COM",
				Recipient:  "QA-Team@Sub.Example.io",
				Subject:    ptr("Grüße — 100% ✓"),
				Status:     store.StatusProcessed,
				Notes:      ptr("line one\nline two"),
				Labels:     []string{"b", "a", "ünïcödé", "with space"},
				RawSize:    1<<53 - 1,
				ReceivedAt: time.UnixMilli(1_767_225_600_001).UTC(),
				CreatedAt:  time.UnixMilli(1_767_225_600_999).UTC(),
				UpdatedAt:  time.UnixMilli(1_767_225_601_500).UTC(),
			},
			body: &store.Body{
				Raw: []byte("From: b@x.io\r\nSubject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n\r\n\xff\xfe\x00\x80 not utf-8 \xc3\x28\r\n"),
				Given: &store.Parts{
					Text: ptr("Grüße\n"),
					HTML: ptr("<p>Grüße</p>"),
					Headers: map[string]string{
						"from":       "b@x.io",
						"subject":    "Grüße",
						"x-repeated": "one, two",
						"empty":      "",
					},
					Attachments: []store.Attachment{
						{ContentID: ptr("<img1>"), ContentType: ptr("image/png"), Disposition: ptr("inline"), Filename: ptr("a.png"), Size: 12345},
						{ContentType: ptr("application/pdf"), Filename: ptr("report.pdf"), Size: 0},
						{Size: 1<<53 - 1},
					},
				},
				Transcript: &store.Transcript{
					ClientAddress: "192.0.2.7:52114", Helo: "app.example", TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
					AuthMechanism: "PLAIN", AuthIdentity: "qa",
					Mail: store.TranscriptCommand{Address: "b@x.io", Params: []string{"SIZE=120", "BODY=8BITMIME"}, Reply: "250 2.0.0 Roger"},
					Rcpts: []store.TranscriptCommand{
						{Address: "QA-Team@Sub.Example.io", Params: []string{}, Reply: "250 2.0.0 ok"},
						{Address: "x@nowhere.test", Params: []string{"NOTIFY=NEVER"}, Reply: "550 5.1.1 No account"},
					},
					RcptsOmitted: 3,
					Data:         "250 2.0.0 OK: queued",
				},
			},
		},
		{
			name: "null fields and empty labels",
			email: &store.Email{
				ID:         id(2),
				AccountID:  acctA,
				Sender:     "a@example.com",
				Recipient:  "b@example.com",
				Status:     store.StatusReceived,
				Labels:     []string{},
				ReceivedAt: time.UnixMilli(0).UTC(),
				CreatedAt:  time.UnixMilli(0).UTC(),
				UpdatedAt:  time.UnixMilli(0).UTC(),
			},
			body: &store.Body{Raw: []byte{}, Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}},
		},
		{
			name: "empty strings are not null",
			email: &store.Email{
				ID:         id(3),
				AccountID:  acctA,
				MessageID:  ptr(""),
				Sender:     "a@example.com",
				Recipient:  "b@example.com",
				Subject:    ptr(""),
				Status:     store.StatusArchived,
				Notes:      ptr(""),
				Labels:     []string{""},
				ReceivedAt: time.UnixMilli(-1).UTC(),
				CreatedAt:  time.UnixMilli(-86_400_000_123).UTC(),
				UpdatedAt:  time.UnixMilli(253_402_300_799_999).UTC(), // 9999-12-31T23:59:59.999Z
			},
			body: &store.Body{
				Raw: []byte("\r\n"),
				Given: &store.Parts{
					Text:        ptr(""),
					HTML:        ptr(""),
					Headers:     map[string]string{"": ""},
					Attachments: []store.Attachment{{ContentID: ptr(""), ContentType: ptr(""), Disposition: ptr(""), Filename: ptr("")}},
				},
			},
		},
		{
			name:     "nil headers and attachments are stored empty",
			email:    newEmail(acctA, 4),
			body:     &store.Body{Raw: []byte("x"), Given: &store.Parts{}},
			wantBody: &store.Body{Raw: []byte("x"), Given: &store.Parts{Headers: map[string]string{}, Attachments: []store.Attachment{}}},
		},
		{
			name:  "a body without given parts is read back without them",
			email: newEmail(acctA, 5),
			body:  &store.Body{Raw: []byte("Subject: s\r\n\r\nbody"), Transcript: &store.Transcript{}},
		},
	}
	ctx := context.Background()
	for _, tt := range tests {
		if err := s.CreateEmails(ctx, tt.body, []*store.Email{tt.email}); err != nil {
			t.Fatalf("%s: CreateEmails: %v", tt.name, err)
		}
	}
	listed := map[string]*store.Email{}
	for _, e := range list(t, s, store.ListQuery{AccountID: acctA, Limit: 100}) {
		listed[e.ID] = e
	}
	if len(listed) != len(tests) {
		t.Errorf("ListEmails returned %d emails, want %d", len(listed), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.GetEmail(ctx, acctA, tt.email.ID)
			if err != nil {
				t.Fatalf("GetEmail: %v", err)
			}
			if d := diffEmail(got, tt.email); d != "" {
				t.Errorf("GetEmail:%s", d)
			}
			if d := diffEmail(listed[tt.email.ID], tt.email); d != "" {
				t.Errorf("ListEmails:%s", d)
			}
			body, err := s.GetBody(ctx, acctA, tt.email.ID)
			if err != nil {
				t.Fatalf("GetBody: %v", err)
			}
			want := tt.body
			if tt.wantBody != nil {
				want = tt.wantBody
			}
			if d := diffBody(body, want); d != "" {
				t.Errorf("GetBody:%s", d)
			}
		})
	}
}

// testLargeRaw stores a 25 MiB raw source holding every byte value and reads
// it back byte for byte.
func testLargeRaw(t *testing.T, s Store) {
	const size = 25 << 20
	raw := make([]byte, size)
	x := uint32(2463534242)
	for i := range raw {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		raw[i] = byte(x)
	}
	e := newEmail(acctA, 1)
	e.RawSize = size
	body := &store.Body{Raw: raw, Given: &store.Parts{Text: ptr("big"), Headers: map[string]string{}, Attachments: []store.Attachment{}}}
	ctx := context.Background()
	if err := s.CreateEmails(ctx, body, []*store.Email{e}); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
	got, err := s.GetBody(ctx, acctA, e.ID)
	if err != nil {
		t.Fatalf("GetBody: %v", err)
	}
	if !bytes.Equal(got.Raw, raw) {
		t.Errorf("GetBody: raw of %d bytes differs from the %d bytes stored", len(got.Raw), len(raw))
	}
	if d := diffEmail(mustGet(t, s, acctA, e.ID), e); d != "" {
		t.Errorf("GetEmail:%s", d)
	}
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 10}); !equalIDs(got, idsOf(1)) {
		t.Errorf("ListEmails: got %v, want %v", got, idsOf(1))
	}
	if err := s.DeleteEmail(ctx, acctA, e.ID); err != nil {
		t.Fatalf("DeleteEmail: %v", err)
	}
	checkBodyCount(t, s, 0, "after deleting the email")
}

// testSharedBody checks that emails created together share one body, which
// outlives all but the last of them.
func testSharedBody(t *testing.T, s Store) {
	ctx := context.Background()
	body := &store.Body{
		Raw: []byte("To: a@x.io, b@x.io, c@x.io\r\nSubject: shared\r\n\r\nhello\r\n"),
		Given: &store.Parts{
			Text:        ptr("hello\r\n"),
			Headers:     map[string]string{"to": "a@x.io, b@x.io, c@x.io", "subject": "shared"},
			Attachments: []store.Attachment{{Filename: ptr("f.txt"), Size: 3}},
		},
	}
	emails := []*store.Email{
		newEmail(acctA, 1, withRecipient("a@x.io")),
		newEmail(acctA, 2, withRecipient("b@x.io")),
		newEmail(acctA, 3, withRecipient("c@x.io")),
	}
	if err := s.CreateEmails(ctx, body, emails); err != nil {
		t.Fatalf("CreateEmails: %v", err)
	}
	checkBodyCount(t, s, 1, "after creating 3 emails with one body")
	for _, e := range emails {
		if d := diffEmail(mustGet(t, s, acctA, e.ID), e); d != "" {
			t.Errorf("GetEmail(%s):%s", e.ID, d)
		}
		got, err := s.GetBody(ctx, acctA, e.ID)
		if err != nil {
			t.Fatalf("GetBody(%s): %v", e.ID, err)
		}
		if d := diffBody(got, body); d != "" {
			t.Errorf("GetBody(%s):%s", e.ID, d)
		}
	}
	for _, e := range emails[:2] {
		if err := s.DeleteEmail(ctx, acctA, e.ID); err != nil {
			t.Fatalf("DeleteEmail(%s): %v", e.ID, err)
		}
		_, err := s.GetBody(ctx, acctA, e.ID)
		wantCode(t, err, store.NotFound, "GetBody of a deleted email")
	}
	got, err := s.GetBody(ctx, acctA, emails[2].ID)
	if err != nil {
		t.Fatalf("GetBody of the last email sharing the body: %v", err)
	}
	if d := diffBody(got, body); d != "" {
		t.Errorf("GetBody of the last email sharing the body:%s", d)
	}
	checkBodyCount(t, s, 1, "after deleting 2 of 3 emails")
	if err := s.DeleteEmail(ctx, acctA, emails[2].ID); err != nil {
		t.Fatalf("DeleteEmail(%s): %v", emails[2].ID, err)
	}
	checkBodyCount(t, s, 0, "after deleting all 3 emails")
}

// testCreateValidation checks the Invalid cases of CreateEmails, and that they
// store nothing.
func testCreateValidation(t *testing.T, s Store) {
	ctx := context.Background()
	tests := []struct {
		name   string
		emails []*store.Email
	}{
		{"nil slice", nil},
		{"empty slice", []*store.Email{}},
		{"two accounts", []*store.Email{newEmail(acctA, 1), newEmail(acctB, 2)}},
		{"two accounts, second differs", []*store.Email{newEmail(acctA, 3), newEmail(acctA, 4), newEmail(acctB, 5)}},
	}
	for _, tt := range tests {
		err := s.CreateEmails(ctx, newBody(0), tt.emails)
		wantCode(t, err, store.Invalid, "CreateEmails with "+tt.name)
	}
	for _, acct := range []string{acctA, acctB} {
		if got := listIDs(t, s, store.ListQuery{AccountID: acct, Limit: 100}); len(got) != 0 {
			t.Errorf("ListEmails(%s) after invalid creates: got %v, want none", acct, got)
		}
		for n := 1; n <= 5; n++ {
			_, err := s.GetEmail(ctx, acct, id(n))
			wantCode(t, err, store.NotFound, "GetEmail after invalid creates")
		}
	}
	checkBodyCount(t, s, 0, "after invalid creates")
}

// testNotFound checks every method that takes an id with one that does not
// exist.
func testNotFound(t *testing.T, s Store) {
	ctx := context.Background()
	create(t, s, newEmail(acctA, 1))
	missing := id(2)
	_, err := s.GetEmail(ctx, acctA, missing)
	wantCode(t, err, store.NotFound, "GetEmail")
	_, err = s.GetBody(ctx, acctA, missing)
	wantCode(t, err, store.NotFound, "GetBody")
	_, err = s.UpdateEmail(ctx, acctA, missing, store.Update{Status: ptr(store.StatusArchived), UpdatedAt: at(1)})
	wantCode(t, err, store.NotFound, "UpdateEmail")
	wantCode(t, s.DeleteEmail(ctx, acctA, missing), store.NotFound, "DeleteEmail")
	// An account with no emails at all.
	_, err = s.GetEmail(ctx, "no-such-account", id(1))
	wantCode(t, err, store.NotFound, "GetEmail in an empty account")
	if got := listIDs(t, s, store.ListQuery{AccountID: "no-such-account", Limit: 10}); len(got) != 0 {
		t.Errorf("ListEmails of an empty account: got %v, want none", got)
	}
	// Nothing above created the missing email as a side effect.
	if got := listIDs(t, s, store.ListQuery{AccountID: acctA, Limit: 10}); !equalIDs(got, idsOf(1)) {
		t.Errorf("ListEmails: got %v, want %v", got, idsOf(1))
	}
}

func testPing(t *testing.T, s Store) {
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// testCancelledContext checks that every method returns an error, and does
// not panic, when its context is already cancelled.
func testCancelledContext(t *testing.T, s Store) {
	create(t, s, newEmail(acctA, 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateEmails", func() error { return s.CreateEmails(ctx, newBody(2), []*store.Email{newEmail(acctA, 2)}) }},
		{"GetEmail", func() error { _, err := s.GetEmail(ctx, acctA, id(1)); return err }},
		{"GetBody", func() error { _, err := s.GetBody(ctx, acctA, id(1)); return err }},
		{"ListEmails", func() error {
			_, err := s.ListEmails(ctx, store.ListQuery{AccountID: acctA, Limit: 10})
			return err
		}},
		{"UpdateEmail", func() error {
			_, err := s.UpdateEmail(ctx, acctA, id(1), store.Update{Notes: &store.Nullable{Value: ptr("x")}, UpdatedAt: at(1)})
			return err
		}},
		{"DeleteEmail", func() error { return s.DeleteEmail(ctx, acctA, id(1)) }},
		{"Ping", func() error { return s.Ping(ctx) }},
	}
	for _, c := range calls {
		if err := c.call(); err == nil {
			t.Errorf("%s with a cancelled context: got nil error, want one", c.name)
		}
	}
}
