package smtpd_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// TestShutdownDrains checks that Shutdown lets a transaction under way
// finish, refuses a new one, and does not wait for idle connections.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)

	busy, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := busy.Mail("app@example.com", nil); err != nil {
		t.Fatal(err)
	}
	if err := busy.Rcpt("drain@acme.test", nil); err != nil {
		t.Fatal(err)
	}
	w, err := busy.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("Subject: drained\r\n\r\nfirst half\r\n")); err != nil {
		t.Fatal(err)
	}
	idle, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if err := idle.Hello("idle.example"); err != nil {
		t.Fatal(err)
	}
	again, err := smtp.Dial(e.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Hello("again.example"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- e.App.Shutdown(ctx)
	}()
	testenv.WaitFor(t, 5*time.Second, "the listener to refuse connections", func() bool {
		c, err := net.Dial("tcp", e.SMTP)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	var se *smtp.SMTPError
	if err := again.Mail("app@example.com", nil); !errors.As(err, &se) || se.Code != 421 {
		t.Errorf("MAIL while draining: %v, want 421", err)
	}
	if _, err := w.Write([]byte("second half\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("the transaction under way: %v, want 250", err)
	}
	if err := busy.Quit(); err != nil {
		t.Errorf("QUIT after the 250: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return in 15s")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Shutdown took %v with idle connections open, want well under its 10s timeout", took)
	}
	if err := idle.Noop(); err == nil {
		t.Error("the idle connection still answers after Shutdown")
	}
}
