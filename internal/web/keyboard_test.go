package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/mailsink/mailsink/internal/testenv"
)

// Move through the list, open and delete messages (and undo), search and
// get help, all from the keyboard; after a click into the preview the keys
// still work.
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
	watchPreviewLoads(p)
	p.press(kb.Enter)
	p.waitFor("Order #2 open", `document.querySelector('#message-subject')?.textContent === 'Order #2'`)

	// A click into the preview takes the keyboard; back on the list, the
	// keys are the page's again.
	p.waitFor("the preview", `window.frameLoads === 1`)
	p.clickInPreview(10, 10)
	p.waitFor("the keyboard in the preview", `document.activeElement.id === 'preview-frame'`)
	p.mouseOver("#message-list")
	p.waitFor("the keyboard back on the page", `document.activeElement.id === 'message-view'`)
	p.shortcut("j")
	if got := focused(); got != "Order #1" {
		t.Errorf("after a click into the preview and j, the cursor is on %q, want Order #1", got)
	}
	p.shortcut("o")
	p.waitFor("Order #1 open", `document.querySelector('#message-subject')?.textContent === 'Order #1'`)

	// # deletes the open message, and the next one opens; z brings it back.
	p.shortcut("#")
	p.waitFor("Order #0 open after the delete", `document.querySelector('#message-subject')?.textContent === 'Order #0' && !document.querySelector('#undo-bar').hidden`)
	p.shortcut("z")
	p.waitFor("Order #1 back and open", `document.querySelectorAll('#message-list .row').length === 4 && document.querySelector('#message-subject')?.textContent === 'Order #1'`)
	p.shortcut("#")
	p.waitFor("Order #0 open after the delete", `document.querySelector('#message-subject')?.textContent === 'Order #0'`)
	// Another delete: the first goes now, the second waits for its undo.
	p.press(kb.Delete)
	p.waitFor("two left, and Order #2 open under the cursor", `document.querySelectorAll('#message-list .row').length === 2 &&
		document.querySelector('#message-subject')?.textContent === 'Order #2' && document.activeElement.closest('.row')?.dataset.id === location.hash.slice(9)`)
	testenv.WaitFor(t, 10*time.Second, "Order #1 deleted", func() bool {
		return env.Do(t, "GET", "/v1/emails/"+ids[1], testenv.AcmeKey, nil).Status == http.StatusNotFound
	})
	if res := env.Do(t, "GET", "/v1/emails/"+ids[0], testenv.AcmeKey, nil); res.Status != http.StatusOK {
		t.Errorf("Order #0, whose undo has not passed: GET answers %d, want 200", res.Status)
	}

	// / goes to the search; keys typed there are text, not shortcuts.
	p.shortcut("/")
	if got := eval[string](p, "document.activeElement.id"); got != "search" {
		t.Fatalf("after / the focus is on %q, want the search", got)
	}
	p.press("#j")
	if got := eval[string](p, "document.querySelector('#search').value"); got != "#j" {
		t.Errorf("typed into the search: %q, want #j", got)
	}
	p.press(kb.Escape)
	if n := eval[int](p, `document.querySelectorAll('#message-list .row').length`); n != 2 {
		t.Errorf("%d rows after typing # into the search, want 2 (nothing deleted)", n)
	}

	// ? shows the help; Escape closes it.
	p.shortcut("?")
	p.waitFor("the help", `document.querySelector('#help').open && document.querySelector('#help').innerText.includes('Undo the delete')`)
	p.press(kb.Escape)
	p.waitFor("the help closed", `!document.querySelector('#help').open`)

	// Left alone, the undo bar goes after a few seconds, and the delete with it.
	testenv.WaitFor(t, 10*time.Second, "Order #0 deleted when its undo passed", func() bool {
		return env.Do(t, "GET", "/v1/emails/"+ids[0], testenv.AcmeKey, nil).Status == http.StatusNotFound
	})
	p.waitFor("the undo bar gone", `document.querySelector('#undo-bar').hidden`)
}

// mouseOver moves the mouse over the element, as a hand does: in a few
// steps, ending in its middle.
func (p *page) mouseOver(sel string) {
	p.t.Helper()
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdppage.BringToFront, cdp.Empty{})
		return err
	}))
	at := eval[[]float64](p, `new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
		const r = document.querySelector(`+js(sel)+`).getBoundingClientRect();
		done([r.left + r.width / 2, r.top + r.height / 2]);
	})))`)
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, d := range []float64{6, 3, 0} {
			if _, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{
				Type: input.DispatchMouseEventTypeMouseMoved, X: at[0] + d, Y: at[1] + d,
			}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// clickInPreview clicks the mouse at x, y inside the preview frame, as a
// person would: the page cannot look into the sandboxed frame, so the
// click goes by position.
func (p *page) clickInPreview(x, y float64) {
	p.t.Helper()
	// A tab a link opened may be in front: the person comes back first,
	// and clicks once the frame is painted.
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdppage.BringToFront, cdp.Empty{})
		return err
	}))
	at := eval[[]float64](p, `new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {
		const r = document.querySelector('#preview-frame').getBoundingClientRect();
		done([r.left, r.top]);
	})))`)
	p.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, typ := range []input.DispatchMouseEventType{input.DispatchMouseEventTypeMouseMoved, input.DispatchMouseEventTypeMousePressed, input.DispatchMouseEventTypeMouseReleased} {
			if _, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{
				Type: typ, X: at[0] + x, Y: at[1] + y, Button: input.MouseButtonLeft, ClickCount: 1,
			}); err != nil {
				return err
			}
		}
		return nil
	}))
}
