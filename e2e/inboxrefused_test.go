package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestInboxStopsWhenItsPositionIsRefused: when the gateway refuses the
// inbox page's event stream because the page's position (data-since) is
// not in its event log (422, e.g. after the gateway moved to another
// store), the page stops, says so in the live indicator and opens no
// new stream; a reload starts from the log's current end and is live
// again (polish16; before, the script reconnected every 3 s forever with
// the indicator off and no word).
func TestInboxStopsWhenItsPositionIsRefused(t *testing.T) {
	g, _, _ := inboxGateway(t)
	b := newBrowser(t)
	b.signIn(g.Admin, approverToken)

	// The next page load gets a position from another store (a Postgres
	// cursor; this gateway is on SQLite), set before app.js runs (it is
	// deferred: it runs after readyState turns interactive), and counts
	// the EventSources the page opens.
	var script page.ScriptIdentifier
	b.do("inject a foreign position", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
			window.__streams = 0;
			const Real = window.EventSource;
			window.EventSource = class extends Real {
				constructor(url, opts) { super(url, opts); window.__streams++; }
			};
			document.addEventListener("readystatechange", () => {
				if (document.readyState === "interactive") document.body.dataset.since = "7312.2";
			}, { once: true });`})
		script = res.Identifier
		return err
	}))
	b.do("open the inbox with a foreign position", chromedp.Navigate(g.Admin+"/ui/"))
	b.wait(waitFor(t), "the refusal in the live indicator", css(`#live[data-live="refused"]`))
	if got, want := b.text(css(`#live`)), "this page's position is not in this gateway's log: reload"; got != want {
		t.Errorf("live indicator says %q, want %q", got, want)
	}
	if since := eval[string](b, `document.body.dataset.since`); since != "7312.2" {
		t.Fatalf("the page's position is %q: the injection did not run", since)
	}
	// The refusal is final: the page stopped (no reconnect is scheduled
	// after a 422; the old script opened a new stream every 3 s).
	if n := eval[int](b, `window.__streams`); n != 1 {
		t.Errorf("the page opened %d event streams, want 1", n)
	}

	b.do("reload without the foreign position",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.RemoveScriptToEvaluateOnNewDocument, page.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: script})
			return err
		}),
		chromedp.Reload(),
		chromedp.WaitVisible(css(`#live[data-live="on"]`)))
	if got := b.text(css(`#live`)); !strings.Contains(got, "live") {
		t.Errorf("after a reload the live indicator says %q, want live", got)
	}
}
