package smtpd_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/internal/testenv"
)

func addFault(t *testing.T, e *testenv.Env, rule map[string]any) {
	t.Helper()
	if resp := e.Do(t, http.MethodPost, "/v1/faults", testenv.AcmeKey, rule); resp.Status != http.StatusCreated {
		t.Fatalf("POST /v1/faults: %d %s", resp.Status, resp.Body)
	}
}

// TestFaultAtRcptRefusesOneRecipient checks that a rcpt fault refuses only
// the recipient it matches, with X.0.0 added to a text without an enhanced
// code; the others are stored, and the transcript shows the refusal.
func TestFaultAtRcptRefusesOneRecipient(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, map[string]any{"stage": "rcpt", "recipient": "@acme.test", "sender": "app@example.com", "reply": map[string]any{"code": 450, "text": "Mailbox busy"}})
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO client.example", 250)
	cmd(t, tp, "AUTH LOGIN", 334)
	cmd(t, tp, base64.StdEncoding.EncodeToString([]byte("login-user")), 334)
	cmd(t, tp, base64.StdEncoding.EncodeToString([]byte(testenv.AcmeKey)), 235)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	tp.PrintfLine("RCPT TO:<x@acme.test>")
	if code, msg, _ := tp.ReadResponse(0); code != 450 || msg != "4.0.0 Mailbox busy" {
		t.Errorf("matched RCPT: %d %q, want 450 4.0.0 Mailbox busy", code, msg)
	}
	cmd(t, tp, "RCPT TO:<x@globex.test>", 250) // routed to acme by AUTH, but not @acme.test
	cmd(t, tp, "DATA", 354)
	tp.PrintfLine("Subject: one\r\n\r\nhi\r\n.")
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("DATA: %d %s %v", code, msg, err)
	}
	got := items(t, e, testenv.AcmeKey, "")
	if len(got) != 1 || got[0]["recipient"] != "x@globex.test" {
		t.Fatalf("stored %v, want only x@globex.test", got)
	}
	resp := e.Do(t, http.MethodGet, "/v1/emails/"+got[0]["id"].(string)+"/transcript", testenv.AcmeKey, nil)
	tr := resp.JSON(t)["item"].(map[string]any)
	rcpts := tr["rcpt"].([]any)
	if tr["authMechanism"] != "LOGIN" || tr["authIdentity"] != "<redacted>" || tr["helo"] != "client.example" || len(rcpts) != 2 ||
		rcpts[0].(map[string]any)["reply"] != "450 4.0.0 Mailbox busy" {
		t.Errorf("transcript %s", resp.Body)
	}
	if n := testutil.ToFloat64(e.App.Metrics().SMTPFaults.WithLabelValues("rcpt", "reply")); n != 1 {
		t.Errorf("faults counted: %v, want 1", n)
	}
}

// TestFaultDisconnectAtBDAT checks that a data fault with disconnect closes
// the connection at the first BDAT chunk, without a reply, storing nothing.
func TestFaultDisconnectAtBDAT(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, map[string]any{"stage": "data", "count": 1, "disconnect": true})
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO client.example", 250)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<cut@acme.test>", 250)
	chunk := "Subject: cut\r\n\r\nhi\r\n"
	fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(chunk), chunk)
	tp.W.Flush()
	if line, err := tp.ReadLine(); err != io.EOF {
		t.Errorf("after BDAT: %q %v, want the connection closed without a reply", line, err)
	}
	if got := items(t, e, testenv.AcmeKey, ""); len(got) != 0 {
		t.Errorf("stored %v, want nothing", got)
	}
	// The rule is used up: the next transaction goes through.
	tp, _, _ = greet(t, e.SMTP)
	cmd(t, tp, "EHLO client.example", 250)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<cut@acme.test>", 250)
	fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(chunk), chunk)
	tp.W.Flush()
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("second BDAT: %d %s %v", code, msg, err)
	}
}

// A counted rcpt rule counts transactions, not RCPTs: with count 1, both
// matching RCPTs of one transaction are refused, and the next transaction
// goes through (each RCPT taking a match would let it through at once).
func TestCountedRcptFaultCountsTransactions(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, map[string]any{"stage": "rcpt", "recipient": "@acme.test", "count": 1, "reply": map[string]any{"code": 450, "text": "Mailbox busy"}})
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO client.example", 250)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<a@acme.test>", 450)
	cmd(t, tp, "RCPT TO:<b@acme.test>", 450)
	cmd(t, tp, "RSET", 250)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<a@acme.test>", 250)
}

// TestFaultAtDataAnswersDATA checks that a data fault's reply is the answer
// to the DATA command itself, in place of the 354 (the client then sends no
// message), that the connection goes on in step, and that a client that sent
// its message before the 354 gets the 354 and then the reply, after the
// message, which is dropped.
func TestFaultAtDataAnswersDATA(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, map[string]any{"stage": "data", "count": 1, "reply": map[string]any{"code": 451, "text": "4.3.0 Try again later"}})
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO client.example", 250)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<refused@acme.test>", 250)
	tp.PrintfLine("DATA")
	if code, msg, err := tp.ReadResponse(0); code != 451 || msg != "4.3.0 Try again later" {
		t.Fatalf("DATA: %d %q %v, want the rule's 451 in place of 354", code, msg, err)
	}
	// The transaction is over, and the next one on the same connection
	// goes through: the server did not take what follows for a message.
	cmd(t, tp, "RCPT TO:<refused@acme.test>", 502)
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<stored@acme.test>", 250)
	cmd(t, tp, "DATA", 354)
	tp.PrintfLine("Subject: after\r\n\r\nhi\r\n.")
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("end of DATA: %d %s %v", code, msg, err)
	}
	got := items(t, e, testenv.AcmeKey, "")
	if len(got) != 1 || got[0]["recipient"] != "stored@acme.test" {
		t.Fatalf("stored %v, want only stored@acme.test", got)
	}

	// A client that does not wait for the 354.
	addFault(t, e, map[string]any{"stage": "data", "count": 1, "reply": map[string]any{"code": 554, "text": "5.7.1 No"}})
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<early@acme.test>", 250)
	fmt.Fprintf(tp.W, "DATA\r\nSubject: early\r\n\r\nhi\r\n.\r\nNOOP\r\n")
	tp.W.Flush()
	if code, msg, err := tp.ReadResponse(354); err != nil {
		t.Fatalf("early DATA: %d %s %v, want 354 (the message was sent already)", code, msg, err)
	}
	if code, msg, _ := tp.ReadResponse(0); code != 554 || msg != "5.7.1 No" {
		t.Fatalf("after the early message: %d %q, want 554 5.7.1 No", code, msg)
	}
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("NOOP: %d %s %v", code, msg, err)
	}
	if got := items(t, e, testenv.AcmeKey, "recipient=early@acme.test"); len(got) != 0 {
		t.Errorf("stored %v, want nothing for a faulted transaction", got)
	}

	// A client that sends its message in a write of its own, once the
	// server has read DATA, without waiting for the answer: the rule's
	// delay lets it arrive before the refusal, which then follows the
	// message rather than have it read as commands.
	addFault(t, e, map[string]any{"stage": "data", "count": 1, "delay": "300ms", "reply": map[string]any{"code": 451, "text": "4.3.0 Later"}})
	cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
	cmd(t, tp, "RCPT TO:<apart@acme.test>", 250)
	faults := e.App.Metrics().SMTPFaults
	matched := func() float64 {
		return testutil.ToFloat64(faults.WithLabelValues("data", "reply")) + testutil.ToFloat64(faults.WithLabelValues("data", "delay"))
	}
	before := matched()
	fmt.Fprintf(tp.W, "DATA\r\n")
	tp.W.Flush()
	testenv.WaitFor(t, 5*time.Second, "the rule to match DATA", func() bool { return matched() > before })
	fmt.Fprintf(tp.W, "MAIL FROM:<smuggled@example.com>\r\nRCPT TO:<smuggled@acme.test>\r\n.\r\nNOOP\r\n")
	tp.W.Flush()
	if code, msg, err := tp.ReadResponse(354); err != nil {
		t.Fatalf("DATA with its message sent apart: %d %s %v, want 354", code, msg, err)
	}
	if code, msg, _ := tp.ReadResponse(0); code != 451 || msg != "4.3.0 Later" {
		t.Fatalf("after the message: %d %q, want 451 4.3.0 Later", code, msg)
	}
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("NOOP: %d %s %v", code, msg, err)
	}
	if got := items(t, e, testenv.AcmeKey, "recipient=smuggled@acme.test"); len(got) != 0 {
		t.Errorf("the message's lines were read as commands: %v", got)
	}
}
