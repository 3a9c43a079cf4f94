package ingest

import (
	"context"
	"testing"

	"github.com/mailsink/mailsink/store"
)

// TestDeliverTranscriptPerAccount checks that each account's emails keep
// the transcript without the recipients routed to other accounts.
func TestDeliverTranscriptPerAccount(t *testing.T) {
	t.Parallel()
	s, st := newService(t, Config{})
	tr := &store.Transcript{ClientAddress: "192.0.2.1:1234", Helo: "client", Data: "250 2.0.0 OK: queued",
		Mail: store.TranscriptCommand{Address: "a@example.com", Params: []string{}, Reply: "250 ok"},
		Rcpts: []store.TranscriptCommand{
			{Address: "a@acme.test", Params: []string{}, Reply: "250 ok", AccountID: acme.ID},
			{Address: "b@globex.test", Params: []string{}, Reply: "250 ok", AccountID: globex.ID},
			{Address: "bad@nowhere", Params: []string{}, Reply: "550 5.1.1 no account"},
		}}
	env := Envelope{Sender: "a@example.com", Recipients: []Recipient{rcpt("a@acme.test", acme), rcpt("b@globex.test", globex)}, Transcript: tr}
	emails, err := s.Deliver(context.Background(), message("Subject: x", "", "hi"), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range emails {
		body, err := st.GetBody(context.Background(), e.AccountID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := body.Transcript
		if got == nil || got.Helo != "client" || len(got.Rcpts) != 2 || got.Rcpts[0].Address != e.Recipient || got.Rcpts[1].Address != "bad@nowhere" {
			t.Errorf("%s's transcript: %+v", e.AccountID, got)
		}
	}
	if len(tr.Rcpts) != 3 {
		t.Errorf("the envelope's transcript was changed: %+v", tr.Rcpts)
	}
}
