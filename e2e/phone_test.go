package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestInboxFitsAPhone: on a phone-sized viewport (390×844 CSS pixels) the
// inbox, a detail page, the history and the grants page are no wider than
// the screen, so nothing (the "Approve selected" button was) sits off to
// the right where only a sideways scroll reaches it.
func TestInboxFitsAPhone(t *testing.T) {
	g, _, _ := inboxGateway(t)
	b := newBrowser(t)
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	cs := g.connect(t, nil, nil)
	const args = `{"amount":5000,"to":"acct-9","memo":"quarterly settlement for the merchant account"}`
	callAsync(t.Context(), cs, toolCall("t__echo_raw", args))
	a := awaitPendingArgs(t, g.Admin, args)
	b.signIn(g.Admin, approverToken)
	b.wait(waitFor(t), "the held call's row", css(`.card[data-approval-id="%s"]`, a.ID))
	pages := []struct{ path, ready string }{
		{"/ui/", `.card[data-approval-id="` + a.ID + `"]`},
		{"/ui/approvals/" + a.ID, `article[data-approval-id="` + a.ID + `"]`},
		{"/ui/history", `main h1`},
		{"/ui/grants", `main h1`},
	}
	for _, p := range pages {
		if p.path != "/ui/" {
			b.do("open "+p.path, chromedp.Navigate(g.Admin+p.path))
		}
		b.wait(waitFor(t), p.path, css("%s", p.ready))
		if w := eval[int](b, `window.innerWidth`); w != 390 {
			t.Fatalf("%s: the viewport is %d pixels wide, want 390", p.path, w)
		}
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
			wide := eval[string](b, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > 390.5).map(e => e.tagName.toLowerCase() + (e.className ? "." + String(e.className).split(" ").join(".") : "")).slice(0, 8).join(", ")`)
			t.Errorf("%s is %d pixels wide on a 390-pixel screen; past its right edge: %s", p.path, w, wide)
		}
	}
}
