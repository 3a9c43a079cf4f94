package smtpd_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// send delivers raw over SMTP and returns the first error, if any.
func send(t *testing.T, addr string, auth sasl.Client, from string, to []string, raw string) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	if err := c.Hello("test.example"); err != nil {
		return err
	}
	if auth != nil {
		if err := c.Auth(auth); err != nil {
			return err
		}
	}
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	for _, r := range to {
		if err := c.Rcpt(r, nil); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(raw)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// wantCode asserts an SMTP error with code and enhanced code.
func wantCode(t *testing.T, err error, code int, enhanced smtp.EnhancedCode) {
	t.Helper()
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want SMTP %d %v", err, code, enhanced)
	}
	if se.Code != code || se.EnhancedCode != enhanced {
		t.Fatalf("SMTP %d %v %q, want %d %v", se.Code, se.EnhancedCode, se.Message, code, enhanced)
	}
}

// items lists an account's emails through the API.
func items(t *testing.T, e *testenv.Env, key, query string) []map[string]any {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails?limit=100&"+query, key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("list: %d %s", resp.Status, resp.Body)
	}
	var out []map[string]any
	for _, it := range resp.JSON(t)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func recipients(list []map[string]any) []string {
	var out []string
	for _, it := range list {
		out = append(out, it["recipient"].(string))
	}
	sort.Strings(out)
	return out
}

func rawOf(t *testing.T, e *testenv.Env, key, id string) string {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails/"+id, key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("get %s: %d %s", id, resp.Status, resp.Body)
	}
	return resp.JSON(t)["item"].(map[string]any)["body"].(map[string]any)["raw"].(string)
}

const message = "From: App <app@example.com>\r\nTo: qa@acme.test\r\nSubject: Hello\r\nMessage-ID: <m1@example.com>\r\n\r\nHi there.\r\n.leading dot\r\n"

func forEachBackend(t *testing.T, edit func(*config.Config), test func(t *testing.T, e *testenv.Env)) {
	t.Helper()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			test(t, testenv.Start(t, b, edit))
		})
	}
}

func TestEHLOAdvertises(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		conn, err := net.Dial("tcp", e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tp := textproto.NewConn(conn)
		if _, _, err := tp.ReadResponse(220); err != nil {
			t.Fatal(err)
		}
		tp.PrintfLine("EHLO test.example")
		_, msg, err := tp.ReadResponse(250)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"PIPELINING", "8BITMIME", "SMTPUTF8", "SIZE\n", "AUTH PLAIN LOGIN"} {
			if !strings.Contains(msg, want) {
				t.Errorf("EHLO reply lacks %q:\n%s", want, msg)
			}
		}
	})
}

func TestRoutingByDomain(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		rcpts := []string{"qa@acme.test", "dev@mail.acme.test", "ops@globex.test", "QA@acme.test"}
		if err := send(t, e.SMTP, nil, "app@example.com", rcpts, message); err != nil {
			t.Fatal(err)
		}
		acme := items(t, e, testenv.AcmeKey, "")
		if got, want := recipients(acme), []string{"dev@mail.acme.test", "qa@acme.test"}; !reflect.DeepEqual(got, want) {
			t.Errorf("acme recipients = %v, want %v (one email per distinct recipient)", got, want)
		}
		globex := items(t, e, testenv.GlobexKey, "")
		if got, want := recipients(globex), []string{"ops@globex.test"}; !reflect.DeepEqual(got, want) {
			t.Errorf("globex recipients = %v, want %v", got, want)
		}
		for _, it := range acme {
			if it["sender"] != "app@example.com" || it["subject"] != "Hello" || it["messageId"] != "m1@example.com" ||
				it["rawSize"].(float64) != float64(len(message)) {
				t.Errorf("stored summary %v", it)
			}
			if raw := rawOf(t, e, testenv.AcmeKey, it["id"].(string)); raw != message {
				t.Errorf("raw not byte-exact:\n%q\nwant\n%q", raw, message)
			}
		}
		err := send(t, e.SMTP, nil, "app@example.com", []string{"nobody@unknown.example"}, message)
		wantCode(t, err, 550, smtp.EnhancedCode{5, 1, 1})
	})
}

func TestRoutingByAuth(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		// AUTH puts every recipient, whatever its domain, in the key's account.
		plain := sasl.NewPlainClient("", "anyone", testenv.GlobexKey)
		if err := send(t, e.SMTP, plain, "app@example.com", []string{"qa@acme.test", "x@unknown.example"}, message); err != nil {
			t.Fatal(err)
		}
		if got := recipients(items(t, e, testenv.GlobexKey, "")); !reflect.DeepEqual(got, []string{"qa@acme.test", "x@unknown.example"}) {
			t.Errorf("globex got %v", got)
		}
		if got := items(t, e, testenv.AcmeKey, ""); len(got) != 0 {
			t.Errorf("acme got %v, want nothing", recipients(got))
		}
		login := sasl.NewLoginClient("anyone", testenv.AcmeKey)
		if err := send(t, e.SMTP, login, "app@example.com", []string{"y@unknown.example"}, message); err != nil {
			t.Fatal(err)
		}
		if got := recipients(items(t, e, testenv.AcmeKey, "")); !reflect.DeepEqual(got, []string{"y@unknown.example"}) {
			t.Errorf("acme via LOGIN got %v", got)
		}
		err := send(t, e.SMTP, sasl.NewPlainClient("", "u", "wrong-key"), "app@example.com", []string{"qa@acme.test"}, message)
		wantCode(t, err, 535, smtp.EnhancedCode{5, 7, 8})
		err = send(t, e.SMTP, sasl.NewLoginClient("u", "wrong-key"), "app@example.com", []string{"qa@acme.test"}, message)
		wantCode(t, err, 535, smtp.EnhancedCode{5, 7, 8})
	})
}

func TestSingleAccountTakesAnyRecipient(t *testing.T) {
	t.Parallel()
	single := func(c *config.Config) {
		c.Accounts = []config.Account{{ID: config.DeriveAccountID("default"), Slug: "default", Name: "Default",
			KeyDigests: [][32]byte{config.Digest("only-key")}}}
	}
	forEachBackend(t, single, func(t *testing.T, e *testenv.Env) {
		if err := send(t, e.SMTP, nil, "app@example.com", []string{"a@anything.example", "b@else.io"}, message); err != nil {
			t.Fatal(err)
		}
		if got := recipients(items(t, e, "only-key", "")); !reflect.DeepEqual(got, []string{"a@anything.example", "b@else.io"}) {
			t.Errorf("default account got %v", got)
		}
	})
}

func TestSenderAndRecipientRules(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		// Empty MAIL FROM: the From header decides.
		if err := send(t, e.SMTP, nil, "", []string{"bounce@acme.test"}, message); err != nil {
			t.Fatal(err)
		}
		// A MAIL FROM that breaks the address rule: the From header decides too.
		if err := send(t, e.SMTP, nil, "root@localhost", []string{"local@acme.test"}, message); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"recipient=bounce@acme.test", "recipient=local@acme.test"} {
			got := items(t, e, testenv.AcmeKey, q)
			if len(got) != 1 || got[0]["sender"] != "app@example.com" {
				t.Errorf("%s: %v, want sender app@example.com from the header", q, got)
			}
		}
		// Neither is an address: refused, naming the address and the rule.
		noFrom := "From: nobody\r\nTo: qa@acme.test\r\n\r\nx\r\n"
		wantCode(t, send(t, e.SMTP, nil, "", []string{"qa@acme.test"}, noFrom), 550, smtp.EnhancedCode{5, 1, 7})
		localFrom := "From: App <app@localhost>\r\nTo: qa@acme.test\r\n\r\nx\r\n"
		err := send(t, e.SMTP, nil, "", []string{"qa@acme.test"}, localFrom)
		wantCode(t, err, 550, smtp.EnhancedCode{5, 1, 7})
		if want := `Sender address <app@localhost> (the From header; the envelope sender is empty) is not accepted: the domain "localhost" has no dot`; !strings.Contains(err.Error(), want) {
			t.Errorf("DATA refusal: %v, want %q", err, want)
		}
		// A recipient that breaks the address rule is refused at RCPT.
		for _, bad := range []string{"user@localhost", "a..b@acme.test", ".a@acme.test"} {
			wantCode(t, send(t, e.SMTP, nil, "app@example.com", []string{bad}, message), 550, smtp.EnhancedCode{5, 1, 3})
		}
		if n := len(items(t, e, testenv.AcmeKey, "")); n != 2 {
			t.Errorf("stored %d emails, want 2", n)
		}
	})
}

func TestMessageSize(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(c *config.Config) { c.MaxMessageBytes = 2000 }, func(t *testing.T, e *testenv.Env) {
		head := "From: app@example.com\r\nTo: qa@acme.test\r\n\r\n"
		fits := head + strings.Repeat("a", 2000-len(head)-2) + "\r\n"
		if err := send(t, e.SMTP, nil, "app@example.com", []string{"qa@acme.test"}, fits); err != nil {
			t.Fatalf("message of exactly the limit: %v", err)
		}
		onePast := head + strings.Repeat("a", 2001-len(head)-2) + "\r\n"
		wantCode(t, send(t, e.SMTP, nil, "app@example.com", []string{"qa@acme.test"}, onePast), 552, smtp.EnhancedCode{5, 3, 4})
		tooBig := head + strings.Repeat("a", 3000) + "\r\n"
		wantCode(t, send(t, e.SMTP, nil, "app@example.com", []string{"qa@acme.test"}, tooBig), 552, smtp.EnhancedCode{5, 3, 4})

		// A declared SIZE over the limit is refused at MAIL FROM.
		conn, err := net.Dial("tcp", e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tp := textproto.NewConn(conn)
		tp.ReadResponse(220)
		tp.PrintfLine("EHLO x.example")
		// go-smtp v0.25.1 would refuse a message of exactly the size it
		// announces, so none is announced (see New).
		if _, ehlo, _ := tp.ReadResponse(250); !strings.Contains(ehlo, "SIZE\n") {
			t.Errorf("EHLO does not advertise SIZE:\n%s", ehlo)
		}
		for _, size := range []string{"2001", "999999"} {
			tp.PrintfLine("MAIL FROM:<app@example.com> SIZE=%s", size)
			if code, msg, _ := tp.ReadResponse(250); code != 552 {
				t.Errorf("MAIL FROM SIZE=%s: %d %s, want 552", size, code, msg)
			}
		}
		tp.PrintfLine("MAIL FROM:<app@example.com> SIZE=2000")
		if code, msg, _ := tp.ReadResponse(250); code != 250 {
			t.Errorf("MAIL FROM SIZE=2000: %d %s, want 250", code, msg)
		}
		// The same limit for BDAT: one byte over is refused and the
		// session goes on; exactly the limit, in two chunks, is stored.
		cmd(t, tp, "RCPT TO:<qa@acme.test>", 250)
		fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(onePast), onePast)
		tp.W.Flush()
		if code, msg, _ := tp.ReadResponse(250); code != 552 {
			t.Errorf("BDAT one byte over the limit: %d %s, want 552", code, msg)
		}
		cmd(t, tp, "NOOP", 250)
		cmd(t, tp, "MAIL FROM:<app@example.com>", 250)
		cmd(t, tp, "RCPT TO:<qa@acme.test>", 250)
		fmt.Fprintf(tp.W, "BDAT 1000\r\n%s", fits[:1000])
		tp.W.Flush()
		if code, msg, err := tp.ReadResponse(250); err != nil {
			t.Fatalf("BDAT 1000: %d %s %v", code, msg, err)
		}
		fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(fits)-1000, fits[1000:])
		tp.W.Flush()
		if code, msg, _ := tp.ReadResponse(250); code != 250 {
			t.Errorf("BDAT of exactly the limit: %d %s, want 250", code, msg)
		}
		if n := len(items(t, e, testenv.AcmeKey, "")); n != 2 {
			t.Errorf("stored %d emails, want 2", n)
		}
	})
}

func TestPipelinedSession(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		// Several messages in one connection, all commands pipelined.
		conn, err := net.Dial("tcp", e.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		var b strings.Builder
		b.WriteString("EHLO pipe.example\r\n")
		for i := 0; i < 3; i++ {
			b.WriteString("MAIL FROM:<app@example.com>\r\nRCPT TO:<pipe@acme.test>\r\nDATA\r\n")
			b.WriteString("Subject: pipelined\r\n\r\nbody\r\n.\r\n")
		}
		b.WriteString("QUIT\r\n")
		conn.Write([]byte(b.String()))
		var codes []string
		tp := textproto.NewReader(r)
		for {
			line, err := tp.ReadLine()
			if err != nil {
				break
			}
			if len(line) >= 4 && line[3] == ' ' {
				codes = append(codes, line[:3])
			}
		}
		want := []string{"220", "250", "250", "250", "354", "250", "250", "250", "354", "250", "250", "250", "354", "250", "221"}
		if !reflect.DeepEqual(codes, want) {
			t.Errorf("replies %v, want %v", codes, want)
		}
		if n := len(items(t, e, testenv.AcmeKey, "recipient=pipe@acme.test")); n != 3 {
			t.Errorf("stored %d, want 3", n)
		}
	})
}

func TestLongLinesAreKept(t *testing.T) {
	t.Parallel()
	forEachBackend(t, nil, func(t *testing.T, e *testenv.Env) {
		raw := "From: app@example.com\r\nTo: qa@acme.test\r\nSubject: long\r\nContent-Type: text/html\r\n\r\n<p>" +
			strings.Repeat("x", 100_000) + "</p>\r\n"
		if err := send(t, e.SMTP, nil, "app@example.com", []string{"qa@acme.test"}, raw); err != nil {
			t.Fatalf("message with a 100 KB line: %v", err)
		}
		list := items(t, e, testenv.AcmeKey, "")
		if len(list) != 1 {
			t.Fatalf("stored %d emails, want 1", len(list))
		}
		if got := rawOf(t, e, testenv.AcmeKey, list[0]["id"].(string)); got != raw {
			t.Errorf("raw differs from what was sent (%d bytes, want %d)", len(got), len(raw))
		}
	})
}

// Address refusals come at MAIL or RCPT, say which address and why, and
// non-ASCII addresses get RFC 6531's 553 5.6.7 with or without SMTPUTF8.
func TestAddressRefusalsOverSMTP(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	c, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	err = c.Mail("jörg@example.com", &smtp.MailOptions{UTF8: true})
	wantCode(t, err, 553, smtp.EnhancedCode{5, 6, 7})
	if !strings.Contains(err.Error(), "Sender address <j\\xC3\\xB6rg@example.com>") {
		t.Errorf("MAIL: %v", err)
	}
	if err := c.Mail("app@example.com", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rcpt     string
		code     int
		enhanced smtp.EnhancedCode
		want     string
	}{
		{"josé@acme.test", 553, smtp.EnhancedCode{5, 6, 7}, "non-ASCII"},
		{"user@localhost", 550, smtp.EnhancedCode{5, 1, 3}, `<user@localhost> is not accepted: the domain "localhost" has no dot`},
		{"qa@nowhere.test", 550, smtp.EnhancedCode{5, 1, 1}, "<qa@nowhere.test>"},
	} {
		err := c.Rcpt(tc.rcpt, nil)
		wantCode(t, err, tc.code, tc.enhanced)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RCPT %s: %v, want %q", tc.rcpt, err, tc.want)
		}
	}
}
