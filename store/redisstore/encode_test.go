package redisstore

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/mailsink/mailsink/store"
)

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The hand-written encoders write what json.Marshal writes for the same
// values, byte for byte, and a created email's event decodes to the email.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	opt := func() *string {
		if r.IntN(3) == 0 {
			return nil
		}
		return ptr(randomText(r))
	}
	for i := range 5000 {
		var labels []string
		if i%7 != 0 {
			labels = []string{}
		}
		for range r.IntN(4) {
			labels = append(labels, randomText(r))
		}
		f := fixed{Body: randomText(r), ID: randomText(r), AccountID: randomText(r), MessageID: opt(),
			Sender: randomText(r), Recipient: randomText(r), RawSize: r.Int64() - r.Int64(),
			ReceivedAt: r.Int64() - r.Int64(), CreatedAt: r.Int64N(1 << 45)}
		if got, want := f.encode(), marshal(t, f); got != want {
			t.Fatalf("fixed.encode() = %s, want %s", got, want)
		}
		s := opt()
		if got, want := encodeOptString(s), marshal(t, s); got != want {
			t.Fatalf("encodeOptString = %s, want %s", got, want)
		}
		if got, want := encodeLabels(labels), marshal(t, labels); got != want {
			t.Fatalf("encodeLabels(%q) = %s, want %s", labels, got, want)
		}

		b := &store.Body{Text: opt(), HTML: opt()}
		if i%5 != 0 {
			b.Headers = map[string]string{}
			for range r.IntN(6) {
				b.Headers[randomText(r)] = randomText(r)
			}
		}
		for range r.IntN(3) {
			b.Attachments = append(b.Attachments, store.Attachment{ContentID: opt(), ContentType: opt(),
				Disposition: opt(), Filename: opt(), Size: r.Int64N(1 << 40)})
		}
		want := bodyRecord{Text: b.Text, HTML: b.HTML, Headers: b.Headers, Attachments: []attachmentRecord{}}
		if want.Headers == nil {
			want.Headers = map[string]string{}
		}
		for _, a := range b.Attachments {
			want.Attachments = append(want.Attachments, attachmentRecord(a))
		}
		if got, want := encodeBody(b), marshal(t, want); got != want {
			t.Fatalf("encodeBody = %s, want %s", got, want)
		}

		e := testEmail(randomText(r), randomText(r), randomText(r), r.Int64N(1<<45))
		e.Subject, e.Notes, e.Labels = opt(), opt(), labels
		if e.Labels == nil {
			e.Labels = []string{}
		}
		// The event carries the email as stored: what a replica would
		// read back (invalid UTF-8 comes back as U+FFFD either way).
		vals := newRecord(e, e.ID, "body").values()
		fv := make([]any, len(vals))
		for i, v := range vals {
			fv[i] = v
		}
		stored, err := decodeFields(fv)
		if err != nil {
			t.Fatal(err)
		}
		ev, ok := decodeEvent("1-0", string(createdPayload(e.AccountID, e.ID, vals)))
		if !ok {
			t.Fatalf("the created event of %+v does not decode", e)
		}
		if ev.Type != store.EmailCreated || ev.AccountID != stored.AccountID || ev.EmailID != e.ID || !reflect.DeepEqual(ev.Email, stored.email()) {
			t.Fatalf("created event decodes to %+v (email %+v), want the email %+v", ev, ev.Email, stored.email())
		}
		if acc, ok := accountOf(string(createdPayload(e.AccountID, e.ID, vals))); ok && acc != stored.AccountID {
			t.Fatalf("accountOf = %q, want %q", acc, stored.AccountID)
		}
	}
}
