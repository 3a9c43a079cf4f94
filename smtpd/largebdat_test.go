package smtpd_test

import (
	"context"
	"fmt"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
	"github.com/mailsink/mailsink/store"
)

// largeSlotHeld starts a server with one large-transfer slot and fills it
// with a message held in the store; it returns the server, the store and a
// channel that gets the held sender's result once the test releases it.
func largeSlotHeld(t *testing.T, edit func(*config.Config)) (*testenv.Env, *holdingStore, chan error) {
	t.Helper()
	hs := &holdingStore{release: make(chan struct{})}
	backend := testenv.Backend{Name: "embedded", Open: func(t *testing.T) store.Store {
		hs.Store = testenv.OpenEmbedded(t)
		return hs
	}}
	e := testenv.Start(t, backend, func(c *config.Config) {
		c.SMTP.MaxLargeTransfers = 1
		if edit != nil {
			edit(c)
		}
	})
	big := "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("x", 98)+"\r\n", 15000)
	errs := make(chan error, 1)
	go func() { errs <- send(t, e.SMTP, nil, "a@example.com", []string{"big@acme.test"}, big) }()
	testenv.WaitFor(t, 20*time.Second, "the slot to be taken", func() bool { held, _ := hs.counts(); return held == 1 })
	return e, hs, errs
}

// cmd sends line and fails the test unless the reply has code want.
func cmd(t *testing.T, tp *textproto.Conn, line string, want int) {
	t.Helper()
	tp.PrintfLine("%s", line)
	if code, msg, err := tp.ReadResponse(want); err != nil {
		t.Fatalf("%s: %d %s %v", line, code, msg, err)
	}
}

// bdatLarge starts a transaction and sends one BDAT chunk of just over
// 1 MiB, so that the message needs a large-transfer slot while go-smtp goes
// on reading commands.
func bdatLarge(t *testing.T, tp *textproto.Conn, rcpt string) {
	t.Helper()
	cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
	cmd(t, tp, "RCPT TO:<"+rcpt+">", 250)
	chunk := strings.Repeat("y", 1<<20+1)
	fmt.Fprintf(tp.W, "BDAT %d\r\n%s", len(chunk), chunk)
	tp.W.Flush()
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("BDAT: %d %s %v", code, msg, err)
	}
}

// A BDAT transaction that ends (RSET, or QUIT and the connection closed)
// while its message waits for a large-transfer slot stops waiting: waits
// cannot pile up past the slots and the connection limit, and one that
// ends late cannot answer for a later transaction.
func TestEndedBDATStopsWaitingForASlot(t *testing.T) {
	t.Parallel()
	waiting := func(e *testenv.Env) float64 {
		return testutil.ToFloat64(e.App.Metrics().SMTPLarge.WithLabelValues("waiting"))
	}
	t.Run("RSET", func(t *testing.T) {
		t.Parallel()
		e, hs, errs := largeSlotHeld(t, nil)
		tp, _, _ := greet(t, e.SMTP)
		cmd(t, tp, "EHLO x.example", 250)
		for range 5 {
			bdatLarge(t, tp, "reset@acme.test")
			cmd(t, tp, "RSET", 250)
			testenv.WaitFor(t, 10*time.Second, "the wait to end", func() bool { return waiting(e) == 0 })
		}
		// The next transaction on the connection gets its own answer.
		cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
		cmd(t, tp, "RCPT TO:<after@acme.test>", 250)
		part := "Subject: after\r\n\r\nhello\r\n"
		fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(part), part)
		tp.W.Flush()
		if code, msg, err := tp.ReadResponse(250); err != nil {
			t.Fatalf("BDAT LAST after the resets: %d %s %v", code, msg, err)
		}
		if n := len(items(t, e, testenv.AcmeKey, "recipient=after@acme.test")); n != 1 {
			t.Errorf("%d emails stored for the transaction after the resets, want 1", n)
		}
		hs.release <- struct{}{}
		if err := <-errs; err != nil {
			t.Errorf("the held message: %v", err)
		}
		if n := len(items(t, e, testenv.AcmeKey, "recipient=reset@acme.test")); n != 0 {
			t.Errorf("%d reset messages stored", n)
		}
	})
	t.Run("QUIT", func(t *testing.T) {
		t.Parallel()
		e, hs, errs := largeSlotHeld(t, func(c *config.Config) { c.SMTP.MaxConnections = 4 })
		for range 5 {
			tp, code, _ := greet(t, e.SMTP)
			if code != 220 {
				t.Fatalf("greeted %d: the connections before were not closed", code)
			}
			cmd(t, tp, "EHLO x.example", 250)
			bdatLarge(t, tp, "quit@acme.test")
			cmd(t, tp, "QUIT", 221)
			tp.Close()
			testenv.WaitFor(t, 10*time.Second, "the wait to end", func() bool { return waiting(e) == 0 })
		}
		hs.release <- struct{}{}
		if err := <-errs; err != nil {
			t.Errorf("the held message: %v", err)
		}
	})
}

// A message waiting for a large-transfer slot when the server starts to
// drain gets 421 4.3.2 at once (the sender tries again later) instead of
// holding the shutdown up; the message that has the slot finishes.
func TestShutdownEndsWaitForASlot(t *testing.T) {
	t.Parallel()
	e, hs, errs := largeSlotHeld(t, nil)
	m := e.App.Metrics()
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO x.example", 250)
	cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
	cmd(t, tp, "RCPT TO:<waiting@acme.test>", 250)
	cmd(t, tp, "DATA", 354)
	go func() {
		// Blocks once the server stops reading; ends when it closes.
		fmt.Fprintf(tp.W, "Subject: waiting\r\n\r\n%s\r\n.\r\n", strings.Repeat(strings.Repeat("w", 98)+"\r\n", 15000))
		tp.W.Flush()
	}()
	testenv.WaitFor(t, 10*time.Second, "the message to wait for a slot", func() bool {
		return testutil.ToFloat64(m.SMTPLarge.WithLabelValues("waiting")) == 1
	})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- e.App.Shutdown(ctx)
	}()
	if code, msg, err := tp.ReadResponse(421); err != nil || !strings.HasPrefix(msg, "4.3.2") {
		t.Errorf("the waiting message: %d %q %v, want 421 4.3.2", code, msg, err)
	}
	hs.release <- struct{}{}
	if err := <-errs; err != nil {
		t.Errorf("the message with the slot: %v, want 250", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if n := testutil.ToFloat64(m.SMTPMessages.WithLabelValues("shutdown")); n != 1 {
		t.Errorf("messages refused by the shutdown: %v, want 1", n)
	}
}

// A BDAT transaction reset between chunks, then a new BDAT transaction on
// the same connection: go-smtp v0.25.1 answers the reset one's Data from a
// goroutine that nothing orders before the next transaction's BDAT (see
// bdat.go); with -race this fails unless Mail waits for that goroutine, and
// each transaction must get its own answer.
func TestBDATAfterReset(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO x.example", 250)
	for range 20 {
		cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
		cmd(t, tp, "RCPT TO:<reset@acme.test>", 250)
		tp.W.WriteString("BDAT 5\r\nfirst")
		tp.W.Flush()
		if code, msg, err := tp.ReadResponse(250); err != nil {
			t.Fatalf("BDAT: %d %s %v", code, msg, err)
		}
		cmd(t, tp, "RSET", 250)
	}
	cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
	cmd(t, tp, "RCPT TO:<kept@acme.test>", 250)
	part := "Subject: kept\r\n\r\nhello\r\n"
	fmt.Fprintf(tp.W, "BDAT %d LAST\r\n%s", len(part), part)
	tp.W.Flush()
	if code, msg, err := tp.ReadResponse(250); err != nil {
		t.Fatalf("BDAT LAST after the resets: %d %s %v", code, msg, err)
	}
	if n := len(items(t, e, testenv.AcmeKey, "")); n != 1 {
		t.Errorf("%d emails stored, want 1", n)
	}
}

// A BDAT LAST chunk cut short by the client's end (58 of 1,000 announced
// bytes) stores nothing: the client never got a 250 and will send the
// message again.
func TestCutShortBDATStoresNothing(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, nil)
	m := e.App.Metrics().SMTPMessages
	tp, _, _ := greet(t, e.SMTP)
	cmd(t, tp, "EHLO x.example", 250)
	cmd(t, tp, "MAIL FROM:<a@example.com>", 250)
	cmd(t, tp, "RCPT TO:<cut@acme.test>", 250)
	part := "Subject: cut short\r\n\r\n" + strings.Repeat("z", 36)
	fmt.Fprintf(tp.W, "BDAT 1000 LAST\r\n%s", part)
	tp.W.Flush()
	tp.Close()
	testenv.WaitFor(t, 10*time.Second, "the message to be handled", func() bool {
		return testutil.ToFloat64(m.WithLabelValues("accepted"))+testutil.ToFloat64(m.WithLabelValues("truncated")) > 0
	})
	if n := len(items(t, e, testenv.AcmeKey, "")); n != 0 {
		t.Errorf("%d emails stored from a cut-short chunk, want 0", n)
	}
}

// Slow senders cannot keep the large-transfer slots: a client that sends
// just over 1 MiB and then one byte at a time holds its slot only until it
// falls below the data-rate floor, and a normal large message then goes
// through, long before the slow one's data timeout.
func TestSlowSenderLosesItsSlot(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.SMTP.MaxLargeTransfers = 1
		c.SMTP.DataTimeout = 5 * time.Minute
	})
	large := e.App.Metrics().SMTPLarge
	slow, _, _ := greet(t, e.SMTP)
	cmd(t, slow, "EHLO slow.example", 250)
	cmd(t, slow, "MAIL FROM:<a@example.com>", 250)
	cmd(t, slow, "RCPT TO:<slow@acme.test>", 250)
	cmd(t, slow, "DATA", 354)
	fmt.Fprintf(slow.W, "Subject: slow\r\n\r\n%s", strings.Repeat(strings.Repeat("s", 98)+"\r\n", 11500))
	slow.W.Flush()
	testenv.WaitFor(t, 10*time.Second, "the slow message to hold the slot", func() bool {
		return testutil.ToFloat64(large.WithLabelValues("active")) == 1
	})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				if _, err := slow.W.WriteString("s"); err != nil || slow.W.Flush() != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	big := "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("x", 98)+"\r\n", 15000)
	if err := send(t, e.SMTP, nil, "a@example.com", []string{"big@acme.test"}, big); err != nil {
		t.Fatalf("the normal large message: %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the normal large message waited %v", d)
	}
	if n := len(items(t, e, testenv.AcmeKey, "recipient=big@acme.test")); n != 1 {
		t.Errorf("%d normal large messages stored, want 1", n)
	}
	if n := len(items(t, e, testenv.AcmeKey, "recipient=slow@acme.test")); n != 0 {
		t.Errorf("%d slow messages stored, want 0", n)
	}
}
