package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/mailsink/mailsink/internal/testenv"
)

// sendSMTP delivers one message over a new SMTP connection.
func sendSMTP(t testing.TB, addr, from, to, raw string) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail(from, []string{to}, strings.NewReader(raw)); err != nil {
		t.Fatalf("send to %s: %v", to, err)
	}
	c.Quit()
}

// TestWaitWakesAcrossReplicas holds a list request with wait on replica B
// while the email arrives over SMTP at replica A, both on one Redis, and
// measures how long after A's 250 the held request answers.
func TestWaitWakesAcrossReplicas(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, nil)
	b := testenv.Start(t, shared, nil)

	const rounds = 20
	var afterAck, total []time.Duration
	for i := range rounds {
		rcpt := fmt.Sprintf("replica-%d@acme.test", i)
		got := make(chan *testenv.Response, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, b.BaseURL+"/v1/emails?wait=30&recipient="+rcpt, nil)
			req.Header.Set("Authorization", "Bearer "+acme)
			got <- b.Send(t, req)
		}()
		testenv.WaitFor(t, 5*time.Second, "the wait to be held on B", func() bool { return b.App.HeldRequests() == 1 })
		start := time.Now()
		sendSMTP(t, a.SMTP, "app@example.com", rcpt, "From: app@example.com\r\nTo: "+rcpt+"\r\nSubject: replica\r\n\r\nhi\r\n")
		acked := time.Now()
		resp := <-got
		done := time.Now()
		items, _ := resp.JSON(t)["items"].([]any)
		if resp.Status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["recipient"] != rcpt {
			t.Fatalf("round %d: %d %s, want the email sent to A", i, resp.Status, resp.Body)
		}
		afterAck = append(afterAck, done.Sub(acked))
		total = append(total, done.Sub(start))
		testenv.WaitFor(t, 5*time.Second, "B to release the wait", func() bool { return b.App.HeldRequests() == 0 })
	}
	slices.Sort(afterAck)
	slices.Sort(total)
	t.Logf("wait wake-up across replicas (%d rounds): after the SMTP 250 median %v max %v; from the start of the SMTP send median %v max %v",
		rounds, afterAck[rounds/2], afterAck[rounds-1], total[rounds/2], total[rounds-1])
}

// TestEventsAcrossReplicas streams events from replica B of changes made
// through replica A, and resumes on A from an event id B gave.
func TestEventsAcrossReplicas(t *testing.T) {
	t.Parallel()
	shared := testenv.SharedRedis(t)
	a := testenv.Start(t, shared, nil)
	b := testenv.Start(t, shared, nil)
	s := openEvents(t, b, acme, nil)
	testenv.WaitFor(t, 5*time.Second, "the stream to be open on B", func() bool { return b.App.HeldRequests() == 1 })
	first := create(t, a, acme, map[string]any{"recipient": "r1@acme.test", "sender": "s@example.com"})
	second := create(t, a, acme, map[string]any{"recipient": "r2@acme.test", "sender": "s@example.com"})
	ev1, ev2 := s.next(t), s.next(t)
	if ev1.Data["emailId"] != first["id"] || ev2.Data["emailId"] != second["id"] {
		t.Fatalf("events on B: %v, %v; want the creates of %v and %v on A", ev1.Data["emailId"], ev2.Data["emailId"], first["id"], second["id"])
	}
	r := openEvents(t, a, acme, http.Header{"Last-Event-Id": {ev1.ID}})
	if got := r.next(t); got.ID != ev2.ID {
		t.Errorf("resumed on A after %s: got %s, want %s", ev1.ID, got.ID, ev2.ID)
	}
}

// dialSMTP opens an SMTP client connection; the test closes it.
// sendData sends raw as the message of c's transaction and fails the test
// unless the server answers it with 250.
func sendData(t testing.TB, c *smtp.Client, raw string) {
	t.Helper()
	w, err := c.Data()
	if err != nil {
		t.Fatalf("DATA: %v", err)
	}
	io.WriteString(w, raw)
	if err := w.Close(); err != nil {
		t.Fatalf("end of DATA: %v", err)
	}
}

func dialSMTP(t testing.TB, addr string) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
