package smtpd_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// chunk and firstPart are the room a session takes in the SMTP buffer
// budget for its first 64 KiB buffer, and for the whole first MiB of a
// message that goes on past it (17 buffers).
const (
	chunk     = 64 << 10
	firstPart = 17 * chunk
)

// slowSender starts a message from the client address local and sends size
// bytes of it; then, until stop is closed, a byte every 100ms, within the
// read timeout, so that the session holds what it has read.
func slowSender(t *testing.T, addr, local string, size int, stop chan struct{}) {
	t.Helper()
	tp, code, msg := greetFrom(t, addr, local)
	if code != 220 {
		t.Fatalf("greeting from %s: %d %q", local, code, msg)
	}
	for _, c := range []struct {
		line string
		code int
	}{{"EHLO slow.example", 250}, {"MAIL FROM:<a@example.com>", 250}, {"RCPT TO:<held@acme.test>", 250}, {"DATA", 354}} {
		cmd(t, tp, c.line, c.code)
	}
	go func() {
		tp.W.WriteString("Subject: held\r\n\r\n" + strings.Repeat("y", size))
		tp.W.Flush()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				tp.W.WriteString("y")
				tp.W.Flush()
			}
		}
	}()
}

// sendWhole sends a whole message of size bytes from local, with DATA or
// in one BDAT chunk, in the background and reports the reply to its end,
// and the time from the start to it, on the channel.
func sendWhole(t *testing.T, addr, local string, size int, bdat bool) <-chan reply {
	t.Helper()
	out := make(chan reply, 1)
	tp, code, msg := greetFrom(t, addr, local)
	if code != 220 {
		t.Fatalf("greeting from %s: %d %q", local, code, msg)
	}
	for _, c := range []struct {
		line string
		code int
	}{{"EHLO whole.example", 250}, {"MAIL FROM:<a@example.com>", 250}, {"RCPT TO:<whole@acme.test>", 250}} {
		cmd(t, tp, c.line, c.code)
	}
	msg = "Subject: whole\r\n\r\n" + strings.Repeat("z", size) + "\r\n"
	if bdat {
		msg = "BDAT " + strconv.Itoa(len(msg)) + " LAST\r\n" + msg
	} else {
		cmd(t, tp, "DATA", 354)
		msg += ".\r\n"
	}
	go func() {
		start := time.Now()
		tp.W.WriteString(msg)
		tp.W.Flush()
		code, msg, err := tp.ReadResponse(0)
		r := reply{code: code, msg: msg, err: err, after: time.Since(start)}
		if err == nil {
			tp.PrintfLine("QUIT") // the session goes on after a refusal
			r.quit, _, _ = tp.ReadResponse(0)
		}
		out <- r
	}()
	return out
}

type reply struct {
	code, quit int
	msg        string
	err        error
	after      time.Duration
}

// Concurrent senders of large messages (DATA and BDAT) from two client
// addresses hold at most their shares of the SMTP buffer budget (an eighth each), measured by
// the budget itself; a third client's message is stored meanwhile, and the
// senders that find no room are answered 451 4.3.2 after the read timeout,
// their sessions going on (issue 29: every connection kept the first MiB it
// was sent, so two addresses held about 1 GB).
func TestLargeSendersHoldTheirShareOfMemory(t *testing.T) {
	t.Parallel()
	const total = 16 << 20 // the least allowed; a share is 2 MiB
	const readTimeout = 2 * time.Second
	e := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) {
		c.SMTP.MaxBufferedBytes = total
		c.SMTP.ReadTimeout = readTimeout
		c.SMTP.LimitLoopback = true // the senders are loopback addresses
	})
	budget := e.App.SMTPBuffers()
	var mu sync.Mutex
	most := int64(0)
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			mu.Lock()
			most = max(most, budget.Used())
			mu.Unlock()
			select {
			case <-sampling:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	attackers := []string{"127.0.0.2", "127.0.0.3"}

	// One session from each address holds its whole first MiB, reading it
	// slowly.
	for _, a := range attackers {
		slowSender(t, e.SMTP, a, 700_000, stop)
	}
	testenv.WaitFor(t, 20*time.Second, "both slow senders to hold their first MiB", func() bool { return budget.Used() == 2*firstPart })

	// Two more large messages from each address: each session takes its
	// first chunk, then finds no room in its address's share.
	var waiters []<-chan reply
	for _, bdat := range []bool{false, true} {
		for _, a := range attackers {
			waiters = append(waiters, sendWhole(t, e.SMTP, a, 300_000, bdat))
		}
	}
	testenv.WaitFor(t, 20*time.Second, "every session to hold its first chunk", func() bool { return budget.Used() == 2*(firstPart+2*chunk) })

	// Another client is not held up.
	body := "Subject: other\r\n\r\n" + strings.Repeat(strings.Repeat("o", 98)+"\r\n", 3000)
	if err := send(t, e.SMTP, nil, "a@example.com", []string{"other@acme.test"}, body); err != nil {
		t.Fatalf("another client's message while two addresses hold their shares: %v", err)
	}
	if n := len(items(t, e, testenv.AcmeKey, "recipient=other@acme.test")); n != 1 {
		t.Errorf("%d emails stored for the other client, want 1", n)
	}

	for i, w := range waiters {
		r := <-w
		if r.err != nil || r.code != 451 || !strings.HasPrefix(r.msg, "4.3.2 ") {
			t.Errorf("sender %d without room: %d %q %v, want 451 4.3.2", i, r.code, r.msg, r.err)
		}
		if r.quit != 221 {
			t.Errorf("sender %d: QUIT after the refusal: %d, want 221 (the session goes on)", i, r.quit)
		}
		if r.after < readTimeout || r.after > 10*readTimeout {
			t.Errorf("sender %d was refused after %v, want about the read timeout", i, r.after)
		}
	}
	close(sampling)
	<-sampled
	if used := budget.Used(); used != 2*firstPart {
		t.Errorf("room held %d once the others were refused, want the slow senders' %d", used, 2*firstPart)
	}
	// Two shares, and for a moment the other client's first MiB and its
	// copy.
	if limit := int64(2*(total/8) + firstPart + len(body)); most > limit {
		t.Errorf("room held at most %d, want at most %d", most, limit)
	}
	if n := len(items(t, e, testenv.AcmeKey, "recipient=whole@acme.test")); n != 0 {
		t.Errorf("%d emails stored from senders refused, want none", n)
	}
}
