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

const (
	acme   = testenv.AcmeKey
	globex = testenv.GlobexKey
)

// forEachBackend runs test against a fresh mailsink on every store.
func forEachBackend(t *testing.T, test func(t *testing.T, e *testenv.Env)) {
	t.Helper()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			test(t, testenv.Start(t, b, nil))
		})
	}
}

// create stores an email through the API and returns its summary.
func create(t *testing.T, e *testenv.Env, key string, body map[string]any) map[string]any {
	t.Helper()
	resp := e.Do(t, http.MethodPost, "/v1/emails", key, body)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: status %d, want 201: %s", resp.Status, resp.Body)
	}
	return resp.JSON(t)["item"].(map[string]any)
}

func list(t *testing.T, e *testenv.Env, key, query string) []map[string]any {
	t.Helper()
	resp := e.Do(t, http.MethodGet, "/v1/emails?"+query, key, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("list %q: status %d, want 200: %s", query, resp.Status, resp.Body)
	}
	raw := resp.JSON(t)["items"].([]any)
	out := make([]map[string]any, len(raw))
	for i, it := range raw {
		out[i] = it.(map[string]any)
	}
	return out
}

func ids(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it["id"].(string)
	}
	return out
}

// wantValidation asserts a 400 validation envelope with a message for field
// ("" for a form error).
func wantValidation(t *testing.T, resp *testenv.Response, field string) {
	t.Helper()
	if resp.Status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.Status, resp.Body)
	}
	env, ok := resp.JSON(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("error is not a validation object: %s", resp.Body)
	}
	form, ok1 := env["formErrors"].([]any)
	fields, ok2 := env["fieldErrors"].(map[string]any)
	if !ok1 || !ok2 {
		t.Fatalf("validation envelope lacks formErrors/fieldErrors: %s", resp.Body)
	}
	if field == "" {
		if len(form) == 0 {
			t.Fatalf("want a form error: %s", resp.Body)
		}
		return
	}
	msgs, ok := fields[field].([]any)
	if !ok || len(msgs) == 0 || msgs[0].(string) == "" {
		t.Fatalf("want a field error for %q: %s", field, resp.Body)
	}
}

// wantError asserts status and SPEC's {error: string} envelope.
func wantError(t *testing.T, resp *testenv.Response, status int) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d: %s", resp.Status, status, resp.Body)
	}
	if msg, ok := resp.JSON(t)["error"].(string); !ok || msg == "" {
		t.Fatalf("want {error: string}: %s", resp.Body)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp := e.Do(t, http.MethodGet, path, "", nil)
			if resp.Status != http.StatusOK || strings.TrimSpace(string(resp.Body)) != `{"ok":true}` {
				t.Errorf("GET %s = %d %s, want 200 {\"ok\":true}", path, resp.Status, resp.Body)
			}
		}
	})
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "qa@acme.test", "sender": "app@example.com"})["id"].(string)
		endpoints := []struct{ method, path, body string }{
			{http.MethodGet, "/v1/emails", ""},
			{http.MethodPost, "/v1/emails", `{"recipient":"a@b.io","sender":"c@d.io"}`},
			{http.MethodGet, "/v1/emails/" + id, ""},
			{http.MethodPatch, "/v1/emails/" + id, `{"status":"archived"}`},
			{http.MethodDelete, "/v1/emails/" + id, ""},
			{http.MethodPost, "/v1/inbound", "From: a@b.io\r\nTo: c@d.io\r\n\r\nhi\r\n"},
		}
		headers := []struct {
			name          string
			header, value string
		}{
			{"no key", "", ""},
			{"wrong bearer", "Authorization", "Bearer nope"},
			{"wrong x-api-key", "X-Api-Key", "nope"},
			{"basic scheme", "Authorization", "Basic " + acme},
			{"empty bearer", "Authorization", "Bearer "},
		}
		for _, ep := range endpoints {
			for _, h := range headers {
				req, _ := http.NewRequest(ep.method, e.BaseURL+ep.path, strings.NewReader(ep.body))
				if h.header != "" {
					req.Header.Set(h.header, h.value)
				}
				resp := e.Send(t, req)
				if resp.Status != http.StatusUnauthorized {
					t.Errorf("%s %s with %s: status %d, want 401", ep.method, ep.path, h.name, resp.Status)
					continue
				}
				wantError(t, resp, http.StatusUnauthorized)
			}
		}
		// Both ways of sending the key work, and the scheme is case-insensitive.
		for _, h := range []struct{ header, value string }{
			{"Authorization", "Bearer " + acme},
			{"Authorization", "bearer " + acme},
			{"X-Api-Key", acme},
		} {
			req, _ := http.NewRequest(http.MethodGet, e.BaseURL+"/v1/emails/"+id, nil)
			req.Header.Set(h.header, h.value)
			if resp := e.Send(t, req); resp.Status != http.StatusOK {
				t.Errorf("%s: %s: status %d, want 200", h.header, h.value, resp.Status)
			}
		}
	})
}

func TestCreateAndGet(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		before := time.Now().UTC().Add(-time.Second)
		item := create(t, e, acme, map[string]any{
			"recipient": "QA@Acme.test",
			"sender":    "app@example.com",
			"subject":   "Welcome, Ünïcode ✓",
			"text":      "Hello text",
			"html":      "<p>Hello html</p>",
		})
		wantKeys := []string{"id", "account", "messageId", "sender", "recipient", "subject", "status", "notes",
			"labels", "rawSize", "receivedAt", "createdAt", "updatedAt", "read", "fromName", "snippet", "attachmentCount"}
		for _, k := range wantKeys {
			if _, ok := item[k]; !ok {
				t.Errorf("summary lacks %q: %v", k, item)
			}
		}
		if len(item) != len(wantKeys) {
			t.Errorf("summary has %d fields, want %d: %v", len(item), len(wantKeys), item)
		}
		if item["status"] != "received" || item["notes"] != nil || !reflect.DeepEqual(item["labels"], []any{}) {
			t.Errorf("defaults: status %v notes %v labels %v; want received, null, []", item["status"], item["notes"], item["labels"])
		}
		if item["recipient"] != "QA@Acme.test" || item["sender"] != "app@example.com" || item["subject"] != "Welcome, Ünïcode ✓" {
			t.Errorf("fields not kept: %v", item)
		}
		acc := item["account"].(map[string]any)
		if acc["slug"] != "acme" || acc["name"] != "Acme QA" || acc["id"] == "" {
			t.Errorf("account = %v, want acme", acc)
		}
		id := item["id"].(string)
		if len(id) != 36 || id != strings.ToLower(id) || id[14] != '7' {
			t.Errorf("id %q is not a lower-case UUIDv7", id)
		}
		for _, k := range []string{"receivedAt", "createdAt", "updatedAt"} {
			s := item[k].(string)
			ts, err := time.Parse("2006-01-02T15:04:05.000Z", s)
			if err != nil || ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
				t.Errorf("%s = %q: want a current RFC 3339 UTC time with milliseconds (%v)", k, s, err)
			}
		}
		if item["messageId"] == nil || item["messageId"] == "" {
			t.Errorf("messageId = %v, want a generated id", item["messageId"])
		}

		resp := e.Do(t, http.MethodGet, "/v1/emails/"+strings.ToUpper(id), acme, nil)
		if resp.Status != http.StatusOK {
			t.Fatalf("get: %d %s", resp.Status, resp.Body)
		}
		detail := resp.JSON(t)["item"].(map[string]any)
		for _, k := range wantKeys {
			if k == "fromName" || k == "snippet" || k == "attachmentCount" {
				continue // filled in when the search index has read the body
			}
			if !reflect.DeepEqual(detail[k], item[k]) {
				t.Errorf("detail %s = %v, want %v as in the summary", k, detail[k], item[k])
			}
		}
		body := detail["body"].(map[string]any)
		raw := body["raw"].(string)
		if float64(len(raw)) != item["rawSize"].(float64) {
			t.Errorf("rawSize %v, want len(raw) %d", item["rawSize"], len(raw))
		}
		if body["text"] != "Hello text" || body["html"] != "<p>Hello html</p>" {
			t.Errorf("text %q html %q", body["text"], body["html"])
		}
		if !strings.Contains(raw, "From: app@example.com") || !strings.Contains(raw, "To: QA@Acme.test") {
			t.Errorf("composed raw lacks From/To:\n%s", raw)
		}
		headers := body["headers"].(map[string]any)
		if headers["subject"] != "Welcome, Ünïcode ✓" || headers["from"] != "app@example.com" {
			t.Errorf("headers = %v", headers)
		}
		if atts := body["attachments"].([]any); len(atts) != 0 {
			t.Errorf("attachments = %v, want []", atts)
		}
	})
}

func TestCreateWithRaw(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		raw := "From: Sender <s@example.com>\r\nTo: r@acme.test\r\nSubject: =?utf-8?q?Caf=C3=A9?=\r\n" +
			"Message-ID: <abc-123@example.com>\r\nX-Custom: one\r\nX-Custom: two\r\n\r\nbody text\r\n"
		item := create(t, e, acme, map[string]any{
			"recipient":  "r@acme.test",
			"sender":     "s@example.com",
			"raw":        raw,
			"receivedAt": "2026-01-02T03:04:05.678+02:00",
		})
		if item["subject"] != "Café" || item["messageId"] != "abc-123@example.com" {
			t.Errorf("subject %v messageId %v: want parsed from raw", item["subject"], item["messageId"])
		}
		if item["rawSize"].(float64) != float64(len(raw)) {
			t.Errorf("rawSize %v, want %d", item["rawSize"], len(raw))
		}
		if item["receivedAt"] != "2026-01-02T01:04:05.678Z" {
			t.Errorf("receivedAt %v, want 2026-01-02T01:04:05.678Z", item["receivedAt"])
		}
		detail := e.Do(t, http.MethodGet, "/v1/emails/"+item["id"].(string), acme, nil).JSON(t)["item"].(map[string]any)
		body := detail["body"].(map[string]any)
		if body["raw"] != raw {
			t.Errorf("raw not kept byte-exact:\n%q\nwant\n%q", body["raw"], raw)
		}
		if body["text"] != "body text\r\n" && body["text"] != "body text\n" && body["text"] != "body text" {
			t.Errorf("text = %q", body["text"])
		}
		h := body["headers"].(map[string]any)
		if h["x-custom"] != "one, two" {
			t.Errorf("repeated header = %q, want \"one, two\"", h["x-custom"])
		}

		// Given fields win over what the raw says.
		item = create(t, e, acme, map[string]any{
			"recipient": "r@acme.test", "sender": "s@example.com", "raw": raw,
			"subject": nil, "text": "given", "headers": map[string]any{"X-Given": "yes"},
		})
		if item["subject"] != nil {
			t.Errorf("explicit null subject = %v", item["subject"])
		}
		body = e.Do(t, http.MethodGet, "/v1/emails/"+item["id"].(string), acme, nil).JSON(t)["item"].(map[string]any)["body"].(map[string]any)
		if body["text"] != "given" || !reflect.DeepEqual(body["headers"], map[string]any{"x-given": "yes"}) {
			t.Errorf("given text/headers not kept: %v %v", body["text"], body["headers"])
		}
	})
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		ok := func(extra map[string]any) map[string]any {
			m := map[string]any{"recipient": "r@acme.test", "sender": "s@example.com"}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		tests := []struct {
			name  string
			body  any
			field string
		}{
			{"empty body", "", ""},
			{"not JSON", "{nope", ""},
			{"array", "[]", ""},
			{"null", "null", ""},
			{"string", `"x"`, ""},
			{"missing recipient", map[string]any{"sender": "s@example.com"}, "recipient"},
			{"missing sender", map[string]any{"recipient": "r@acme.test"}, "sender"},
			{"null recipient", ok(map[string]any{"recipient": nil}), "recipient"},
			{"number sender", ok(map[string]any{"sender": 5}), "sender"},
			{"bad recipient", ok(map[string]any{"recipient": "not-an-address"}), "recipient"},
			{"bad sender dots", ok(map[string]any{"sender": "a..b@example.com"}), "sender"},
			{"bad sender tld", ok(map[string]any{"sender": "a@localhost"}), "sender"},
			{"subject 999", ok(map[string]any{"subject": strings.Repeat("s", 999)}), "subject"},
			{"subject number", ok(map[string]any{"subject": 1}), "subject"},
			{"text number", ok(map[string]any{"text": 1}), "text"},
			{"html object", ok(map[string]any{"html": map[string]any{}}), "html"},
			{"raw null", ok(map[string]any{"raw": nil}), "raw"},
			{"raw number", ok(map[string]any{"raw": 7}), "raw"},
			{"headers array", ok(map[string]any{"headers": []any{"a"}}), "headers"},
			{"headers null", ok(map[string]any{"headers": nil}), "headers"},
			{"headers number value", ok(map[string]any{"headers": map[string]any{"a": 1}}), "headers"},
			{"receivedAt bad", ok(map[string]any{"receivedAt": "yesterday"}), "receivedAt"},
			{"receivedAt null", ok(map[string]any{"receivedAt": nil}), "receivedAt"},
			{"receivedAt no zone", ok(map[string]any{"receivedAt": "2026-01-02T03:04:05"}), "receivedAt"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantValidation(t, e.Do(t, http.MethodPost, "/v1/emails", acme, tt.body), tt.field)
			})
		}
		// Nothing was stored by any of them.
		if items := list(t, e, acme, ""); len(items) != 0 {
			t.Errorf("invalid creates stored %d emails", len(items))
		}
		// Boundaries that pass: subject of 998, nulls where nullable, unknown fields ignored.
		create(t, e, acme, ok(map[string]any{"subject": strings.Repeat("ß", 998)}))
		create(t, e, acme, ok(map[string]any{"subject": nil, "text": nil, "html": nil, "unknown": true}))
		create(t, e, acme, ok(map[string]any{"raw": ""}))
	})
}

func TestListValidation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		bad := []struct{ query, field string }{
			{"limit=0", "limit"},
			{"limit=101", "limit"},
			{"limit=-1", "limit"},
			{"limit=abc", "limit"},
			{"limit=1.5", "limit"},
			{"limit=", "limit"},
			{"limit=99999999999999999999999", "limit"},
			{"offset=-1", "offset"},
			{"offset=9007199254740992", "offset"},
			{"offset=x", "offset"},
			{"recipient=nope", "recipient"},
			{"recipient=", "recipient"},
			{"sender=a@b", "sender"},
			{"status=deleted", "status"},
			{"status=RECEIVED", "status"},
			{"subject=", "subject"},
			{"subject=" + strings.Repeat("x", 256), "subject"},
		}
		for _, tt := range bad {
			wantValidation(t, e.Do(t, http.MethodGet, "/v1/emails?"+tt.query, acme, nil), tt.field)
		}
		good := []string{"limit=1", "limit=100", "offset=0", "offset=9007199254740991",
			"subject=" + strings.Repeat("x", 255), "status=archived", "recipient=a@b.io", "sender=x@y.zz", "unknown=1"}
		for _, q := range good {
			list(t, e, acme, q)
		}
	})
}

func TestListOrderFiltersPaging(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		at := func(s string) string { return "2026-05-01T10:00:00." + s + "Z" }
		mk := func(rcpt, sender, subject, received string) string {
			return create(t, e, acme, map[string]any{"recipient": rcpt, "sender": sender, "subject": subject,
				"receivedAt": received})["id"].(string)
		}
		a := mk("alice@acme.test", "app@example.com", "Reset your password", at("001"))
		b := mk("bob@acme.test", "app@example.com", "Welcome 100%_off", at("002"))
		c := mk("Alice@Acme.test", "other@example.com", "Your invoice", at("003"))
		d1 := mk("carol@acme.test", "app@example.com", "tie one", at("004"))
		d2 := mk("carol@acme.test", "app@example.com", "tie two", at("004"))
		hi, lo := d1, d2
		if lo > hi {
			hi, lo = lo, hi
		}
		create(t, e, globex, map[string]any{"recipient": "alice@acme.test", "sender": "app@example.com",
			"subject": "Reset your password"})

		tests := []struct {
			query string
			want  []string
		}{
			{"", []string{hi, lo, c, b, a}},
			{"recipient=alice@acme.test", []string{c, a}},
			{"recipient=ALICE@ACME.TEST", []string{c, a}},
			{"recipient=alice@acme.tes", nil},
			{"sender=APP@example.com", []string{hi, lo, b, a}},
			{"sender=app@example.com&recipient=alice@acme.test", []string{a}},
			{"subject=RESET", []string{a}},
			{"subject=100%25_", []string{b}},
			{"subject=%25", []string{b}},
			{"subject=_", []string{b}},
			{"subject=*", nil},
			{"subject=your", []string{c, a}},
			{"status=received", []string{hi, lo, c, b, a}},
			{"status=archived", nil},
			{"limit=2", []string{hi, lo}},
			{"limit=2&offset=2", []string{c, b}},
			{"limit=2&offset=4", []string{a}},
			{"offset=5", nil},
			{"offset=9007199254740991", nil},
		}
		for _, tt := range tests {
			got := ids(list(t, e, acme, tt.query))
			if len(got) == 0 && len(tt.want) == 0 {
				continue
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("list %q = %v, want %v", tt.query, got, tt.want)
			}
		}
		// Default limit is 25.
		for i := 0; i < 26; i++ {
			create(t, e, acme, map[string]any{"recipient": "many@acme.test", "sender": "app@example.com"})
		}
		if got := len(list(t, e, acme, "")); got != 25 {
			t.Errorf("default page has %d items, want 25", got)
		}
		if got := len(list(t, e, acme, "limit=100")); got != 31 {
			t.Errorf("limit=100 page has %d items, want 31", got)
		}
	})
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		item := create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "subject": "Old"})
		id := item["id"].(string)
		path := "/v1/emails/" + id

		bad := []struct {
			name  string
			body  any
			field string
		}{
			{"not JSON", "nope", ""},
			{"empty", "", ""},
			{"array", "[1]", ""},
			{"labels null", map[string]any{"labels": nil}, "labels"},
			{"labels string", map[string]any{"labels": "a"}, "labels"},
			{"labels 33", map[string]any{"labels": make33()}, "labels"},
			{"label empty", map[string]any{"labels": []any{""}}, "labels"},
			{"label 65", map[string]any{"labels": []any{strings.Repeat("l", 65)}}, "labels"},
			{"label number", map[string]any{"labels": []any{1}}, "labels"},
			{"notes 10001", map[string]any{"notes": strings.Repeat("n", 10001)}, "notes"},
			{"notes number", map[string]any{"notes": 3}, "notes"},
			{"status bad", map[string]any{"status": "deleted"}, "status"},
			{"status null", map[string]any{"status": nil}, "status"},
			{"subject 999", map[string]any{"subject": strings.Repeat("s", 999)}, "subject"},
		}
		for _, tt := range bad {
			t.Run(tt.name, func(t *testing.T) {
				wantValidation(t, e.Do(t, http.MethodPatch, path, acme, tt.body), tt.field)
			})
		}
		// Nothing changed.
		got := e.Do(t, http.MethodGet, path, acme, nil).JSON(t)["item"].(map[string]any)
		if got["updatedAt"] != item["updatedAt"] || got["subject"] != "Old" {
			t.Errorf("invalid patches changed the email: %v", got)
		}

		labels := make([]any, 32)
		for i := range labels {
			labels[i] = strings.Repeat(fmt.Sprint(i%10), 64)
		}
		time.Sleep(2 * time.Millisecond) // updatedAt has millisecond resolution
		resp := e.Do(t, http.MethodPatch, path, acme, map[string]any{
			"labels": labels, "notes": strings.Repeat("n", 10000), "status": "processed", "subject": strings.Repeat("s", 998),
			"sender": "evil@example.com", "rawSize": 1,
		})
		if resp.Status != http.StatusOK {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		up := resp.JSON(t)["item"].(map[string]any)
		if !reflect.DeepEqual(up["labels"], labels) || up["status"] != "processed" || len(up["notes"].(string)) != 10000 ||
			len(up["subject"].(string)) != 998 {
			t.Errorf("patch not applied: %v", up)
		}
		for _, k := range []string{"id", "sender", "recipient", "rawSize", "receivedAt", "createdAt", "messageId"} {
			if up[k] != item[k] {
				t.Errorf("immutable %s changed: %v -> %v", k, item[k], up[k])
			}
		}
		if up["updatedAt"] == item["updatedAt"] {
			t.Errorf("updatedAt not changed: %v", up["updatedAt"])
		}
		// Filters see the change at once.
		if got := ids(list(t, e, acme, "status=processed")); !reflect.DeepEqual(got, []string{id}) {
			t.Errorf("status=processed lists %v, want [%s]", got, id)
		}
		if got := list(t, e, acme, "status=received"); len(got) != 0 {
			t.Errorf("status=received still lists %v", ids(got))
		}
		// Nulls clear; an empty object only touches updatedAt.
		resp = e.Do(t, http.MethodPatch, path, acme, map[string]any{"notes": nil, "subject": nil, "labels": []any{}})
		up = resp.JSON(t)["item"].(map[string]any)
		if up["notes"] != nil || up["subject"] != nil || len(up["labels"].([]any)) != 0 || up["status"] != "processed" {
			t.Errorf("clearing patch: %v", up)
		}
		if resp := e.Do(t, http.MethodPatch, path, acme, map[string]any{}); resp.Status != http.StatusOK {
			t.Errorf("empty patch: %d %s", resp.Status, resp.Body)
		}
	})
}

func make33() []any {
	out := make([]any, 33)
	for i := range out {
		out[i] = "l"
	}
	return out
}

func TestDelete(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		id := create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com"})["id"].(string)
		keep := create(t, e, acme, map[string]any{"recipient": "r@acme.test", "sender": "s@example.com"})["id"].(string)
		resp := e.Do(t, http.MethodDelete, "/v1/emails/"+id, acme, nil)
		if resp.Status != http.StatusNoContent || len(resp.Body) != 0 {
			t.Fatalf("delete: %d %q, want 204 with no body", resp.Status, resp.Body)
		}
		for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
			wantError(t, e.Do(t, m, "/v1/emails/"+id, acme, map[string]any{}), http.StatusNotFound)
		}
		if got := ids(list(t, e, acme, "recipient=r@acme.test")); !reflect.DeepEqual(got, []string{keep}) {
			t.Errorf("after delete, list = %v, want [%s]", got, keep)
		}
	})
}

func TestPathID(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		for _, id := range []string{"nope", "123", "0190b6d2-7c3e-0a1b-8c2d-1234567890ab", "0190b6d27c3e7a1b8c2d1234567890ab",
			url.PathEscape("0190b6d2-7c3e-7a1b-8c2d-1234567890a!")} {
			for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
				wantValidation(t, e.Do(t, m, "/v1/emails/"+id, acme, map[string]any{}), "emailId")
			}
		}
		for _, id := range []string{"0190b6d2-7c3e-7a1b-8c2d-1234567890ab", "00000000-0000-0000-0000-000000000000",
			"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"} {
			for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
				wantError(t, e.Do(t, m, "/v1/emails/"+id, acme, map[string]any{}), http.StatusNotFound)
			}
		}
	})
}

func TestAccountIsolation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		mine := create(t, e, acme, map[string]any{"recipient": "shared@acme.test", "sender": "s@example.com", "subject": "acme"})
		id := mine["id"].(string)
		create(t, e, globex, map[string]any{"recipient": "shared@acme.test", "sender": "s@example.com", "subject": "globex"})

		for _, q := range []string{"", "recipient=shared@acme.test", "sender=s@example.com", "status=received", "subject=acme"} {
			for _, it := range list(t, e, globex, q) {
				if it["id"] == id || it["account"].(map[string]any)["slug"] != "globex" {
					t.Errorf("globex list %q shows %v", q, it)
				}
			}
		}
		wantError(t, e.Do(t, http.MethodGet, "/v1/emails/"+id, globex, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodPatch, "/v1/emails/"+id, globex, map[string]any{"status": "archived"}), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodDelete, "/v1/emails/"+id, globex, nil), http.StatusNotFound)
		got := e.Do(t, http.MethodGet, "/v1/emails/"+id, acme, nil).JSON(t)["item"].(map[string]any)
		if got["status"] != "received" || got["updatedAt"] != mine["updatedAt"] {
			t.Errorf("another account's requests changed the email: %v", got)
		}
	})
}

func TestInbound(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		raw := "From: App <app@example.com>\r\nTo: one@acme.test, Two <two@acme.test>\r\nCc: three@x.io, undisclosed-recipients:;\r\n" +
			"Subject: Inbound\r\nMessage-ID: <in-1@example.com>\r\n\r\nhello\r\n"
		post := func(body string, header map[string]string) *testenv.Response {
			req, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", strings.NewReader(body))
			req.Header.Set("Content-Type", "message/rfc822")
			req.Header.Set("X-Api-Key", acme)
			for k, v := range header {
				req.Header.Set(k, v)
			}
			return e.Send(t, req)
		}
		resp := post(raw, nil)
		if resp.Status != http.StatusCreated {
			t.Fatalf("inbound: %d %s", resp.Status, resp.Body)
		}
		items := resp.JSON(t)["items"].([]any)
		var rcpts []string
		for _, it := range items {
			m := it.(map[string]any)
			rcpts = append(rcpts, m["recipient"].(string))
			if m["sender"] != "app@example.com" || m["subject"] != "Inbound" || m["rawSize"].(float64) != float64(len(raw)) {
				t.Errorf("inbound item %v", m)
			}
		}
		if !reflect.DeepEqual(rcpts, []string{"one@acme.test", "two@acme.test", "three@x.io"}) {
			t.Errorf("recipients from headers = %v", rcpts)
		}
		first := items[0].(map[string]any)["id"].(string)
		body := e.Do(t, http.MethodGet, "/v1/emails/"+first, acme, nil).JSON(t)["item"].(map[string]any)["body"].(map[string]any)
		if body["raw"] != raw {
			t.Errorf("raw not byte-exact")
		}

		resp = post(raw, map[string]string{"X-Envelope-From": "bounce@example.com", "X-Envelope-To": "env1@acme.test, <env2@globex.test>"})
		if resp.Status != http.StatusCreated {
			t.Fatalf("inbound with envelope: %d %s", resp.Status, resp.Body)
		}
		items = resp.JSON(t)["items"].([]any)
		if len(items) != 2 || items[0].(map[string]any)["sender"] != "bounce@example.com" ||
			items[1].(map[string]any)["recipient"] != "env2@globex.test" ||
			items[1].(map[string]any)["account"].(map[string]any)["slug"] != "acme" {
			t.Errorf("envelope items = %v", items)
		}

		wantValidation(t, post("", nil), "")
		wantValidation(t, post(raw, map[string]string{"X-Envelope-To": "nope"}), "X-Envelope-To")
		wantValidation(t, post(raw, map[string]string{"X-Envelope-From": "nope"}), "X-Envelope-From")
		wantValidation(t, post("Subject: no one\r\n\r\nx\r\n", nil), "")
		wantValidation(t, post("To: r@acme.test\r\nFrom: not an address\r\n\r\nx\r\n", nil), "")
	})
}

func TestSizeLimits(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := testenv.Start(t, b, func(c *configT) { c.MaxMessageBytes = 1000 })
			msg := func(n int) string {
				head := "From: a@example.com\r\nTo: b@acme.test\r\n\r\n"
				return head + strings.Repeat("x", n-len(head))
			}
			req := func(body string) *http.Request {
				r, _ := http.NewRequest(http.MethodPost, e.BaseURL+"/v1/inbound", strings.NewReader(body))
				r.Header.Set("X-Api-Key", acme)
				return r
			}
			if resp := e.Send(t, req(msg(1000))); resp.Status != http.StatusCreated {
				t.Errorf("inbound of exactly the limit: %d %s", resp.Status, resp.Body)
			}
			tooLarge := e.Send(t, req(msg(1001)))
			wantError(t, tooLarge, http.StatusRequestEntityTooLarge)
			if got, want := tooLarge.JSON(t)["error"], "request body too large: over the limit of 1000 bytes"; got != want {
				t.Errorf("inbound over the limit: %q, want %q", got, want)
			}
			ok := map[string]any{"recipient": "r@acme.test", "sender": "s@example.com", "raw": msg(1000)}
			create(t, e, acme, ok)
			ok["raw"] = msg(1001)
			wantError(t, e.Do(t, http.MethodPost, "/v1/emails", acme, ok), http.StatusRequestEntityTooLarge)
			if n := len(list(t, e, acme, "")); n != 2 {
				t.Errorf("stored %d emails, want the 2 within the limit", n)
			}
		})
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		wantError(t, e.Do(t, http.MethodGet, "/v1/nothing", acme, nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodGet, "/nothing", "", nil), http.StatusNotFound)
		wantError(t, e.Do(t, http.MethodPut, "/v1/emails", acme, nil), http.StatusMethodNotAllowed)
		resp := e.Do(t, http.MethodGet, "/healthz", "", nil)
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("missing security or request-id headers: %v", resp.Header)
		}
	})
}
