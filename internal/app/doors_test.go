package app_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/store"
)

// pop3Stat logs in to a POP3 listener with key and returns STAT's
// answer.
func pop3Stat(t *testing.T, c net.Conn, key string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	send := func(line string) string {
		t.Helper()
		if line != "" {
			if _, err := c.Write([]byte(line + "\r\n")); err != nil {
				t.Fatal(err)
			}
		}
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", line, err)
		}
		return strings.TrimSpace(l)
	}
	send("") // greeting
	send("USER anyone")
	if got := send("PASS " + key); !strings.HasPrefix(got, "+OK") {
		t.Fatalf("PASS: %q", got)
	}
	return send("STAT")
}

// The mail-client doors are wired with the SMTP certificate and the
// accounts: mail sent over SMTP is read over POP3, plain and implicit TLS,
// and over IMAP, where a FETCH marks it read for the API too.
func TestMailClientDoors(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"MAILSINK_API_KEY": "door-key", "MAILSINK_SMTP_TLS_AUTO": "mailsink.test",
		"MAILSINK_POP3_ADDR": "127.0.0.1:0", "MAILSINK_POP3S_ADDR": "127.0.0.1:0", "MAILSINK_IMAP_ADDR": "127.0.0.1:0"})
	if a.IMAPSAddr() != nil {
		t.Error("an implicit-TLS IMAP listener without MAILSINK_IMAPS_ADDR")
	}
	msg := "From: a@example.com\r\nTo: qa@example.com\r\nSubject: door\r\n\r\nhello\r\n"
	sc, err := smtp.Dial(a.SMTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if err := sc.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Rcpt("qa@example.com"); err != nil {
		t.Fatal(err)
	}
	wc, err := sc.Data()
	if err != nil {
		t.Fatal(err)
	}
	wc.Write([]byte(msg))
	if err := wc.Close(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("+OK 1 %d", len(msg))
	c, err := net.Dial("tcp", a.POP3Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := pop3Stat(t, c, "door-key"); got != want {
		t.Errorf("STAT over POP3: %q, want %q", got, want)
	}
	tc, err := tls.Dial("tcp", a.POP3SAddr().String(), &tls.Config{ServerName: "mailsink.test", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if got := pop3Stat(t, tc, "door-key"); got != want {
		t.Errorf("STAT over POP3S: %q, want %q", got, want)
	}
}

func TestIMAPDoorMarksRead(t *testing.T) {
	t.Parallel()
	a := startApp(t, map[string]string{"MAILSINK_API_KEY": "door-key", "MAILSINK_IMAP_ADDR": "127.0.0.1:0"})
	if err := smtp.SendMail(a.SMTPAddr().String(), nil, "a@example.com", []string{"qa@example.com"}, []byte("Subject: imap\r\n\r\nhi\r\n")); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", a.IMAPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	r.ReadString('\n')
	cmd := func(tag, line string) string {
		t.Helper()
		fmt.Fprintf(c, "%s %s\r\n", tag, line)
		var all string
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			all += l
			if strings.HasPrefix(l, tag+" ") {
				if !strings.HasPrefix(l, tag+" OK") {
					t.Fatalf("%s: %q", line, all)
				}
				return all
			}
		}
	}
	cmd("a", "LOGIN anyone door-key")
	if got := cmd("b", "SELECT INBOX"); !strings.Contains(got, "* 1 EXISTS") {
		t.Fatalf("SELECT: %q", got)
	}
	if got := cmd("c", "FETCH 1 (BODY[])"); !strings.Contains(got, "Subject: imap") {
		t.Fatalf("FETCH: %q", got)
	}
	emails, err := a.Store().ListEmails(context.Background(), store.ListQuery{AccountID: config.DeriveAccountID("default"), Limit: 10})
	if err != nil || len(emails) != 1 || !emails[0].Read {
		t.Errorf("after FETCH over IMAP the email is %+v, %v; want it read", emails, err)
	}
}
