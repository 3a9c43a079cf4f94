package httpapi_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// addFault creates a fault rule through e and returns it.
func addFault(t *testing.T, e *testenv.Env, key string, rule map[string]any) map[string]any {
	t.Helper()
	resp := e.Do(t, http.MethodPost, "/v1/faults", key, rule)
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /v1/faults %v: status %d, want 201: %s", rule, resp.Status, resp.Body)
	}
	return resp.JSON(t)["item"].(map[string]any)
}

// faultRules lists the account's rules through e.
func faultRules(t *testing.T, e *testenv.Env, key string) []any {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/faults", key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/faults: status %d: %s", resp.Status, resp.Body)
	}
	return resp.JSON(t)["items"].([]any)
}

// trySend sends one message from app@example.com to rcpt over a new
// connection and returns the SMTP error (nil for 250).
func trySend(t testing.TB, addr, rcpt string) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := "From: app@example.com\r\nTo: " + rcpt + "\r\nSubject: fault test\r\n\r\nhi\r\n"
	return c.SendMail("app@example.com", []string{rcpt}, strings.NewReader(raw))
}

// replyCode returns the code of an SMTP error, 250 for nil and 0 for an
// error that is not an SMTP reply (the connection closed).
func replyCode(err error) int {
	var se *smtp.SMTPError
	switch {
	case err == nil:
		return 250
	case errors.As(err, &se):
		return se.Code
	}
	return 0
}

func emailCount(t *testing.T, e *testenv.Env, key, query string) float64 {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails/count?"+query, key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("count: %d %s", resp.Status, resp.Body)
	}
	return resp.JSON(t)["count"].(float64)
}

// TestFaultNextTwoAtData is the documented example: the next 2 messages to
// a@acme.test get 451 at DATA, the third is stored; on the embedded store,
// and on Redis with two replicas, the rule created on one and the mail
// sent to both.
func TestFaultNextTwoAtData(t *testing.T) {
	t.Parallel()
	rule := map[string]any{"stage": "data", "recipient": "a@acme.test", "count": 2,
		"reply": map[string]any{"code": 451, "text": "4.3.0 Try again later"}}
	check := func(t *testing.T, api *testenv.Env, smtpAddrs []string) {
		item := addFault(t, api, acme, rule)
		if item["remaining"] != 2.0 || item["count"] != 2.0 || item["id"] == "" {
			t.Errorf("created rule %v: want count and remaining 2 and an id", item)
		}
		// Another recipient is not matched and does not use up the rule.
		if err := trySend(t, smtpAddrs[0], "b@acme.test"); err != nil {
			t.Fatalf("b@acme.test: %v, want 250", err)
		}
		var got []int
		for i := range 4 {
			err := trySend(t, smtpAddrs[i%len(smtpAddrs)], "a@acme.test")
			got = append(got, replyCode(err))
			if i < 2 && !strings.Contains(err.Error(), "Try again later") {
				t.Errorf("send %d: %v, want the rule's text", i, err)
			}
		}
		if fmt.Sprint(got) != "[451 451 250 250]" {
			t.Errorf("replies: got %v, want [451 451 250 250]", got)
		}
		if n := emailCount(t, api, acme, "recipient=a@acme.test"); n != 2 {
			t.Errorf("stored for a@acme.test: %v, want 2 (a faulted transaction stores nothing)", n)
		}
		if rules := faultRules(t, api, acme); len(rules) != 0 {
			t.Errorf("rules after use: %v, want none", rules)
		}
	}
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
		check(t, e, []string{e.SMTP})
		metrics := e.Do(t, http.MethodGet, "/metrics", "", nil)
		if want := `mailsink_smtp_faults_total{action="reply",stage="data"} 2`; !strings.Contains(string(metrics.Body), want) {
			t.Errorf("metrics lack %s", want)
		}
	})
	t.Run("redis two replicas", func(t *testing.T) {
		t.Parallel()
		shared := testenv.SharedRedis(t)
		a := testenv.Start(t, shared, nil)
		b := testenv.Start(t, shared, nil)
		check(t, a, []string{b.SMTP, a.SMTP})
	})
}

// TestFaultConcurrentReplicas races senders on two replicas for a counted
// rule: exactly count of them are refused.
func TestFaultConcurrentReplicas(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, nil)
	b := testenv.Start(t, shared, nil)
	addFault(t, a, acme, map[string]any{"stage": "rcpt", "count": 5, "reply": map[string]any{"code": 450}})
	codes := make(chan int, 20)
	for i := range 20 {
		go func() {
			codes <- replyCode(trySend(t, []string{a.SMTP, b.SMTP}[i%2], fmt.Sprintf("c%d@acme.test", i)))
		}()
	}
	refused := 0
	for range 20 {
		if <-codes == 450 {
			refused++
		}
	}
	if refused != 5 {
		t.Errorf("refused: %d, want 5", refused)
	}
}

// TestFaultStages checks each stage with a reply, a delay and a
// disconnect, over real SMTP.
func TestFaultStages(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	const delay = 300 * time.Millisecond
	// run does one transaction as acme (AUTH PLAIN) to rcpt and returns
	// the error of the first command that failed.
	run := func(rcpt string) error {
		c, err := smtp.Dial(e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", "acme", acme)); err != nil {
			return err
		}
		raw := "From: app@example.com\r\nTo: " + rcpt + "\r\nSubject: stage\r\n\r\nhi\r\n"
		return c.SendMail("app@example.com", []string{rcpt}, strings.NewReader(raw))
	}
	for _, stage := range []string{"auth", "mail", "rcpt", "data", "message"} {
		t.Run(stage, func(t *testing.T) {
			rcpt := stage + "@acme.test"
			before := emailCount(t, e, acme, "recipient="+rcpt)
			addFault(t, e, acme, map[string]any{"stage": stage, "count": 1, "delay": delay.String(),
				"reply": map[string]any{"code": 554, "text": "5.7.1 Refused by rule " + stage}})
			start := time.Now()
			err := run(rcpt)
			if took := time.Since(start); took < delay {
				t.Errorf("reply after %v, want at least the delay %v", took, delay)
			}
			if replyCode(err) != 554 || !strings.Contains(err.Error(), "Refused by rule "+stage) {
				t.Errorf("got %v, want the rule's 554", err)
			}
			var se *smtp.SMTPError
			if errors.As(err, &se) && se.EnhancedCode != (smtp.EnhancedCode{5, 7, 1}) {
				t.Errorf("enhanced code %v, want 5.7.1", se.EnhancedCode)
			}

			addFault(t, e, acme, map[string]any{"stage": stage, "count": 1, "disconnect": true})
			if err := run(rcpt); err == nil || replyCode(err) != 0 {
				t.Errorf("disconnect: got %v, want the connection closed without a reply", err)
			}
			if got := emailCount(t, e, acme, "recipient="+rcpt); got != before {
				t.Errorf("stored %v emails, want %v: a faulted transaction stores nothing", got, before)
			}

			// A rule that only delays lets the mail through.
			addFault(t, e, acme, map[string]any{"stage": stage, "count": 1, "delay": delay.String()})
			start = time.Now()
			if err := run(rcpt); err != nil {
				t.Errorf("delay only: %v, want 250", err)
			}
			if took := time.Since(start); took < delay {
				t.Errorf("delay only: done after %v, want at least %v", took, delay)
			}
			if got := emailCount(t, e, acme, "recipient="+rcpt); got != before+1 {
				t.Errorf("after the delayed send: %v emails, want %v", got, before+1)
			}
		})
	}
	metrics := string(e.Do(t, http.MethodGet, "/metrics", "", nil).Body)
	for _, want := range []string{
		`mailsink_smtp_faults_total{action="disconnect",stage="message"} 1`,
		`mailsink_smtp_faults_total{action="delay",stage="auth"} 1`,
		`mailsink_smtp_faults_total{action="reply",stage="rcpt"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestFaultBDAT checks that the data stage answers the first BDAT chunk.
func TestFaultBDAT(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, acme, map[string]any{"stage": "data", "count": 1, "reply": map[string]any{"code": 452, "text": "4.3.1 Full"}})
	conn, err := net.Dial("tcp", e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	reply := func() string {
		t.Helper()
		var last string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("read reply: %v", err)
			}
			if last = line; len(line) < 4 || line[3] != '-' {
				return strings.TrimSpace(last)
			}
		}
	}
	reply()
	chunk := "Subject: bdat\r\n\r\nhi\r\n"
	for _, cmd := range []string{"EHLO client", "MAIL FROM:<app@example.com>", "RCPT TO:<bdat@acme.test>"} {
		fmt.Fprintf(conn, "%s\r\n", cmd)
		if got := reply(); !strings.HasPrefix(got, "250") {
			t.Fatalf("%s: %s", cmd, got)
		}
	}
	fmt.Fprintf(conn, "BDAT %d\r\n%s", len(chunk), chunk)
	if got := reply(); got != "452 4.3.1 Full" {
		t.Errorf("first chunk: got %q, want 452 4.3.1 Full", got)
	}
	if n := emailCount(t, e, acme, "recipient=bdat@acme.test"); n != 0 {
		t.Errorf("stored %v, want 0", n)
	}
}

// TestFaultProbability checks that a rule with probability 0.5 hits about
// half of 200 transactions.
func TestFaultProbability(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	addFault(t, e, acme, map[string]any{"stage": "rcpt", "probability": 0.5, "reply": map[string]any{"code": 451}})
	c, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hits := 0
	for range 200 {
		if err := c.Mail("app@example.com", nil); err != nil {
			t.Fatal(err)
		}
		if replyCode(c.Rcpt("p@acme.test", nil)) == 451 {
			hits++
		}
		if err := c.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	// With p = 0.5 the chance of falling outside 70..130 is below 1e-4.
	if hits < 70 || hits > 130 {
		t.Errorf("hits: %d of 200, want 70 to 130", hits)
	}
	t.Logf("probability 0.5: %d hits of 200", hits)
}

// TestFaultExpiry checks that a rule stops applying once expired.
func TestFaultExpiry(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	item := addFault(t, e, acme, map[string]any{"stage": "rcpt", "expiresIn": "700ms", "reply": map[string]any{"code": 450}})
	if item["expiresAt"] == nil {
		t.Errorf("rule %v: want expiresAt", item)
	}
	if got := replyCode(trySend(t, e.SMTP, "x@acme.test")); got != 450 {
		t.Errorf("before expiry: %d, want 450", got)
	}
	testenv.WaitFor(t, 5*time.Second, "the rule to expire", func() bool { return len(faultRules(t, e, acme)) == 0 })
	if err := trySend(t, e.SMTP, "x@acme.test"); err != nil {
		t.Errorf("after expiry: %v, want 250", err)
	}
}

// TestFaultAccounts checks that rules belong to one account: they never
// apply to another's mail, and another account's key cannot see or delete
// them.
func TestFaultAccounts(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	g := addFault(t, e, globex, map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 550}})
	if err := trySend(t, e.SMTP, "x@acme.test"); err != nil {
		t.Errorf("acme's mail under globex's rule: %v, want 250", err)
	}
	if got := replyCode(trySend(t, e.SMTP, "x@globex.test")); got != 550 {
		t.Errorf("globex's mail: %d, want 550", got)
	}
	if rules := faultRules(t, e, acme); len(rules) != 0 {
		t.Errorf("acme sees %v", rules)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/faults/"+g["id"].(string), acme, nil); resp.Status != http.StatusNotFound {
		t.Errorf("delete of globex's rule with acme's key: %d %s, want 404", resp.Status, resp.Body)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/faults", acme, nil); resp.Status != http.StatusNoContent {
		t.Errorf("delete all of acme: %d, want 204", resp.Status)
	}
	if rules := faultRules(t, e, globex); len(rules) != 1 {
		t.Fatalf("globex's rules after acme's delete all: %v", rules)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/faults/"+g["id"].(string), globex, nil); resp.Status != http.StatusNoContent {
		t.Errorf("delete: %d %s, want 204", resp.Status, resp.Body)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/faults/"+g["id"].(string), globex, nil); resp.Status != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", resp.Status)
	}
	if err := trySend(t, e.SMTP, "x@globex.test"); err != nil {
		t.Errorf("after delete: %v, want 250", err)
	}
	if resp := e.Do(t, http.MethodGet, "/v1/faults", "", nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("without a key: %d, want 401", resp.Status)
	}
}

// TestFaultValidation checks that bad rules get the validation envelope
// naming the field, and that an account's rules are bounded.
func TestFaultValidation(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	reply := map[string]any{"code": 451}
	tests := []struct {
		name  string
		body  any
		field string // "" for a form error
	}{
		{"no stage", map[string]any{"reply": reply}, "stage"},
		{"unknown stage", map[string]any{"stage": "helo", "reply": reply}, "stage"},
		{"no action", map[string]any{"stage": "rcpt"}, ""},
		{"code 399", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 399}}, "reply.code"},
		{"code 600", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 600}}, "reply.code"},
		{"code 250", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 250}}, "reply.code"},
		{"code string", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": "451"}}, "reply.code"},
		{"text with CRLF", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 451, "text": "a\r\n250 ok"}}, "reply.text"},
		{"text too long", map[string]any{"stage": "rcpt", "reply": map[string]any{"code": 451, "text": strings.Repeat("x", 201)}}, "reply.text"},
		{"reply not an object", map[string]any{"stage": "rcpt", "reply": 451}, "reply"},
		{"negative count", map[string]any{"stage": "rcpt", "reply": reply, "count": -1}, "count"},
		{"zero count", map[string]any{"stage": "rcpt", "reply": reply, "count": 0}, "count"},
		{"fractional count", map[string]any{"stage": "rcpt", "reply": reply, "count": 1.5}, "count"},
		{"probability 1.5", map[string]any{"stage": "rcpt", "reply": reply, "probability": 1.5}, "probability"},
		{"negative probability", map[string]any{"stage": "rcpt", "reply": reply, "probability": -0.1}, "probability"},
		{"bad delay", map[string]any{"stage": "rcpt", "delay": "soon"}, "delay"},
		{"negative delay", map[string]any{"stage": "rcpt", "delay": "-1s"}, "delay"},
		{"delay over the cap", map[string]any{"stage": "rcpt", "delay": "1h"}, "delay"},
		{"bad expiresIn", map[string]any{"stage": "rcpt", "reply": reply, "expiresIn": "1 day"}, "expiresIn"},
		{"bad recipient", map[string]any{"stage": "rcpt", "reply": reply, "recipient": "not an address"}, "recipient"},
		{"bad sender domain", map[string]any{"stage": "rcpt", "reply": reply, "sender": "@"}, "sender"},
		{"recipient at mail", map[string]any{"stage": "mail", "reply": reply, "recipient": "a@acme.test"}, "recipient"},
		{"sender at auth", map[string]any{"stage": "auth", "reply": reply, "sender": "@acme.test"}, "sender"},
		{"reply and disconnect", map[string]any{"stage": "rcpt", "reply": reply, "disconnect": true}, "disconnect"},
		{"disconnect not a boolean", map[string]any{"stage": "rcpt", "disconnect": "yes"}, "disconnect"},
		{"unknown field", map[string]any{"stage": "rcpt", "reply": reply, "stge": "x"}, "stge"},
		{"not an object", `[1]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.Do(t, http.MethodPost, "/v1/faults", acme, tt.body)
			if resp.Status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
			}
			v := resp.JSON(t)["error"].(map[string]any)
			fields := v["fieldErrors"].(map[string]any)
			if tt.field == "" && len(v["formErrors"].([]any)) == 0 {
				t.Errorf("want a form error: %s", resp.Body)
			}
			if tt.field != "" && fields[tt.field] == nil {
				t.Errorf("want a field error for %s: %s", tt.field, resp.Body)
			}
		})
	}
	if rules := faultRules(t, e, acme); len(rules) != 0 {
		t.Fatalf("bad rules were stored: %v", rules)
	}
	if resp := e.Do(t, http.MethodDelete, "/v1/faults/not-a-uuid", acme, nil); resp.Status != http.StatusBadRequest {
		t.Errorf("delete with a malformed id: %d, want 400", resp.Status)
	}
	for i := range 100 {
		addFault(t, e, acme, map[string]any{"stage": "rcpt", "sender": fmt.Sprintf("s%d@example.com", i), "reply": reply})
	}
	resp := e.Do(t, http.MethodPost, "/v1/faults", acme, map[string]any{"stage": "rcpt", "reply": reply})
	if resp.Status != http.StatusConflict {
		t.Errorf("rule 101: %d %s, want 409", resp.Status, resp.Body)
	}
}
