package web_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mailsink/mailsink/internal/testenv"
)

// seed creates n emails for acme through the API, one second apart, the
// newest last: "Order #0" ... "Order #n-1", to ada@ (even) and bob@ (odd).
// Every fifth carries the label vip. It returns their ids, oldest first.
func seed(t *testing.T, env *testenv.Env, n int) []string {
	t.Helper()
	base := time.Now().Add(-time.Hour).UTC()
	var ids []string
	for i := range n {
		to := "ada@acme.test"
		if i%2 == 1 {
			to = "bob@acme.test"
		}
		res := env.Do(t, "POST", "/v1/emails", testenv.AcmeKey, map[string]any{
			"recipient": to, "sender": "shop@acme.test", "subject": fmt.Sprintf("Order #%d", i),
			"text": "Thanks for your order.", "receivedAt": base.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
		})
		if res.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", res.Status, res.Body)
		}
		id := res.JSON(t)["item"].(map[string]any)["id"].(string)
		if i%5 == 0 {
			if res := env.Do(t, "PATCH", "/v1/emails/"+id, testenv.AcmeKey, map[string]any{"labels": []string{"vip"}}); res.Status != http.StatusOK {
				t.Fatalf("label: %d %s", res.Status, res.Body)
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// apiCount is how many of acme's emails match query, through the API.
func apiCount(t *testing.T, env *testenv.Env, query string) int {
	t.Helper()
	res := env.Do(t, "GET", "/v1/emails?limit=100&"+query, testenv.AcmeKey, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("list: %d %s", res.Status, res.Body)
	}
	return len(res.JSON(t)["items"].([]any))
}

// Page through the list while mail arrives, select several and change or
// delete them (with a way back), and delete all: the toolbar keeps its
// height whatever is selected, so the list never jumps.
func TestPagingAndBulkActions(t *testing.T) {
	env := startMailsink(t)
	seed(t, env, 55)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)

	p.waitFor("the first page", `document.querySelectorAll('#message-list .row').length === 50`)
	p.waitFor("the count", `document.querySelector('#message-count').textContent === '55 messages'`)
	if got := p.rows(); got[0] != "Order #54" || got[49] != "Order #5" {
		t.Fatalf("first page: %q ... %q, want Order #54 ... Order #5", got[0], got[49])
	}

	// Mail arriving while paging neither skips nor repeats.
	sendMail(t, env, "shop@acme.test", "ada@acme.test", "Subject: Order #55\n\nnew")
	p.waitFor("the new mail on top", `document.querySelector('#message-list .subject').textContent === 'Order #55'`)
	p.click("#load-more")
	p.waitFor("the second page", `document.querySelectorAll('#message-list .row').length === 56`)
	rows := p.rows()
	for i, s := range rows {
		if want := fmt.Sprintf("Order #%d", 55-i); s != want {
			t.Fatalf("row %d = %q, want %q (rows %q)", i, s, want, rows)
		}
	}
	p.waitFor("no more pages", `document.querySelector('#load-more').hidden`)

	// Select two: the actions take the count's line, and the rows stay put.
	where := func() string {
		return eval[string](p, `[document.querySelector('.list-toolbar').getBoundingClientRect().height, document.querySelector('#message-list .row').getBoundingClientRect().top].join()`)
	}
	eval[bool](p, `(document.querySelector('.list-scroll').scrollTop = 0, true)`)
	before := where()
	p.click("#message-list .row:nth-child(1) input")
	p.click("#message-list .row:nth-child(2) input")
	p.waitFor("two selected", `document.querySelector('#message-count').textContent.endsWith('2 selected') && !document.querySelector('.bulk').hidden`)
	if after := where(); after != before {
		t.Errorf("selecting moved the toolbar's height and the first row from %s to %s", before, after)
	}
	p.choose("#bulk-status", "archived")
	testenv.WaitFor(t, 10*time.Second, "two archived emails through the API", func() bool { return apiCount(t, env, "status=archived") == 2 })
	p.waitFor("the selection cleared", `document.querySelector('.bulk').hidden && document.querySelectorAll('#message-list .badge.status').length === 2`)

	// Delete one, undo, delete it again: it goes when the undo bar is dismissed.
	p.click("#message-list .row:nth-child(1) input")
	p.click("#delete-selected")
	p.waitFor("the row gone at once, with an undo", `document.querySelectorAll('#message-list .row').length === 55 && !document.querySelector('#undo-bar').hidden &&
		document.querySelector('#message-count').textContent === '55 messages'`)
	p.click("#undo")
	p.waitFor("the row back", `document.querySelectorAll('#message-list .row').length === 56 && document.querySelector('#message-list .subject').textContent === 'Order #55'`)
	if n := apiCount(t, env, "status=archived"); n != 2 {
		t.Errorf("archived emails through the API after the undo = %d, want 2", n)
	}
	p.click("#message-list .row:nth-child(1) input")
	p.click("#delete-selected")
	p.click("#undo-dismiss")
	testenv.WaitFor(t, 10*time.Second, "the DELETE", func() bool { return apiCount(t, env, "status=archived") == 1 })

	// Delete all: only after the confirmation.
	p.waitFor("the count", `document.querySelector('#message-count').textContent === '55 messages'`)
	p.click("#delete-matching")
	p.waitFor("the confirmation", `document.querySelector('#confirm[open]')`)
	if got := p.text("#confirm-text"); got != "Delete all 55 messages of Acme QA? This cannot be undone." {
		t.Errorf("the confirmation asks %q", got)
	}
	p.click("#confirm-yes")
	p.waitFor("the list to empty", `document.querySelectorAll('#message-list .row').length === 0`)
	if n := apiCount(t, env, ""); n != 0 {
		t.Errorf("emails after delete all = %d, want 0", n)
	}
}
