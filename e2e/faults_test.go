package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// smtpLoad is a few goroutines sending over SMTP, each message with a subject
// of its own, until stopped or until each has sent max messages. Every
// outcome is recorded, also of messages the test sends itself with send.
type smtpLoad struct {
	addr string
	name string
	stop chan struct{}
	wg   sync.WaitGroup
	sent atomic.Int64
	seq  atomic.Int64

	mu         sync.Mutex
	acked      []string // subjects of the messages that got 250
	tempFailed int      // messages refused with 451 4.3.0
	unexpected []error  // any other outcome
}

// startSMTPLoad starts workers goroutines. A worker stops at the first
// outcome other than 250 or 451 4.3.0 when stopOnError is set (a server
// that is going away), else it records it and goes on.
func startSMTPLoad(addr, name string, workers, max int, stopOnError bool) *smtpLoad {
	l := &smtpLoad{addr: addr, name: name, stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < max; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if err := l.send(); err != nil && !isTempFailure(err) && stopOnError {
					return
				}
			}
		}()
	}
	return l
}

// send delivers one message on a new connection and records the outcome of
// its DATA: the acknowledgement is the 250 after the data, whatever QUIT
// answers afterwards.
func (l *smtpLoad) send() error {
	subject := fmt.Sprintf("%s-%d", l.name, l.seq.Add(1))
	raw := "From: app@example.com\r\nTo: load@example.com\r\nSubject: " + subject + "\r\n\r\nbody\r\n"
	l.sent.Add(1)
	c, err := smtp.Dial(l.addr)
	if err == nil {
		err = c.SendMail("app@example.com", []string{"load@example.com"}, strings.NewReader(raw))
		if err == nil {
			c.Quit()
		}
		c.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked = append(l.acked, subject)
	case isTempFailure(err):
		l.tempFailed++
	default:
		l.unexpected = append(l.unexpected, fmt.Errorf("%s: %w", subject, err))
	}
	return err
}

// counts returns how many messages got 250 and how many 451 4.3.0 so far.
func (l *smtpLoad) counts() (acked, tempFailed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), l.tempFailed
}

// finish stops the workers and waits for them.
func (l *smtpLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// lost returns the acknowledged subjects that are not in stored.
func (l *smtpLoad) lost(stored map[string]int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost []string
	for _, s := range l.acked {
		if stored[s] == 0 {
			lost = append(lost, s)
		}
	}
	return lost
}

// TestRedisOutageDuringSMTPLoad runs mailsink on a private, durable Redis,
// kills Redis while several clients send over SMTP, and brings it back on
// the same port and directory. During the outage SMTP answers 451 4.3.0 and
// the API 503 with the error envelope (never 500); afterwards the same
// mailsink process recovers by itself, and every message that got 250 is
// listed.
func TestRedisOutageDuringSMTPLoad(t *testing.T) {
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	srv := startDurableRedis(t, port, dir)
	const key = "outage-key"
	p := startProcess(t, "MAILSINK_REDIS_URL=redis://127.0.0.1:"+port+"/0", "MAILSINK_API_KEY="+key)
	e := p.env()

	load := startSMTPLoad(p.SMTP, "outage", 4, 5000, false)
	stopped := false
	defer func() {
		if !stopped {
			load.finish()
		}
	}()
	testenv.WaitFor(t, 60*time.Second, "100 messages to be acknowledged before the outage", func() bool {
		acked, _ := load.counts()
		return acked >= 100
	})
	resp := e.Do(t, http.MethodGet, "/v1/emails?limit=1", key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("list before the outage: %d %s", resp.Status, resp.Body)
	}
	id := resp.JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)

	srv.kill() // the outage, while the clients are sending
	testenv.WaitFor(t, 30*time.Second, "the clients to get 451 4.3.0 during the outage", func() bool {
		_, temp := load.counts()
		return temp >= 4
	})
	if err := load.send(); !isTempFailure(err) {
		t.Errorf("a new message during the outage: %v, want 451 4.3.0", err)
	}
	wantErrorEnvelope(t, "GET /readyz during the outage", e.Do(t, http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable)
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/emails", nil},
		{http.MethodGet, "/v1/emails?subject=outage&status=received", nil},
		{http.MethodGet, "/v1/emails/" + id, nil},
		{http.MethodPatch, "/v1/emails/" + id, map[string]any{"status": "archived"}},
		{http.MethodDelete, "/v1/emails/" + id, nil},
		{http.MethodPost, "/v1/emails", map[string]any{"sender": "app@example.com", "recipient": "load@example.com", "subject": "created during the outage"}},
	} {
		wantErrorEnvelope(t, r.method+" "+r.path+" during the outage", e.Do(t, r.method, r.path, key, r.body), http.StatusServiceUnavailable)
	}
	req, _ := http.NewRequest(http.MethodPost, p.HTTP+"/v1/inbound", strings.NewReader("From: app@example.com\r\nTo: load@example.com\r\nSubject: inbound during the outage\r\n\r\nx\r\n"))
	req.Header.Set("Content-Type", "message/rfc822")
	req.Header.Set("Authorization", "Bearer "+key)
	wantErrorEnvelope(t, "POST /v1/inbound during the outage", e.Send(t, req), http.StatusServiceUnavailable)
	if resp := e.Do(t, http.MethodGet, "/healthz", "", nil); resp.Status != http.StatusOK {
		t.Errorf("GET /healthz during the outage: %d, want 200 (the process is up)", resp.Status)
	}
	ackedBefore, _ := load.counts()

	startDurableRedis(t, port, dir) // back on the same port with the same files
	restarted := time.Now()
	testenv.WaitFor(t, 30*time.Second, "GET /readyz to answer 200 after Redis is back", func() bool {
		return e.Do(t, http.MethodGet, "/readyz", "", nil).Status == http.StatusOK
	})
	testenv.WaitFor(t, 30*time.Second, "SMTP to answer 250 again after Redis is back", func() bool {
		return load.send() == nil
	})
	recovered := time.Since(restarted)
	testenv.WaitFor(t, 30*time.Second, "the clients to get 250 again", func() bool {
		acked, _ := load.counts()
		return acked > ackedBefore+20
	})
	load.finish()
	stopped = true
	if resp := e.Do(t, http.MethodGet, "/v1/emails/"+id, key, nil); resp.Status != http.StatusOK || resp.JSON(t)["item"].(map[string]any)["status"] != "received" {
		t.Errorf("the email the refused PATCH and DELETE named: %d %s, want it unchanged", resp.Status, resp.Body)
	}

	load.mu.Lock()
	for _, err := range load.unexpected {
		t.Errorf("unexpected SMTP outcome (want 250 or 451 4.3.0): %v", err)
	}
	load.mu.Unlock()
	stored := listSubjects(t, e, key)
	lost := load.lost(stored)
	for _, s := range lost {
		t.Errorf("acknowledged message %s is lost", s)
	}
	acked, temp := load.counts()
	storedLoad := 0
	for s := range stored {
		if strings.HasPrefix(s, "outage-") {
			storedLoad++
		}
	}
	t.Logf("mailsink recovered %v after Redis restarted", recovered.Round(time.Millisecond))
	figures("fault test (Redis outage): sent %d, acknowledged %d, 451s %d, stored %d, lost %d",
		load.sent.Load(), acked, temp, storedLoad, len(lost))
}

// TestSIGTERMDrainsInFlight sends SIGTERM to mailsink on the embedded store
// while clients send over SMTP and a few are in the middle of DATA: those
// finish with 250, new connections are refused, the process exits 0 within
// MAILSINK_SHUTDOWN_TIMEOUT, and after a restart every acknowledged message
// is stored.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	t.Parallel()
	const (
		key             = "sigterm-key"
		shutdownTimeout = 10 * time.Second
		slowClients     = 3
	)
	env := []string{"MAILSINK_DATA_DIR=" + t.TempDir(), "MAILSINK_API_KEY=" + key,
		"MAILSINK_SHUTDOWN_TIMEOUT=" + shutdownTimeout.String()}
	p := startProcess(t, env...)

	load := startSMTPLoad(p.SMTP, "sigterm", 3, 5000, true)
	stopped := false
	defer func() {
		if !stopped {
			load.finish()
		}
	}()
	testenv.WaitFor(t, 60*time.Second, "50 messages to be acknowledged before SIGTERM", func() bool {
		acked, _ := load.counts()
		return acked >= 50
	})

	// Slow clients: DATA accepted and half the message sent when SIGTERM
	// comes. The first half is larger than the client's write buffer, so
	// it is on the wire.
	half := strings.Repeat("first half of a slow message\r\n", 2000)
	type slow struct {
		c       *smtp.Client
		w       *smtp.DataCommand
		subject string
	}
	var slows []slow
	for i := 0; i < slowClients; i++ {
		c, err := smtp.Dial(p.SMTP)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		subject := fmt.Sprintf("slow-%d", i)
		if err := c.Mail("slow@example.com", nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Rcpt("load@example.com", nil); err != nil {
			t.Fatal(err)
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("From: slow@example.com\r\nSubject: " + subject + "\r\n\r\n" + half)); err != nil {
			t.Fatal(err)
		}
		slows = append(slows, slow{c: c, w: w, subject: subject})
	}

	// Idle clients: one between messages after EHLO, as a pooled sender
	// keeps its connection, and one that has only read the greeting. They
	// must not hold the shutdown up.
	idle, err := smtp.Dial(p.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if err := idle.Hello("pooled.example"); err != nil {
		t.Fatal(err)
	}
	mute, err := net.Dial("tcp", p.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	if _, err := bufio.NewReader(mute).ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	testenv.WaitFor(t, 5*time.Second, "new SMTP connections to be refused after SIGTERM", func() bool {
		c, err := net.DialTimeout("tcp", p.SMTP, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})

	var slowAcked []string
	for _, s := range slows {
		if _, err := s.w.Write([]byte("second half, sent after SIGTERM\r\n")); err != nil {
			t.Errorf("%s: writing the rest after SIGTERM: %v", s.subject, err)
			continue
		}
		if err := s.w.Close(); err != nil {
			t.Errorf("%s: in flight at SIGTERM: %v, want 250", s.subject, err)
			continue
		}
		slowAcked = append(slowAcked, s.subject)
		// A sender that reuses its connection is told to come back later.
		var se *smtp.SMTPError
		if err := s.c.Mail("slow@example.com", nil); !errors.As(err, &se) || se.Code != 421 {
			t.Errorf("%s: a new MAIL after SIGTERM: %v, want 421", s.subject, err)
		}
		if err := s.c.Quit(); err != nil {
			t.Errorf("%s: QUIT after SIGTERM: %v", s.subject, err)
		}
	}

	select {
	case <-p.exited:
	case <-time.After(shutdownTimeout + 10*time.Second):
		t.Fatalf("mailsink still runs %v after SIGTERM:\n%s", shutdownTimeout+10*time.Second, p.Output())
	}
	took := time.Since(signalled)
	if p.exitErr != nil {
		t.Errorf("mailsink exited with %v after SIGTERM, want status 0:\n%s", p.exitErr, p.Output())
	}
	if took > shutdownTimeout {
		t.Errorf("mailsink took %v to exit after SIGTERM, want at most MAILSINK_SHUTDOWN_TIMEOUT %v", took, shutdownTimeout)
	}
	if err := idle.Noop(); err == nil {
		t.Errorf("the idle connection still answers after mailsink exited")
	}
	load.finish()
	stopped = true
	load.mu.Lock()
	for _, err := range load.unexpected {
		// A client that connects while the listener closes sees a refused
		// or reset connection, or 421 when its MAIL comes after SIGTERM;
		// no other reply is expected.
		var se *smtp.SMTPError
		if errors.As(err, &se) && se.Code != 421 {
			t.Errorf("SMTP reply during shutdown: %v", err)
		}
	}
	load.acked = append(load.acked, slowAcked...)
	load.mu.Unlock()

	p2 := startProcess(t, env...)
	stored := listSubjects(t, p2.env(), key)
	lost := load.lost(stored)
	for _, s := range lost {
		t.Errorf("acknowledged message %s is lost", s)
	}
	acked, _ := load.counts()
	figures("shutdown test (SIGTERM, embedded store): sent %d, acknowledged %d (%d in DATA at SIGTERM), stored %d, lost %d, exit after %v",
		load.sent.Load()+int64(len(slows)), acked, len(slowAcked), len(stored), len(lost), took.Round(time.Millisecond))
}
