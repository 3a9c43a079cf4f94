package web_test

import (
	"fmt"
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp/kb"

	"github.com/mailsink/mailsink/config"
	"github.com/mailsink/mailsink/internal/testenv"
)

// searchMails are four messages with names, bodies, an attachment and a
// label to search for.
func searchMails(t *testing.T, env *testenv.Env) {
	t.Helper()
	sendMail(t, env, "orders@shop.example", "ada@acme.test", "From: Acme Shop <orders@shop.example>\nTo: ada@acme.test\nSubject: Your order #1042 has shipped\n\n"+
		"Good news: the parcel is on its way. Tracking number ZX-42.\n")
	sendMail(t, env, "ada@analytical.example", "bob@acme.test", "From: Ada Lovelace <ada@analytical.example>\nTo: bob@acme.test\nSubject: Notes on the engine\n"+
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain; charset=utf-8\n\n"+
		"The analytical engine weaves algebraic patterns.\n--b\nContent-Type: application/pdf; name=notes.pdf\n"+
		"Content-Disposition: attachment; filename=notes.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0xLjQKJcfsj6IK\n--b--\n")
	sendMail(t, env, "security@shop.example", "ada@acme.test", "From: Security <security@shop.example>\nTo: ada@acme.test\nSubject: Password reset\n\n"+
		"Someone asked to reset your password. Use the link within an hour.\n")
	sendMail(t, env, "digest@news.example", "carol@acme.test", "From: News <digest@news.example>\nTo: carol@acme.test\nSubject: Weekly digest\n\n"+
		strings.Repeat("All the news of the week, and more of it. ", 300)+"\n")
	res := env.Do(t, "GET", "/v1/emails?q="+url.QueryEscape("subject:reset"), testenv.AcmeKey, nil)
	id := res.JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	if r := env.Do(t, "PATCH", "/v1/emails/"+id, testenv.AcmeKey, map[string]any{"labels": []string{"vip"}}); r.Status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
}

// search types q into the search box, as a person does, and presses Enter.
func (p *page) search(q string) {
	p.t.Helper()
	p.do(clear("#search"))
	p.typeInto("#search", q+"\r")
}

// rowsAre waits until the list shows exactly subjects, in order.
func (p *page) rowsAre(what string, subjects ...string) {
	p.t.Helper()
	want := strings.Join(subjects, "|")
	p.waitFor(what+": "+want, `[...document.querySelectorAll('#message-list .subject')].map(e => e.textContent).join('|') === `+js(want)+
		` && document.querySelector('#message-count').textContent.startsWith('`+fmt.Sprint(len(subjects))+` ')`)
}

// Search with the operators in the search box; the sidebar's mailboxes
// search too; new mail that matches shows up live, other mail does not;
// a search that does not parse says where and lists nothing. On each
// store.
func TestSearchWithOperators(t *testing.T) {
	for _, b := range testenv.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { searchWithOperators(t, b) })
	}
}

func searchWithOperators(t *testing.T, b testenv.Backend) {
	env := testenv.Start(t, b, nil)
	traffic.allow(strings.TrimPrefix(env.BaseURL, "http://"))
	needSearch(t, env)
	searchMails(t, env)
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("names and snippets", `document.querySelectorAll('#message-list .snippet').length === 4 && [...document.querySelectorAll('#message-list .from')].some(e => e.textContent === 'Ada Lovelace' && e.title === 'ada@analytical.example')`)

	p.search("from:shop")
	p.rowsAre("from:", "Password reset", "Your order #1042 has shipped")
	p.search("from:shop -label:vip")
	p.rowsAre("a negated label", "Your order #1042 has shipped")
	p.search("parcel")
	p.rowsAre("a word of the body", "Your order #1042 has shipped")
	p.search("has:attachment")
	p.rowsAre("has:attachment", "Notes on the engine")
	if n := eval[int](p, `document.querySelectorAll('#message-list .row .clip').length`); n != 1 {
		t.Errorf("%d attachment icons, want 1", n)
	}
	p.search(`from:"Ada Lovelace"`)
	p.rowsAre("a quoted name", "Notes on the engine")
	p.search(`"reset your password"`)
	p.rowsAre("a phrase", "Password reset")
	p.search("larger:10KB to:carol")
	p.rowsAre("a size and a recipient", "Weekly digest")

	p.search("from:")
	p.waitFor("the error", `document.querySelector('#search-error').textContent.includes('at character 6') && document.querySelector('#search').getAttribute('aria-invalid') === 'true'`)
	p.rowsAre("no rows")
	p.click("#search-help-button")
	p.waitFor("the operators", `document.querySelector('#search-help:popover-open')`)
	p.click(`#search-help .operator`) // from:shop.example, added to the search
	p.waitFor("the operator in the box", `document.querySelector('#search').value === 'from: from:shop.example' && !document.querySelector('#search-help:popover-open')`)
	p.search("")
	// The error's line goes with the answer to the empty search: the
	// sidebar moves up by it, so a click aimed before would miss.
	p.rowsAre("every email again", "Weekly digest", "Password reset", "Notes on the engine", "Your order #1042 has shipped")
	p.waitFor("the error gone", `!document.querySelector('#search').hasAttribute('aria-invalid') && document.querySelector('#search-error').textContent === ''`)

	// The mailboxes: counts, and a search each.
	p.waitFor("the counts", `document.querySelector('#folder-all .folder-count')?.textContent === '4' && document.querySelector('#folder-unread .folder-count').textContent === '4'`)
	p.click("#label-folders .folder")
	p.waitFor("the label's search", `document.querySelector('#search').value === 'label:vip' && document.querySelector('#label-folders .folder').getAttribute('aria-current') === 'page'`)
	p.rowsAre("the label", "Password reset")

	// Live: mail that matches the search shows up; other mail does not.
	p.search("from:shop")
	p.rowsAre("from:", "Password reset", "Your order #1042 has shipped")
	sendMail(t, env, "news@elsewhere.example", "ada@acme.test", "Subject: Elsewhere\n\nNot from the shop.\n")
	sendMail(t, env, "deals@shop.example", "ada@acme.test", "From: Shop Deals <deals@shop.example>\nSubject: Deals of the day\n\nCheap parcels.\n")
	p.rowsAre("the new matching mail on top", "Deals of the day", "Password reset", "Your order #1042 has shipped")
	p.search("parcels")
	p.rowsAre("a body word of new mail", "Deals of the day")

	// Delete what the search matches, after a confirmation.
	p.search("to:carol")
	p.rowsAre("carol's", "Weekly digest")
	p.click("#delete-matching")
	p.waitFor("the confirmation", `document.querySelector('#confirm[open]')`)
	if got := p.text("#confirm-text"); got != "Delete all 1 message matching “to:carol”? This cannot be undone." {
		t.Errorf("the confirmation asks %q", got)
	}
	p.click("#confirm-yes")
	p.rowsAre("nothing left")
	if n := apiCount(t, env, ""); n != 5 {
		t.Errorf("%d emails left, want 5", n)
	}

	// A search of nothing but punctuation is an error, not every email,
	// and new mail does not fill the list the error leaves empty.
	p.search("!!!")
	p.waitFor("the error", `document.querySelector('#search-error').textContent.includes('no letters or digits')`)
	p.rowsAre("no rows")
	sendMail(t, env, "deals@shop.example", "ada@acme.test", "Subject: More deals\n\nCheap.\n")
	p.waitFor("the new mail counted", `document.querySelector('#folder-all .folder-count').textContent === '6'`)
	p.rowsAre("still no rows")
}

// Unread mail is bold and counted (in the sidebar, the title, the icon);
// opening a message marks it read, Mark unread and u bring it back, and
// the selection's Mark read marks many. With MAILSINK_DASHBOARD_MARK_READ
// off, opening leaves it unread.
func TestReadState(t *testing.T) {
	env := startMailsink(t)
	needSearch(t, env)
	seed(t, env, 3) // Order #2, #1, #0
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("three unread", `document.querySelectorAll('#message-list .row.unread').length === 3 &&
		getComputedStyle(document.querySelector('#message-list .row.unread .subject')).fontWeight === '700'`)
	p.waitFor("the unread count", `document.querySelector('#folder-unread .folder-count')?.textContent === '3' && document.title.startsWith('(3) ') &&
		document.querySelector('link[rel=icon]').href.startsWith('data:image/svg+xml')`)

	p.click("#message-list .row:nth-child(2) .row-link")
	p.waitFor("Order #1 open", `document.querySelector('#message-subject')?.textContent === 'Order #1'`)
	id := eval[string](p, "location.hash.slice('#/emails/'.length)")
	p.waitFor("Order #1 read", `!document.querySelector('#message-list .row:nth-child(2)').classList.contains('unread') && document.querySelector('#toggle-read').textContent === 'Mark unread'`)
	p.waitFor("two unread", `document.querySelector('#folder-unread .folder-count').textContent === '2' && document.title.startsWith('(2) ')`)
	if e := apiEmail(t, env, testenv.AcmeKey, id); e["read"] != true {
		t.Errorf("Order #1 through the API after opening it: read %v, want true", e["read"])
	}
	p.click("#toggle-read")
	p.waitFor("Order #1 unread again", `document.querySelector('#message-list .row:nth-child(2)').classList.contains('unread')`)
	if e := apiEmail(t, env, testenv.AcmeKey, id); e["read"] != false {
		t.Errorf("after Mark unread: read %v, want false", e["read"])
	}
	p.shortcut("u")
	p.waitFor("read with u", `!document.querySelector('#message-list .row:nth-child(2)').classList.contains('unread')`)

	// is:unread: the open message stays while it is read.
	p.click("#folder-unread")
	p.rowsAre("the unread", "Order #2", "Order #0")
	p.click("#message-list .row:nth-child(2) .row-link")
	p.waitFor("Order #0 read and still listed", `document.querySelector('#message-subject')?.textContent === 'Order #0' &&
		!document.querySelector('#message-list .row:nth-child(2)').classList.contains('unread')`)
	p.click("#folder-all")
	p.rowsAre("all mail", "Order #2", "Order #1", "Order #0")
	p.click("#select-all")
	p.click("#read-selected")
	p.waitFor("none unread", `document.querySelectorAll('#message-list .row.unread').length === 0 && document.querySelector('#folder-unread .folder-count').textContent === '0' &&
		document.querySelector('link[rel=icon]').getAttribute('href') === '/ui/icon.svg' && !document.title.startsWith('(')`)

	// The setting off: opening a message leaves it unread.
	off := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) { c.Dashboard.MarkRead = false })
	traffic.allow(strings.TrimPrefix(off.BaseURL, "http://"))
	seed(t, off, 2)
	q := openTab(t, off)
	q.signIn(testenv.AcmeKey)
	if got := eval[string](q, `document.querySelector('meta[name="mailsink-mark-read"]').content`); got != "false" {
		t.Errorf("the page's mark-read setting is %q, want false", got)
	}
	q.waitFor("two unread", `document.querySelectorAll('#message-list .row.unread').length === 2`)
	q.click("#message-list .row:nth-child(1) .row-link")
	q.waitFor("Order #1 open", `document.querySelector('#message-subject')?.textContent === 'Order #1'`)
	q.click("#message-list .row:nth-child(2) .row-link")
	q.waitFor("Order #0 open, Order #1 still unread", `document.querySelector('#message-subject')?.textContent === 'Order #0' &&
		document.querySelector('#toggle-read').textContent === 'Mark read' && document.querySelectorAll('#message-list .row.unread').length === 2`)
	if n := countWhere(t, off, "is:unread"); n != 2 {
		t.Errorf("%d unread through the API after opening both, want 2", n)
	}
}

// countWhere is how many of acme's emails match q, through the API.
func countWhere(t *testing.T, env *testenv.Env, q string) int {
	t.Helper()
	res := env.Do(t, "GET", "/v1/emails/count?q="+url.QueryEscape(q), testenv.AcmeKey, nil)
	if res.Status != http.StatusOK {
		t.Fatalf("count: %d %s", res.Status, res.Body)
	}
	return int(res.JSON(t)["count"].(float64))
}

// Counts over a thousand read with the separator of the browser's
// language: in the list's count, the confirmation and the mailboxes.
func TestCountsHaveThousandsSeparators(t *testing.T) {
	env := testenv.Start(t, testenv.Backend{Name: "embedded", Open: testenv.OpenEmbedded}, func(c *config.Config) { c.SMTP.MaxRecipients = 2000 })
	traffic.allow(strings.TrimPrefix(env.BaseURL, "http://"))
	// One message to 1,234 recipients stores 1,234 emails at once.
	var rcpts []string
	for i := range 1234 {
		rcpts = append(rcpts, fmt.Sprintf("user%d@acme.test", i))
	}
	raw := "Subject: Welcome\r\n\r\nHello.\r\n"
	if err := smtp.SendMail(env.SMTP, nil, "shop@acme.test", rcpts, []byte(raw)); err != nil {
		t.Fatalf("send to 1,234 recipients: %v", err)
	}
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("the count", `document.querySelector('#message-count').textContent === '1,234 messages'`)
	if hasSearch(t, env) {
		p.waitFor("the mailboxes' counts", `document.querySelector('#folder-all .folder-count')?.textContent === '1,234' && document.querySelector('#folder-unread .folder-count').textContent === '1,234'`)
	} else {
		t.Log("this server has no GET /v1/emails/stats: the mailboxes' counts are not checked")
	}
	p.click("#delete-matching")
	p.waitFor("the confirmation", `document.querySelector('#confirm[open]')`)
	if got := p.text("#confirm-text"); got != "Delete all 1,234 messages of Acme QA? This cannot be undone." {
		t.Errorf("the confirmation asks %q", got)
	}
	p.press(kb.Escape)
	p.waitFor("the confirmation closed", `!document.querySelector('#confirm')`)
}
