package smtpd_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mailsink/mailsink/internal/testenv"
)

// TestTranscriptHoldsNoCredential authenticates with PLAIN and LOGIN the
// ways clients do, the API key as the user name too (or another account's
// key as the user name), and checks that neither the stored transcript nor
// the one the API shows holds a key, plain or in base64: the mechanism is
// shown, the user name is <redacted>, and so is MAIL's AUTH= parameter.
func TestTranscriptHoldsNoCredential(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	acme, globex := testenv.AcmeKey, testenv.GlobexKey
	tests := []struct {
		name, mech string
		// exchange is the AUTH command and its continuations, each with
		// the reply code it gets.
		exchange []step
	}{
		{"PLAIN, initial response, key as user name", "PLAIN", []step{
			{"AUTH PLAIN " + b64("\x00"+acme+"\x00"+acme), 235}}},
		{"PLAIN, continuation, key as identity and user name", "PLAIN", []step{
			{"AUTH PLAIN", 334}, {b64(acme + "\x00" + acme + "\x00" + acme), 235}}},
		{"PLAIN, another account's key as user name", "PLAIN", []step{
			{"AUTH PLAIN " + b64("\x00"+globex+"\x00"+acme), 235}}},
		{"LOGIN, key as user name", "LOGIN", []step{
			{"AUTH LOGIN", 334}, {b64(acme), 334}, {b64(acme), 235}}},
		{"LOGIN, another account's key as user name", "LOGIN", []step{
			{"AUTH LOGIN", 334}, {b64(globex), 334}, {b64(acme), 235}}},
		{"LOGIN, user name in the initial response", "LOGIN", []step{
			{"AUTH LOGIN " + b64(acme), 334}, {b64(acme), 235}}},
	}
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, _, _ := greet(t, e.SMTP)
			cmd(t, tp, "EHLO client.example", 250)
			for _, s := range tt.exchange {
				cmd(t, tp, s.line, s.code)
			}
			rcpt := "auth" + string(rune('a'+i)) + "@acme.test"
			cmd(t, tp, "MAIL FROM:<app@example.com> AUTH="+acme+"@acme.test", 250)
			cmd(t, tp, "RCPT TO:<"+rcpt+">", 250)
			cmd(t, tp, "DATA", 354)
			cmd(t, tp, "Subject: auth\r\n\r\nhi\r\n.", 250)

			got := items(t, e, acme, "recipient="+rcpt)
			if len(got) != 1 {
				t.Fatalf("stored %d emails to %s, want 1", len(got), rcpt)
			}
			id := got[0]["id"].(string)
			resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/transcript", acme, nil)
			tr := resp.JSON(t)["item"].(map[string]any)
			params, _ := tr["mail"].(map[string]any)["params"].([]any)
			if tr["authMechanism"] != tt.mech || tr["authIdentity"] != "<redacted>" || len(params) != 1 || params[0] != "AUTH=<redacted>" {
				t.Errorf("transcript %s, want mechanism %s, authIdentity and the AUTH= parameter <redacted>", resp.Body, tt.mech)
			}

			account := got[0]["account"].(map[string]any)["id"].(string)
			body, err := e.App.Store().GetBody(context.Background(), account, id)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := json.Marshal(body.Transcript)
			for what, text := range map[string]string{"the shown transcript": string(resp.Body), "the stored transcript": string(stored)} {
				for _, secret := range []string{acme, globex, b64(acme), b64(globex), "\x00" + acme} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds %q: %s", what, secret, text)
					}
				}
			}
		})
	}
}

// step is one line a client sends and the reply code it gets.
type step struct {
	line string
	code int
}
