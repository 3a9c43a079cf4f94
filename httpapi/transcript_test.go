package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// TestTranscript sends a message with AUTH, ESMTP parameters and a refused
// recipient, and reads back what the server saw.
func TestTranscript(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		c, err := smtp.Dial(e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Hello("app.client.test"); err != nil {
			t.Fatal(err)
		}
		if err := c.Auth(sasl.NewPlainClient("", "qa-user", acme)); err != nil {
			t.Fatal(err)
		}
		raw := "From: app@example.com\r\nTo: t@acme.test\r\nSubject: transcript\r\n\r\nhi\r\n"
		if err := c.Mail("app@example.com", &smtp.MailOptions{Size: int64(len(raw)), Body: smtp.Body8BitMIME}); err != nil {
			t.Fatal(err)
		}
		bad := c.Rcpt("nobody@localhost", nil)
		if bad == nil {
			t.Fatal("invalid RCPT accepted")
		}
		if err := c.Rcpt("t@acme.test", nil); err != nil {
			t.Fatal(err)
		}
		sendData(t, c, raw)
		c.Quit()

		items := list(t, e, acme, "recipient=t%40acme.test")
		if len(items) != 1 {
			t.Fatalf("stored %d, want 1", len(items))
		}
		resp := get(t, e, "/v1/emails/"+items[0]["id"].(string)+"/transcript", acme)
		if resp.Status != http.StatusOK {
			t.Fatalf("transcript: %d %s", resp.Status, resp.Body)
		}
		tr := resp.JSON(t)["item"].(map[string]any)
		if tr["helo"] != "app.client.test" || tr["authIdentity"] != "<redacted>" || tr["authMechanism"] != "PLAIN" ||
			tr["tlsVersion"] != "" || !strings.HasPrefix(tr["clientAddress"].(string), "127.0.0.1:") || tr["data"] != "250 2.0.0 OK: queued" {
			t.Errorf("transcript %s", resp.Body)
		}
		if strings.Contains(string(resp.Body), acme) {
			t.Errorf("the transcript holds the API key: %s", resp.Body)
		}
		mail := tr["mail"].(map[string]any)
		if mail["address"] != "app@example.com" || strings.Join(asStrings(mail["params"]), " ") != fmt.Sprintf("SIZE=%d BODY=8BITMIME", len(raw)) ||
			mail["reply"] != "250 2.0.0 Roger, accepting mail from <app@example.com>" {
			t.Errorf("mail %v", mail)
		}
		rcpts := tr["rcpt"].([]any)
		if len(rcpts) != 2 {
			t.Fatalf("rcpt %v, want 2 commands", rcpts)
		}
		first, second := rcpts[0].(map[string]any), rcpts[1].(map[string]any)
		if first["address"] != "nobody@localhost" || first["reply"] != "550 5.1.3 "+bad.(*smtp.SMTPError).Message {
			t.Errorf("refused rcpt %v; the client read %v", first, bad)
		}
		if second["address"] != "t@acme.test" || second["reply"] != "250 2.0.0 I'll make sure <t@acme.test> gets this" ||
			len(second["params"].([]any)) != 0 {
			t.Errorf("rcpt %v", second)
		}
		if n := len(resp.Body); n > 800 {
			t.Errorf("transcript is %d bytes of JSON, want a few hundred", n)
		}

		// An email created over HTTP has none; the usual 400 and 404.
		created := create(t, e, acme, map[string]any{"recipient": "h@acme.test", "sender": "s@example.com"})
		if resp := get(t, e, "/v1/emails/"+created["id"].(string)+"/transcript", acme); resp.Status != http.StatusOK || string(resp.Body) != `{"item":null}`+"\n" && string(resp.Body) != `{"item":null}` {
			t.Errorf("HTTP email: %d %q, want {\"item\":null}", resp.Status, resp.Body)
		}
		if resp := get(t, e, "/v1/emails/"+items[0]["id"].(string)+"/transcript", globex); resp.Status != http.StatusNotFound {
			t.Errorf("another account: %d, want 404", resp.Status)
		}
		if resp := get(t, e, "/v1/emails/nope/transcript", acme); resp.Status != http.StatusBadRequest {
			t.Errorf("bad id: %d, want 400", resp.Status)
		}
	})
}

// TestTranscriptPerAccount checks that recipients routed to another
// account are left out of an account's transcript.
func TestTranscriptPerAccount(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	c, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := "From: app@example.com\r\nSubject: two\r\n\r\nhi\r\n"
	if err := c.SendMail("app@example.com", []string{"a@acme.test", "secret@globex.test"}, strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	id := list(t, e, acme, "recipient=a%40acme.test")[0]["id"].(string)
	body := string(get(t, e, "/v1/emails/"+id+"/transcript", acme).Body)
	if strings.Contains(body, "globex") || !strings.Contains(body, "a@acme.test") {
		t.Errorf("acme's transcript: %s", body)
	}

	// Past the transcript's 100 RCPTs, the ones left out are counted for
	// the account they were routed to only: globex's, refused by its own
	// fault rule, are not acme's to count. One transaction: to, then n
	// RCPTs that the rule refuses (550), then the message.
	send := func(to, refused string, n int) {
		t.Helper()
		if err := c.Mail("app@example.com", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt(to, nil); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			c.Rcpt(fmt.Sprintf("r%d@%s", i, refused), nil)
		}
		sendData(t, c, raw)
	}
	omitted := func(key, rcpt string) any {
		id := list(t, e, key, "recipient="+rcpt)[0]["id"].(string)
		return get(t, e, "/v1/emails/"+id+"/transcript", key).JSON(t)["item"].(map[string]any)["rcptOmitted"]
	}
	refuse := func(key, domain string) {
		addFault(t, e, key, map[string]any{"stage": "rcpt", "recipient": "@" + domain,
			"reply": map[string]any{"code": 550, "text": "5.1.1 No"}})
	}
	refuse(globex, "globex.test")
	send("b@acme.test", "globex.test", 150)
	if got := omitted(acme, "b%40acme.test"); got != nil {
		t.Errorf("acme's transcript counts %v omitted RCPTs, all globex's", got)
	}
	// acme's own are counted.
	refuse(acme, "mail.acme.test")
	send("c@acme.test", "mail.acme.test", 120)
	if got := omitted(acme, "c%40acme.test"); got != 21.0 {
		t.Errorf("acme's transcript counts %v omitted RCPTs, want 21 (121 RCPTs, 100 kept)", got)
	}
}

func asStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestTranscriptStoredWithCredentials reads a transcript stored the way
// earlier releases stored it, with the user name of AUTH (here the API
// key, as clients often send it) and MAIL's AUTH= parameter in clear: the
// API shows both <redacted>, the rest as stored.
func TestTranscriptStoredWithCredentials(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		account := create(t, e, acme, map[string]any{"recipient": "first@acme.test", "sender": "s@example.com"})["account"].(map[string]any)["id"].(string)
		now := time.Now().UTC().Truncate(time.Millisecond)
		raw := []byte("Subject: stored earlier\r\n\r\nhi there\r\n")
		old := &store.Email{ID: store.NewID(), AccountID: account, Sender: "app@example.com", Recipient: "old@acme.test",
			Status: store.StatusReceived, Labels: []string{}, RawSize: int64(len(raw)), ReceivedAt: now, CreatedAt: now, UpdatedAt: now}
		body := &store.Body{Raw: raw,
			Transcript: &store.Transcript{ClientAddress: "192.0.2.7:41000", Helo: "app.example", AuthMechanism: "LOGIN", AuthIdentity: acme,
				Mail: store.TranscriptCommand{Address: "app@example.com", Params: []string{"SIZE=40", "AUTH=<" + globex + "@globex.test>"},
					Reply: "250 2.0.0 Roger, accepting mail from <app@example.com>"},
				Rcpts: []store.TranscriptCommand{{Address: "old@acme.test", Params: []string{}, Reply: "250 2.0.0 I'll make sure <old@acme.test> gets this"}},
				Data:  "250 2.0.0 OK: queued"}}
		if err := e.App.Store().CreateEmails(context.Background(), body, []*store.Email{old}); err != nil {
			t.Fatal(err)
		}
		resp := get(t, e, "/v1/emails/"+old.ID+"/transcript", acme)
		if resp.Status != http.StatusOK {
			t.Fatalf("transcript: %d %s", resp.Status, resp.Body)
		}
		if strings.Contains(string(resp.Body), acme) || strings.Contains(string(resp.Body), globex) {
			t.Errorf("the transcript shows an API key: %s", resp.Body)
		}
		tr := resp.JSON(t)["item"].(map[string]any)
		mail := tr["mail"].(map[string]any)
		if tr["authMechanism"] != "LOGIN" || tr["authIdentity"] != "<redacted>" ||
			strings.Join(asStrings(mail["params"]), " ") != "SIZE=40 AUTH=<redacted>" ||
			tr["helo"] != "app.example" || tr["clientAddress"] != "192.0.2.7:41000" || len(tr["rcpt"].([]any)) != 1 {
			t.Errorf("transcript %s, want the stored one with authIdentity and AUTH= <redacted>", resp.Body)
		}
	})
}
