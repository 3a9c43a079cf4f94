package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// The label filter, the before cursor, count and links.

// label sets the labels of an email of key's account through the API.
func label(t *testing.T, e *testenv.Env, key, id string, labels ...string) {
	t.Helper()
	if resp := e.Do(t, http.MethodPatch, "/v1/emails/"+id, key, map[string]any{"labels": labels}); resp.Status != http.StatusOK {
		t.Fatalf("PATCH labels: %d %s", resp.Status, resp.Body)
	}
}

func countOf(t *testing.T, e *testenv.Env, key, query string) float64 {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails/count?"+query, key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("count %q: status %d, want 200: %s", query, resp.Status, resp.Body)
	}
	body := resp.JSON(t)
	n, ok := body["count"].(float64)
	if !ok || len(body) != 1 {
		t.Fatalf("count %q: answer %s, want {\"count\": N}", query, resp.Body)
	}
	return n
}

func TestLabelBeforeAndCount(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		at := func(ms int) string { return fmt.Sprintf("2026-05-01T10:00:00.%03dZ", ms) }
		mk := func(rcpt string, ms int) string {
			return create(t, e, acme, map[string]any{"recipient": rcpt, "sender": "app@example.com", "receivedAt": at(ms)})["id"].(string)
		}
		a := mk("alice@acme.test", 1)
		b := mk("bob@acme.test", 2)
		c := mk("alice@acme.test", 3)
		d := mk("bob@acme.test", 4)
		label(t, e, acme, a, "signup", "Urgent")
		label(t, e, acme, c, "signup")
		label(t, e, acme, d, "signup ", "ünïcode & <b>")
		theirs := create(t, e, globex, map[string]any{"recipient": "alice@acme.test", "sender": "app@example.com"})["id"].(string)
		label(t, e, globex, theirs, "signup")

		tests := []struct {
			query string
			want  []string
		}{
			{"label=signup", []string{c, a}},
			{"label=Signup", nil},
			{"label=Urgent", []string{a}},
			{"label=signup%20", []string{d}},
			{"label=" + url.QueryEscape("ünïcode & <b>"), []string{d}},
			{"label=signup&recipient=alice@acme.test&limit=1&offset=1", []string{a}},
			{"label=signup&since=" + at(1), []string{c}},
			{"before=" + d, []string{c, b, a}},
			{"before=" + strings.ToUpper(d), []string{c, b, a}},
			{"before=" + c + "&limit=1", []string{b}},
			{"before=" + d + "&offset=1", []string{b, a}},
			{"before=" + d + "&recipient=alice@acme.test", []string{c, a}},
			{"before=" + c + "&label=signup", []string{a}},
			{"before=" + a, nil},
		}
		for _, tt := range tests {
			got := ids(list(t, e, acme, tt.query))
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("list %q = %v, want %v", tt.query, got, tt.want)
				}
			}
			// Count takes the same filters; paging is not one of them.
			if strings.Contains(tt.query, "limit") || strings.Contains(tt.query, "offset") {
				continue
			}
			if n := countOf(t, e, acme, tt.query); n != float64(len(tt.want)) {
				t.Errorf("count %q = %v, want %d", tt.query, n, len(tt.want))
			}
		}
		if n := countOf(t, e, acme, ""); n != 4 {
			t.Errorf("count = %v, want 4", n)
		}
		if n := countOf(t, e, globex, "label=signup"); n != 1 {
			t.Errorf("globex count label=signup = %v, want 1", n)
		}

		// Paging by the last id seen neither skips nor repeats while newer
		// mail arrives.
		var got []string
		page := list(t, e, acme, "limit=2")
		for len(page) > 0 {
			got = append(got, ids(page)...)
			mk("new@acme.test", 900+len(got))
			page = list(t, e, acme, "limit=2&before="+got[len(got)-1])
		}
		if want := []string{d, c, b, a}; !reflect.DeepEqual(got, want) {
			t.Errorf("paging by before while mail arrives = %v, want %v", got, want)
		}

		// Another account's id and an unknown one are 404 with the error
		// envelope.
		for _, path := range []string{
			"/v1/emails?before=" + theirs,
			"/v1/emails/count?before=" + theirs,
			"/v1/emails?before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab",
			"/v1/emails?before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab&label=x&subject=y",
			"/v1/emails/count?before=0190b6d2-7c3e-7a1b-8c2d-1234567890ab&status=archived",
		} {
			wantError(t, e.Do(t, http.MethodGet, path, acme, nil), http.StatusNotFound)
		}
	})
}

func TestLabelBeforeCountValidation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "a@acme.test", "sender": "s@example.com"})["id"].(string)
		bad := []struct{ query, field string }{
			{"label=", "label"},
			{"label=" + strings.Repeat("x", 65), "label"},
			{"label=" + strings.Repeat("é", 65), "label"},
			{"before=", "before"},
			{"before=nope", "before"},
			{"before=" + id + "x", "before"},
			{"before=123e4567-e89b-02d3-a456-426614174000", "before"},
			{"before=" + url.QueryEscape("../"+id), "before"},
			{"status=nope&label=", "label"},
		}
		for _, tt := range bad {
			wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails?"+tt.query, acme, nil), tt.field)
			wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails/count?"+tt.query, acme, nil), tt.field)
		}
		wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails?wait=1&before="+id, acme, nil), "wait")
		for _, q := range []string{"limit=1", "offset=0", "wait=1"} {
			wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails/count?"+q, acme, nil), strings.Split(q, "=")[0])
		}
		for _, q := range []string{"label=" + strings.Repeat("x", 64), "label=" + strings.Repeat("é", 64), "label=%20", "unknown=1"} {
			list(t, e, acme, q)
			countOf(t, e, acme, q)
		}
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/count", "", nil), http.StatusUnauthorized)
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/count", "wrong", nil), http.StatusUnauthorized)
		// count is not an email id, nor is an email id a count.
		wantValidation(t, e.Do(t, http.MethodPatch, "/v1/emails/count", acme, map[string]any{"status": "archived"}), "emailId")
		if resp := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil); resp.Status != http.StatusOK {
			t.Errorf("GET /v1/emails/%s = %d after adding /emails/count", id, resp.Status)
		}
	})
}

func TestBulkDeleteByLabel(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		var tagged []string
		for i := range 3 {
			id := create(t, e, acme, map[string]any{"recipient": "bulk@acme.test", "sender": "s@example.com"})["id"].(string)
			if i != 1 {
				label(t, e, acme, id, "old")
				tagged = append(tagged, id)
			}
		}
		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails?label=", acme, nil), "label")
		wantValidation(t, e.Do(t, http.MethodDelete, "/v1/emails?label=old&before="+tagged[0], acme, nil), "before")
		resp := e.Do(t, http.MethodDelete, "/v1/emails?label=OLD", acme, nil)
		if resp.Status != http.StatusOK || resp.JSON(t)["deleted"] != float64(0) {
			t.Fatalf("delete label=OLD: %d %s, want deleted 0", resp.Status, resp.Body)
		}
		resp = e.Do(t, http.MethodDelete, "/v1/emails?label=old", acme, nil)
		if resp.Status != http.StatusOK || resp.JSON(t)["deleted"] != float64(2) {
			t.Fatalf("delete label=old: %d %s, want deleted 2", resp.Status, resp.Body)
		}
		if n := countOf(t, e, acme, ""); n != 1 {
			t.Errorf("%v emails left, want 1", n)
		}
	})
}

func TestWaitWithLabel(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "w@acme.test", "sender": "s@example.com"})["id"].(string)
		done := make(chan []map[string]any, 1)
		go func() {
			resp := get(t, e, "/v1/emails?wait=30&label=ready", acme)
			var items []map[string]any
			if resp.Status == http.StatusOK {
				for _, it := range resp.JSON(t)["items"].([]any) {
					items = append(items, it.(map[string]any))
				}
			}
			done <- items
		}()
		// The held request wakes on the update event and finds the label.
		testenv.WaitFor(t, 5*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
		label(t, e, acme, id, "ready")
		if items := <-done; len(items) != 1 || items[0]["id"] != id {
			t.Errorf("wait&label=ready answered %v, want [%s]", ids(items), id)
		}
	})
}

func TestLinks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "l@acme.test", "sender": "s@example.com",
			"html": `<p><a href="https://acme.test/confirm?t=1&amp;u=2">Confirm  your
			 address</a> <a href="javascript:alert(1)">x</a> <a href="mailto:help@acme.test"><img alt=""></a></p>`,
			"text": "Confirm: https://acme.test/confirm?t=1&u=2\nUnsubscribe: https://acme.test/unsub."})["id"].(string)
		resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/links", acme, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("links: %d %s", resp.Status, resp.Body)
		}
		want := []any{
			map[string]any{"url": "https://acme.test/confirm?t=1&u=2", "text": "Confirm your address"},
			map[string]any{"url": "mailto:help@acme.test", "text": nil},
			map[string]any{"url": "https://acme.test/unsub", "text": nil},
		}
		if got := resp.JSON(t); !reflect.DeepEqual(got, map[string]any{"items": want}) {
			t.Errorf("links = %s\nwant items %v", resp.Body, want)
		}

		plain := create(t, e, acme, map[string]any{"recipient": "l@acme.test", "sender": "s@example.com"})["id"].(string)
		resp = e.Do(t, http.MethodGet, "/v1/emails/"+plain+"/links", acme, nil)
		if resp.Status != http.StatusOK || strings.TrimSpace(string(resp.Body)) != `{"items":[]}` {
			t.Errorf("links of an email without links = %d %s, want {\"items\":[]}", resp.Status, resp.Body)
		}

		wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails/nope/links", acme, nil), "emailId")
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/"+id+"/links", globex, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab/links", acme, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/"+id+"/links", "", nil), http.StatusUnauthorized)
		wantError(t, e.Do(t, http.MethodPost, "/v1/emails/"+id+"/links", acme, nil), http.StatusMethodNotAllowed)
	})
}

func TestCodes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "c@acme.test", "sender": "s@example.com",
			"subject": "482913 is your sign-in code",
			"html":    `<p>Your verification code:</p><table><tr><td>Code</td><td><b>ABC-DEF</b></td></tr></table>`,
			"text":    "Order 55555 shipped on 2024-05-01. Your code is 482 913."})["id"].(string)
		resp := e.Do(t, http.MethodGet, "/v1/emails/"+id+"/codes", acme, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("codes: %d %s", resp.Status, resp.Body)
		}
		want := []any{map[string]any{"value": "482913"}, map[string]any{"value": "ABCDEF"}}
		if got := resp.JSON(t); !reflect.DeepEqual(got, map[string]any{"items": want}) {
			t.Errorf("codes = %s\nwant items %v", resp.Body, want)
		}

		plain := create(t, e, acme, map[string]any{"recipient": "c@acme.test", "sender": "s@example.com",
			"text": "Invoice 20240517, total 84,20 EUR"})["id"].(string)
		resp = e.Do(t, http.MethodGet, "/v1/emails/"+plain+"/codes", acme, nil)
		if resp.Status != http.StatusOK || strings.TrimSpace(string(resp.Body)) != `{"items":[]}` {
			t.Errorf("codes of an email without codes = %d %s, want {\"items\":[]}", resp.Status, resp.Body)
		}

		wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails/nope/codes", acme, nil), "emailId")
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/"+id+"/codes", globex, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/0190b6d2-7c3e-7a1b-8c2d-1234567890ab/codes", acme, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/"+id+"/codes", "", nil), http.StatusUnauthorized)
		wantError(t, e.Do(t, http.MethodPost, "/v1/emails/"+id+"/codes", acme, nil), http.StatusMethodNotAllowed)
	})
}
