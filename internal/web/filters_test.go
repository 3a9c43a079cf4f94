package web_test

import (
	"fmt"
	"net/http"
	"strings"
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

// Filter the list, page through it while mail arrives, select several and
// change or delete them, and delete all that match.
func TestFiltersPagingAndBulkActions(t *testing.T) {
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

	// Subject contains; to; label; status.
	p.typeInto("#filter-subject", "order #1")
	p.waitFor("the subject filter", `document.querySelectorAll('#message-list .row').length === 11`)
	p.waitFor("the filtered count", `document.querySelector('#message-count').textContent === '11 messages'`)
	p.click(".filters button.link") // Clear filters
	p.waitFor("all rows again", `document.querySelectorAll('#message-list .row').length === 50`)
	p.typeInto("#filter-recipient", "bob@acme.test")
	p.waitFor("the recipient filter", `document.querySelectorAll('#message-list .row').length === 27 && [...document.querySelectorAll('#message-list .to')].every(e => e.textContent === 'to bob@acme.test')`)
	p.typeInto("#filter-label", "vip")
	p.waitFor("the label filter", `document.querySelectorAll('#message-list .row').length === 5`) // 5, 15, 25, 35, 45
	p.do(clear("#filter-label"), clear("#filter-recipient"))
	p.typeInto("#filter-recipient", "bob@")
	p.waitFor("the filter's error", `document.querySelector('#filter-error').textContent.includes('recipient')`)
	p.do(clear("#filter-recipient"))
	p.waitFor("all rows again", `document.querySelectorAll('#message-list .row').length === 50 && document.querySelector('#filter-error').textContent === ''`)

	// Select two and archive them; then see only those with the status filter.
	p.click("#message-list .row:nth-child(1) input")
	p.click("#message-list .row:nth-child(2) input")
	p.waitFor("two selected", `document.querySelector('#message-count').textContent.endsWith('2 selected')`)
	p.choose("#bulk-status", "archived")
	testenv.WaitFor(t, 10*time.Second, "two archived emails through the API", func() bool { return apiCount(t, env, "status=archived") == 2 })
	p.choose("#filter-status", "archived")
	p.waitFor("the status filter", `document.querySelectorAll('#message-list .row').length === 2`)
	if got := p.rows(); strings.Join(got, ",") != "Order #55,Order #54" {
		t.Errorf("archived rows = %q", got)
	}

	// Select one and delete it.
	p.click("#message-list .row:nth-child(1) input")
	p.click("#delete-selected")
	p.waitFor("one left", `document.querySelectorAll('#message-list .row').length === 1`)
	if n := apiCount(t, env, "status=archived"); n != 1 {
		t.Errorf("archived emails through the API = %d, want 1", n)
	}

	// Delete all matching: only what the filters match goes.
	p.choose("#filter-status", "")
	p.typeInto("#filter-recipient", "bob@acme.test")
	p.waitFor("bob's mail", `document.querySelectorAll('#message-list .row').length === 27`)
	p.click("#delete-matching")
	p.waitFor("the confirmation", `document.querySelector('#confirm[open]')?.textContent.includes('27 messages')`)
	p.click("#confirm-yes")
	p.waitFor("the list to empty", `document.querySelectorAll('#message-list .row').length === 0`)
	if n := apiCount(t, env, "recipient=bob@acme.test"); n != 0 {
		t.Errorf("bob's emails after delete all matching = %d, want 0", n)
	}
	if n := apiCount(t, env, "recipient=ada@acme.test"); n != 28 {
		t.Errorf("ada's emails after deleting bob's = %d, want 28", n)
	}
}
