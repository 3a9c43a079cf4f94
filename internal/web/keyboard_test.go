package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/mailsink/mailsink/internal/testenv"
)

// Move through the list, open and delete messages, search and get help,
// all from the keyboard.
func TestKeyboardShortcuts(t *testing.T) {
	env := startMailsink(t)
	ids := seed(t, env, 4) // the list shows Order #3, #2, #1, #0
	p := openTab(t, env)
	p.signIn(testenv.AcmeKey)
	p.waitFor("the list", `document.querySelectorAll('#message-list .row').length === 4`)
	focused := func() string {
		return eval[string](p, `document.activeElement.closest('.row')?.querySelector('.subject').textContent || ''`)
	}

	p.shortcut("j")
	if got := focused(); got != "Order #3" {
		t.Errorf("after j the cursor is on %q, want Order #3", got)
	}
	p.shortcut("j")
	p.shortcut("j")
	p.shortcut("k")
	if got := focused(); got != "Order #2" {
		t.Errorf("after j j j k the cursor is on %q, want Order #2", got)
	}
	p.press(kb.Enter)
	p.waitFor("Order #2 open", `document.querySelector('#message-subject')?.textContent === 'Order #2'`)
	p.shortcut("j")
	p.shortcut("o")
	p.waitFor("Order #1 open", `document.querySelector('#message-subject')?.textContent === 'Order #1'`)

	// # deletes the open message, and the next one opens.
	p.shortcut("#")
	p.waitFor("Order #0 open after the delete", `document.querySelector('#message-subject')?.textContent === 'Order #0'`)
	if res := env.Do(t, "GET", "/v1/emails/"+ids[1], testenv.AcmeKey, nil); res.Status != http.StatusNotFound {
		t.Errorf("Order #1 after #: GET answers %d, want 404", res.Status)
	}
	p.press(kb.Delete)
	p.waitFor("two left, and Order #2 open under the cursor", `document.querySelectorAll('#message-list .row').length === 2 &&
		document.querySelector('#message-subject')?.textContent === 'Order #2' && document.activeElement.closest('.row')?.dataset.id === location.hash.slice(9)`)
	testenv.WaitFor(t, 10*time.Second, "Order #0 deleted", func() bool {
		return env.Do(t, "GET", "/v1/emails/"+ids[0], testenv.AcmeKey, nil).Status == http.StatusNotFound
	})

	// / searches; keys typed there are text, not shortcuts.
	p.shortcut("/")
	if got := eval[string](p, "document.activeElement.id"); got != "filter-subject" {
		t.Fatalf("after / the focus is on %q, want the subject search", got)
	}
	p.press("#3")
	p.waitFor("the search", `document.querySelectorAll('#message-list .row').length === 1`)
	p.press(kb.Escape)

	// ? shows the help; Escape closes it.
	p.shortcut("?")
	p.waitFor("the help", `document.querySelector('#help').open && document.querySelector('#help').innerText.includes('Next message')`)
	p.press(kb.Escape)
	p.waitFor("the help closed", `!document.querySelector('#help').open`)
}
