package ingest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/store"
	"github.com/mailsink/mailsink/store/pebblestore"
)

// QuotaRoom counts the recipients a message already has in the account: an
// account with room for two more emails takes two recipients of a message
// and refuses the third, telling the figures to the account only; an
// announced size counts once for each recipient.
func TestQuotaRoomCountsTheMessagesRecipients(t *testing.T) {
	t.Parallel()
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const maxEmails, maxBytes = 5, 10_000
	svc := New(st, func() time.Time { return now }, Config{Quota: func(string) (int64, int64) { return maxEmails, maxBytes }})
	for i := range 3 {
		raw := message("From: a@example.com", "Subject: fill", "", strings.Repeat("x", 900))
		if _, err := svc.Deliver(context.Background(), raw, Envelope{Sender: "a@example.com", Recipients: []Recipient{rcpt(fmt.Sprintf("f%d@acme.test", i), acme)}}); err != nil {
			t.Fatal(err)
		}
	}
	// acme stores 3 emails of about 930 bytes: room for 2 emails more.
	for _, tt := range []struct {
		name    string
		caller  string
		pending int
		size    int64
		want    string // "" for room, else words of the refusal
	}{
		{"the first", "", 0, 0, ""},
		{"the second", "", 1, 0, ""},
		{"the third", "", 2, 0, "a recipient's account has used up its storage quota"},
		{"the third, to the account itself", acme.ID, 2, 0, "quota of 5 emails has room for 2 more (it stores 3), which this message's recipients before this one take"},
		{"a size that fits twice", acme.ID, 1, 3000, ""},
		{"a size that does not fit twice", acme.ID, 1, 4000, "quota of 10000 bytes has no room for this recipient"},
		{"a size that does not fit, to another caller", globex.ID, 0, 8000, "a recipient's account has used up its storage quota"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := svc.QuotaRoom(context.Background(), tt.caller, acme.ID, tt.pending, tt.size)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (!store.IsCode(err, store.QuotaExceeded) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want QuotaExceeded saying %q", err, tt.want)
			case tt.caller != acme.ID && err != nil && strings.ContainsAny(err.Error(), "0123456789"):
				t.Errorf("another caller learns acme's figures: %v", err)
			}
		})
	}
}
