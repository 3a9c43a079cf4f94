package httpapi_test

import (
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// searchIDs lists the ids the search q selects for acme, with more list
// parameters in extra.
func searchIDs(t *testing.T, e *testenv.Env, q, extra string) []string {
	t.Helper()
	return ids(list(t, e, acme, "limit=100&q="+url.QueryEscape(q)+extra))
}

// waitSearch polls until the search q selects want (in list order): body
// words and display names come within a second of the 250.
func waitSearch(t *testing.T, e *testenv.Env, q string, want []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = searchIDs(t, e, q, "")
		if slices.Equal(got, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(got, want) {
		t.Errorf("q=%q: got %v, want %v", q, got, want)
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	japanese, err := os.ReadFile("../../shared/corpus/mail-gem/multi_charset/japanese.eml")
	if err != nil {
		japanese, err = os.ReadFile("../internal/mailparse/testdata/corpus/multi_charset/japanese.eml")
	}
	if err != nil {
		t.Fatal(err)
	}
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		invoice := sendRaw(t, e, "ada@acme.test", []byte("From: \"Shop Team\" <shop@shop.example>\r\nTo: Ada Lovelace <ada@acme.test>\r\n"+
			"Subject: Your invoice 42\r\nMessage-ID: <inv42@shop.example>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"+
			"--b\r\nContent-Type: text/plain\r\n\r\nThanks for your order. The total is due today.\r\n--b\r\n"+
			"Content-Type: application/pdf; name=inv.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERg==\r\n--b--\r\n"))
		code := sendRaw(t, e, "bob@acme.test", []byte("From: Login <login@auth.example>\r\nTo: bob@acme.test\r\nSubject: Sign-in\r\n"+
			"Content-Type: text/html; charset=utf-8\r\n\r\n<p>Your code is <b>123456</b>. Grüße!</p>\r\n"))
		jp := sendRaw(t, e, "jp@acme.test", japanese)

		// Metadata terms find mail at once.
		for q, want := range map[string][]string{
			"from:shop.example":             {invoice},
			"to:bob":                        {code},
			"subject:INVOICE":               {invoice},
			"message-id:inv42@shop.example": {invoice},
			"-to:bob -to:jp":                {invoice},
			"larger:1KB":                    {}, // none of them is
			"smaller:1KB from:login":        {code},
			"is:unread":                     {jp, code, invoice},
			"is:read":                       {},
			"status:received -subject:sign": {jp, invoice},
			"before:2000-01-01":             {},
			"after:2000-01-01 to:ada":       {invoice},
		} {
			if want == nil {
				want = []string{}
			}
			if got := searchIDs(t, e, q, ""); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("q=%q: got %v, want %v", q, got, want)
			}
		}
		// Body words, display names and attachments within a second.
		waitSearch(t, e, "order", []string{invoice})
		waitSearch(t, e, `"order total"`, nil)
		waitSearch(t, e, `"your order"`, []string{invoice})
		waitSearch(t, e, "123456 grüße", []string{code})
		waitSearch(t, e, "from:\"shop team\"", []string{invoice})
		waitSearch(t, e, "from:shop.example", []string{invoice})
		waitSearch(t, e, "to:lovelace", []string{invoice})
		waitSearch(t, e, "has:attachment", []string{invoice})
		waitSearch(t, e, "-has:attachment", []string{jp, code})
		waitSearch(t, e, "かきくえこ rspec", []string{jp})
		waitSearch(t, e, "lovelace order -grüße", []string{invoice})

		// The other filters combine with q; count and the summaries
		// know it too.
		if got := searchIDs(t, e, "order", "&recipient=bob%40acme.test"); len(got) != 0 {
			t.Errorf("order to bob: %v", got)
		}
		if got := countOf(t, e, acme, "q="+url.QueryEscape("is:unread -order")); got != 2 {
			t.Errorf("count of is:unread -order = %v, want 2", got)
		}
		item := get(t, e, "/v1/emails/"+invoice, acme).JSON(t)["item"].(map[string]any)
		if item["read"] != false || item["fromName"] != "Shop Team" || item["attachmentCount"] != float64(1) ||
			!strings.HasPrefix(item["snippet"].(string), "Thanks for your order.") {
			t.Errorf("summary fields: read %v fromName %v attachmentCount %v snippet %v", item["read"], item["fromName"], item["attachmentCount"], item["snippet"])
		}
		// Another account's mail is never found.
		if got := ids(list(t, e, globex, "q=order")); len(got) != 0 {
			t.Errorf("globex found acme's mail: %v", got)
		}
	})
}

func TestSearchRefusesBadQueries(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Backends(t)[0], nil)
	for _, tc := range []struct{ q, says string }{
		{"status:new", "at character 8: status:"},
		{`from:"open`, "at character 6: a quote is not closed"},
		{"before:someday", "is not a day"},
		// Nothing to search for is not a query that selects everything.
		{"!!!", "no letters or digits"},
		{"-🎉", "no letters or digits"},
	} {
		for _, path := range []string{"/v1/emails?q=", "/v1/emails/count?q="} {
			resp := get(t, e, path+url.QueryEscape(tc.q), acme)
			wantValidation(t, resp, "q")
			if !strings.Contains(string(resp.Body), tc.says) {
				t.Errorf("%s%s: %s; want it to say %q", path, tc.q, resp.Body, tc.says)
			}
		}
		req, _ := http.NewRequest(http.MethodDelete, e.BaseURL+"/v1/emails?q="+url.QueryEscape(tc.q), nil)
		req.Header.Set("X-Api-Key", acme)
		wantValidation(t, e.Send(t, req), "q")
	}
	// An empty q is no filter.
	create(t, e, acme, map[string]any{"recipient": "a@acme.test", "sender": "s@example.com"})
	if got := list(t, e, acme, "q="); len(got) != 1 {
		t.Errorf("q= listed %d, want 1", len(got))
	}
}

// Read state: new mail is unread; PATCH marks it read and unread again; no
// GET changes it; search, count and stats follow.
func TestReadState(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		a := create(t, e, acme, map[string]any{"recipient": "a@acme.test", "sender": "s@example.com", "text": "hi"})["id"].(string)
		b := create(t, e, acme, map[string]any{"recipient": "b@acme.test", "sender": "s@example.com"})["id"].(string)
		e.Do(t, http.MethodPatch, "/v1/emails/"+b, acme, map[string]any{"labels": []string{"vip"}, "status": "archived"})
		for _, path := range []string{"/v1/emails/" + a, "/v1/emails/" + a + "/raw", "/v1/emails/" + a + "/links", "/v1/emails?limit=5"} {
			get(t, e, path, acme)
		}
		if item := get(t, e, "/v1/emails/"+a, acme).JSON(t)["item"].(map[string]any); item["read"] != false {
			t.Fatalf("read after GETs: %v", item["read"])
		}
		resp := e.Do(t, http.MethodPatch, "/v1/emails/"+a, acme, map[string]any{"read": true})
		if resp.Status != http.StatusOK || resp.JSON(t)["item"].(map[string]any)["read"] != true {
			t.Fatalf("PATCH read: %d %s", resp.Status, resp.Body)
		}
		wantValidation(t, e.Do(t, http.MethodPatch, "/v1/emails/"+a, acme, map[string]any{"read": "yes"}), "read")
		wantValidation(t, e.Do(t, http.MethodPatch, "/v1/emails/"+a, acme, map[string]any{"read": nil}), "read")
		waitSearch(t, e, "is:read", []string{a})
		waitSearch(t, e, "is:unread", []string{b})
		stats := get(t, e, "/v1/emails/stats", acme).JSON(t)
		labels := stats["labels"].([]any)
		if stats["total"] != float64(2) || stats["unread"] != float64(1) || stats["statuses"].(map[string]any)["archived"] != float64(1) ||
			len(labels) != 1 || labels[0].(map[string]any)["name"] != "vip" || labels[0].(map[string]any)["unread"] != float64(1) {
			t.Errorf("stats: %v", stats)
		}
		if other := get(t, e, "/v1/emails/stats", globex).JSON(t); other["total"] != float64(0) {
			t.Errorf("globex's stats count acme's mail: %v", other)
		}
		e.Do(t, http.MethodPatch, "/v1/emails/"+a, acme, map[string]any{"read": false})
		waitSearch(t, e, "is:unread", []string{b, a})
	})
}

// A list request with wait and q answers when a matching email's body is
// indexed, and bulk delete takes q.
func TestSearchWaitAndBulkDelete(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *testenv.Env) {
		done := make(chan []map[string]any, 1)
		go func() {
			resp := get(t, e, "/v1/emails?wait=20&q="+url.QueryEscape("needle -subject:skip"), acme)
			items := []map[string]any{}
			for _, it := range resp.JSON(t)["items"].([]any) {
				items = append(items, it.(map[string]any))
			}
			done <- items
		}()
		testenv.WaitFor(t, 10*time.Second, "the wait to be held", func() bool { return e.App.HeldRequests() == 1 })
		create(t, e, acme, map[string]any{"recipient": "a@acme.test", "sender": "s@example.com", "subject": "skip", "text": "a needle"})
		want := create(t, e, acme, map[string]any{"recipient": "b@acme.test", "sender": "s@example.com", "text": "the needle here"})["id"].(string)
		select {
		case items := <-done:
			if len(items) != 1 || items[0]["id"] != want {
				t.Errorf("wait with q answered %v, want %s", ids(items), want)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the wait with q did not answer")
		}
		waitSearch(t, e, "needle", []string{want, searchIDs(t, e, "subject:skip", "")[0]})
		req, _ := http.NewRequest(http.MethodDelete, e.BaseURL+"/v1/emails?q="+url.QueryEscape("needle -subject:skip"), nil)
		req.Header.Set("X-Api-Key", acme)
		if resp := e.Send(t, req); resp.Status != http.StatusOK || resp.JSON(t)["deleted"] != float64(1) {
			t.Errorf("bulk delete with q: %d %s", resp.Status, resp.Body)
		}
		waitSearch(t, e, "needle", searchIDs(t, e, "subject:skip", ""))
	})
}
