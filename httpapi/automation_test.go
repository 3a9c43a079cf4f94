package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/eventhub"
	"github.com/mailsink/mailsink/internal/testenv"
)

// forEachBackendWith is forEachBackend with a configuration change.
func forEachBackendWith(t *testing.T, edit func(*config.Config), test func(t *testing.T, e *testenv.Env)) {
	t.Helper()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			test(t, testenv.Start(t, b, edit))
		})
	}
}

// get sends a GET with key in x-api-key (none when "") and returns the answer.
func get(t *testing.T, e *testenv.Env, path, key string) *testenv.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.BaseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	return e.Send(t, req)
}

func TestWaitReturnsTheEmailWhenItArrives(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		type result struct {
			resp    *testenv.Response
			elapsed time.Duration
		}
		done := make(chan result, 1)
		start := time.Now()
		go func() {
			resp := get(t, e, "/v1/emails?wait=30&recipient=late%40acme.test", acme)
			done <- result{resp, time.Since(start)}
		}()
		// The request is held: it has not answered while nothing matches.
		// Emails that do not match (other recipient, other account) do
		// not release it.
		testenv.WaitFor(t, 5*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
		create(t, e, acme, map[string]any{"recipient": "other@acme.test", "sender": "s@example.com"})
		create(t, e, globex, map[string]any{"recipient": "late@acme.test", "sender": "s@example.com"})
		select {
		case r := <-done:
			t.Fatalf("answered before a matching email: %d %s", r.resp.Status, r.resp.Body)
		default:
		}
		want := create(t, e, acme, map[string]any{"recipient": "late@acme.test", "sender": "s@example.com", "subject": "here"})
		r := <-done
		if r.resp.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.resp.Status, r.resp.Body)
		}
		items := r.resp.JSON(t)["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != want["id"] {
			t.Fatalf("items = %v, want the new email %v", items, want["id"])
		}
		if r.elapsed > 20*time.Second {
			t.Errorf("answered after %v, want well before the 30s wait", r.elapsed)
		}
	})
}

func TestWaitAnswersAtOnceOrTimesOut(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		old := create(t, e, acme, map[string]any{"recipient": "w@acme.test", "sender": "s@example.com"})
		// A match already there answers at once.
		start := time.Now()
		if items := list(t, e, acme, "wait=60&recipient=w%40acme.test"); len(items) != 1 || items[0]["id"] != old["id"] {
			t.Fatalf("items = %v", items)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v with a match already stored", d)
		}
		// since excludes it; the wait runs out with an empty page.
		since := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		start = time.Now()
		if items := list(t, e, acme, "wait=1&recipient=w%40acme.test&since="+since); len(items) != 0 {
			t.Fatalf("items = %v, want none", items)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("answered after %v, want the whole 1s wait", d)
		}
		if n := e.App.HeldRequests(); n != 0 {
			t.Errorf("%d requests still held after answering", n)
		}
	})
}

func TestWaitSince(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		create(t, e, acme, map[string]any{"recipient": "s1@acme.test", "sender": "s@example.com", "receivedAt": "2026-01-01T00:00:00.000Z"})
		newer := create(t, e, acme, map[string]any{"recipient": "s1@acme.test", "sender": "s@example.com", "receivedAt": "2026-01-02T00:00:00.000Z"})
		items := list(t, e, acme, "recipient=s1%40acme.test&since="+url.QueryEscape("2026-01-01T00:00:00+00:00"))
		if len(items) != 1 || items[0]["id"] != newer["id"] {
			t.Errorf("since keeps %v, want only the newer email", ids(items))
		}
	})
}

func TestWaitBadInput(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, tt := range []struct{ query, field string }{
			{"wait=0", "wait"}, {"wait=61", "wait"}, {"wait=abc", "wait"}, {"wait=1.5", "wait"}, {"wait=", "wait"},
			{"since=yesterday", "since"}, {"since=2026-01-01", "since"}, {"since=", "since"},
			{"wait=5&recipient=nope", "recipient"},
		} {
			wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails?"+tt.query, acme, nil), tt.field)
		}
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails?wait=5", "", nil), http.StatusUnauthorized)
	})
}

func TestWaitIsBoundedPerAccount(t *testing.T) {
	t.Parallel()
	forEachBackendWith(t, func(c *config.Config) { c.HTTP.MaxHeldPerAccount = 2 }, func(t *testing.T, e *testenv.Env) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.BaseURL+"/v1/emails?wait=60&recipient=never%40acme.test", nil)
				req.Header.Set("X-Api-Key", acme)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
		testenv.WaitFor(t, 5*time.Second, "two held requests", func() bool { return e.App.HeldRequests() == 2 })
		wantError(t, get(t, e, "/v1/emails?wait=60", acme), http.StatusTooManyRequests)
		// Another account has places of its own, and a request without
		// wait is never refused.
		if resp := get(t, e, "/v1/emails?wait=1", globex); resp.Status != http.StatusOK {
			t.Errorf("other account: %d %s", resp.Status, resp.Body)
		}
		list(t, e, acme, "")
		// Clients that go away free their places.
		cancel()
		wg.Wait()
		testenv.WaitFor(t, 5*time.Second, "the places to be freed", func() bool { return e.App.HeldRequests() == 0 })
		if resp := get(t, e, "/v1/emails?wait=1", acme); resp.Status != http.StatusOK {
			t.Errorf("after the clients left: %d %s", resp.Status, resp.Body)
		}
	})
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID, Event string
	Data      map[string]any
}

// sseStream reads events from an open event stream.
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
}

func openEvents(t *testing.T, e *testenv.Env, key string, header http.Header) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.BaseURL+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	s := &sseStream{resp: resp, events: make(chan sseEvent, 100)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &ev.Data)
			}
		}
	}()
	return s
}

func (s *sseStream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		s := openEvents(t, e, acme, nil)
		testenv.WaitFor(t, 5*time.Second, "the stream to be open", func() bool { return e.App.HeldRequests() == 1 })
		create(t, e, globex, map[string]any{"recipient": "x@globex.test", "sender": "s@example.com"})
		item := create(t, e, acme, map[string]any{"recipient": "ev@acme.test", "sender": "s@example.com", "subject": "events"})
		id := item["id"].(string)
		if resp := e.Do(t, http.MethodPatch, "/v1/emails/"+id, acme, map[string]any{"status": "archived"}); resp.Status != http.StatusOK {
			t.Fatalf("patch: %d", resp.Status)
		}
		if resp := e.Do(t, http.MethodDelete, "/v1/emails/"+id, acme, nil); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: %d", resp.Status)
		}

		created := s.next(t)
		if created.Event != "email.created" || created.Data["emailId"] != id || created.ID == "" {
			t.Fatalf("first event %+v, want email.created of %s (the other account's email must not show)", created, id)
		}
		if got := created.Data["item"].(map[string]any); got["subject"] != "events" || got["recipient"] != "ev@acme.test" {
			t.Errorf("created item = %v", got)
		}
		updated := s.next(t)
		if updated.Event != "email.updated" || updated.Data["item"].(map[string]any)["status"] != "archived" {
			t.Errorf("second event %+v, want email.updated with status archived", updated)
		}
		deleted := s.next(t)
		if deleted.Event != "email.deleted" || deleted.Data["emailId"] != id || deleted.Data["item"] != nil {
			t.Errorf("third event %+v, want email.deleted without item", deleted)
		}

		// Resuming after the first event replays the other two.
		r := openEvents(t, e, acme, http.Header{"Last-Event-Id": {created.ID}})
		for _, want := range []sseEvent{updated, deleted} {
			if got := r.next(t); got.ID != want.ID || got.Event != want.Event {
				t.Errorf("replayed %s %s, want %s %s", got.ID, got.Event, want.ID, want.Event)
			}
		}
	})
}

func TestEventStreamBadInput(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		wantError(t, get(t, e, "/v1/events", ""), http.StatusUnauthorized)
		wantError(t, get(t, e, "/v1/events", "wrong"), http.StatusUnauthorized)
		req, _ := http.NewRequest(http.MethodGet, e.BaseURL+"/v1/events", nil)
		req.Header.Set("X-Api-Key", acme)
		req.Header.Set("Last-Event-ID", "not-an-id")
		wantValidation(t, e.Send(t, req), "Last-Event-ID")
		wantValidation(t, get(t, e, "/v1/events?lastEventId=12", acme), "Last-Event-ID")
	})
}

const withAttachment = "From: App <app@example.com>\r\nTo: dl@acme.test\r\nSubject: report\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n" +
	"--b1\r\nContent-Type: text/csv; name=\"r\u00e9sum\u00e9.csv\"\r\nContent-Disposition: attachment; filename=\"report.csv\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\nYSxiCjEsMgo=\r\n--b1--\r\n"

func TestDownloads(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		item := create(t, e, acme, map[string]any{"recipient": "dl@acme.test", "sender": "app@example.com", "raw": withAttachment})
		id := item["id"].(string)

		raw := get(t, e, "/v1/emails/"+id+"/raw", acme)
		if raw.Status != http.StatusOK || string(raw.Body) != withAttachment {
			t.Fatalf("raw: %d, %d bytes, want the %d bytes sent", raw.Status, len(raw.Body), len(withAttachment))
		}
		if ct := raw.Header.Get("Content-Type"); ct != "message/rfc822" {
			t.Errorf("raw Content-Type %q", ct)
		}

		att := get(t, e, "/v1/emails/"+id+"/attachments/0", acme)
		if att.Status != http.StatusOK || string(att.Body) != "a,b\n1,2\n" {
			t.Fatalf("attachment: %d %q", att.Status, att.Body)
		}
		if ct := att.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			t.Errorf("attachment Content-Type %q, want text/csv", ct)
		}
		if cd := att.Header.Get("Content-Disposition"); cd != `attachment; filename=report.csv` {
			t.Errorf("attachment Content-Disposition %q", cd)
		}

		wantError(t, get(t, e, "/v1/emails/"+id+"/attachments/1", acme), http.StatusNotFound)
		wantValidation(t, get(t, e, "/v1/emails/"+id+"/attachments/x", acme), "index")
		wantValidation(t, get(t, e, "/v1/emails/"+id+"/attachments/-1", acme), "index")
		for _, path := range []string{"/raw", "/attachments/0"} {
			wantError(t, get(t, e, "/v1/emails/"+id+path, globex), http.StatusNotFound)
			wantError(t, get(t, e, "/v1/emails/"+id+path, ""), http.StatusUnauthorized)
			wantValidation(t, get(t, e, "/v1/emails/not-a-uuid"+path, acme), "emailId")
			wantError(t, get(t, e, "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab"+path, acme), http.StatusNotFound)
		}
	})
}

func TestBulkDelete(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for i := range 3 {
			create(t, e, acme, map[string]any{"recipient": "bulk@acme.test", "sender": "s@example.com", "subject": fmt.Sprint("b", i)})
		}
		keep := create(t, e, acme, map[string]any{"recipient": "keep@acme.test", "sender": "s@example.com"})
		theirs := create(t, e, globex, map[string]any{"recipient": "bulk@acme.test", "sender": "s@example.com"})

		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails", acme, nil), "")
		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails?all=yes", acme, nil), "all")
		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails?recipient=bad", acme, nil), "recipient")
		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails?recipient=bulk%40acme.test&limit=1", acme, nil), "limit")
		wantError(t, e.Do(t, http.MethodDelete, "/v1/emails?all=true", "", nil), http.StatusUnauthorized)
		if n := len(list(t, e, acme, "")); n != 4 {
			t.Fatalf("bad requests deleted something: %d emails left, want 4", n)
		}

		resp := e.Do(t, http.MethodDelete, "/v1/emails?recipient=BULK%40acme.test", acme, nil)
		if resp.Status != http.StatusOK || resp.JSON(t)["deleted"] != float64(3) {
			t.Fatalf("delete by recipient: %d %s, want deleted 3", resp.Status, resp.Body)
		}
		if items := list(t, e, acme, ""); len(items) != 1 || items[0]["id"] != keep["id"] {
			t.Errorf("left %v, want only %v", ids(items), keep["id"])
		}
		if items := list(t, e, globex, ""); len(items) != 1 || items[0]["id"] != theirs["id"] {
			t.Errorf("the other account's emails changed: %v", ids(items))
		}
		resp = e.Do(t, http.MethodDelete, "/v1/emails?all=true", acme, nil)
		if resp.Status != http.StatusOK || resp.JSON(t)["deleted"] != float64(1) {
			t.Fatalf("delete all: %d %s, want deleted 1", resp.Status, resp.Body)
		}
		if n := len(list(t, e, acme, "")); n != 0 {
			t.Errorf("%d emails left after all=true", n)
		}
	})
}

// TestEventStreamUnderConcurrentWrites patches one email from several
// clients at once and checks that the stream delivers every event, in
// increasing id order.
func TestEventStreamUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		item := create(t, e, acme, map[string]any{"recipient": "busy@acme.test", "sender": "s@example.com"})
		id := item["id"].(string)
		s := openEvents(t, e, acme, nil)
		testenv.WaitFor(t, 5*time.Second, "the stream to be open", func() bool { return e.App.HeldRequests() == 1 })
		const writers, each = 4, 20
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					e.Do(t, http.MethodPatch, "/v1/emails/"+id, acme, map[string]any{"notes": fmt.Sprint(w, "-", i)})
				}
			}()
		}
		wg.Wait()
		var last string
		for i := 0; i < writers*each; {
			ev := s.next(t)
			if last != "" && !eventIDLess(last, ev.ID) {
				t.Fatalf("event %s after %s", ev.ID, last)
			}
			last = ev.ID
			if ev.Event == "email.updated" {
				i++
			}
		}
	})
}

func eventIDLess(a, b string) bool {
	ia, _ := eventhub.ParseID(a)
	ib, _ := eventhub.ParseID(b)
	return ia.Less(ib)
}
