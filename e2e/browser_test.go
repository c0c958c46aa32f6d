package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath returns the Chromium binary the browser tests drive:
// $TOOLGATE_CHROMIUM (scripts/test.sh sets it), else chromium on PATH.
// Without one the test is skipped, or fails when TOOLGATE_REQUIRE_E2E=1 or
// CI is set: in CI a browser test must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TOOLGATE_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path != "" {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	msg := "no Chromium for the browser tests: install Debian's chromium package (scripts/test.sh does, as root) or set TOOLGATE_CHROMIUM"
	if os.Getenv("TOOLGATE_REQUIRE_E2E") == "1" || os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium with one tab, and what the pages did
// that a test must notice: JavaScript dialogs (an alert that ran) and
// console errors (a script error, a CSP violation).
type browser struct {
	t   *testing.T
	ctx context.Context //nolint:containedctx // chromedp names a tab by its context; browser owns the tab and cancels it on cleanup

	mu       sync.Mutex
	dialogs  []string // guarded by mu
	problems []string // guarded by mu
}

// newBrowser starts headless Chromium with a fresh profile and the flags
// that keep it off the network (the machine's network is closed; without
// them Chromium keeps calling blocked hosts). It is stopped on cleanup.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, b.event); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// event records dialogs and console errors. It runs on the tab's reading
// goroutine, so it must not block: a dialog is dismissed from another one.
func (b *browser) event(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
		go func() {
			_ = chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
				return err
			}))
		}()
	case *runtime.EventExceptionThrown:
		b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Text)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			b.problems = append(b.problems, "console."+string(e.Type))
		}
	case *log.EventEntryAdded:
		if e.Entry.Level == log.EntryLevelError {
			b.problems = append(b.problems, "log: "+e.Entry.Text)
		}
	}
}

// clean fails the test if a page opened a dialog or logged an error so far.
func (b *browser) clean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.t.Errorf("a page opened JavaScript dialogs (a script ran): %q", b.dialogs)
	}
	if len(b.problems) > 0 {
		b.t.Errorf("the browser console reported errors: %q", b.problems)
	}
}

// do runs steps, bounded by waitFor; it fails the test with what on error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.doWithin(waitFor(b.t), what, steps...)
}

// doWithin is do with its own bound.
func (b *browser) doWithin(d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v%s", what, err, b.location())
	}
}

// clickLive clicks the first element sel matches inside a region the page
// refreshes by itself (the inbox list). chromedp.Click resolves the node and
// then dispatches the mouse events in a second protocol call; a live refresh
// between the two replaces the node and the click fails with "Could not find
// node with given id" although a person's click (one event) could not miss.
// Here the element is found and clicked in one evaluation in the page, after
// it is visible.
func (b *browser) clickLive(what string, sel chromedp.CSS) {
	b.t.Helper()
	b.wait(waitFor(b.t), what, sel)
	expr := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, string(sel))
	if !eval[bool](b, expr) {
		b.t.Fatalf("browser: %s: %s is gone%s", what, sel, b.location())
	}
}

// location says where the tab is, for failure messages.
func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return ""
	}
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
	return fmt.Sprintf("\n(at %s)\n%s", loc, body)
}

// eval evaluates a JavaScript expression in the page (a promise is awaited).
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor(b.t))
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v%s", expr, err, b.location())
	}
	return v
}

// css is a CSS selector.
func css(format string, args ...any) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(format, args...)) }

// signIn signs in to the inbox at admin with token and waits until the
// inbox is live (its event stream is connected).
func (b *browser) signIn(admin, token string) {
	b.t.Helper()
	b.do("sign in",
		chromedp.Navigate(admin+"/ui/"),
		chromedp.WaitVisible(css(`input[name="token"]`)),
		chromedp.SendKeys(css(`input[name="token"]`), token),
		chromedp.Click(css(`[data-action="signin"]`)),
		chromedp.WaitVisible(css(`#live[data-live="on"]`)),
	)
	if loc := eval[string](b, `location.pathname`); loc != "/ui/" {
		b.t.Fatalf("after sign-in the browser is at %s, want /ui/", loc)
	}
}

// open navigates to path of admin and waits until its live updates are on.
func (b *browser) open(admin, path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(admin+path), chromedp.WaitVisible(css(`#live[data-live="on"]`)))
}

// wait waits until sel matches a visible element, bounded by d: a wait on
// the DOM, not a sleep. (chromedp.Poll would evaluate its predicate with
// new Function, which the inbox's CSP forbids.)
func (b *browser) wait(d time.Duration, what string, sel chromedp.CSS) {
	b.t.Helper()
	b.doWithin(d, what, chromedp.WaitVisible(sel))
}

// text is the text content of the first element sel matches, once one is
// in the page. It is read in the page in one evaluation: the live page may
// re-render the element between a DevTools node query and a read of that
// node ("No node with given id found", seen in CI under load).
func (b *browser) text(sel chromedp.CSS) string {
	b.t.Helper()
	b.doWithin(waitFor(b.t), "text of "+string(sel), chromedp.WaitReady(sel))
	expr := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return el ? [true, el.textContent] : [false, ""]; })()`, string(sel))
	v := eval[[]any](b, expr)
	if len(v) != 2 || v[0] != true {
		b.t.Fatalf("browser: text of %s: the element is gone%s", sel, b.location())
	}
	s, _ := v[1].(string)
	return strings.TrimSpace(s)
}

// recordRows makes the open page note, for every approval row that enters
// its DOM from now on, the moment it did (the browser's Date.now, on this
// machine's clock): rowShownAt then reads it. A MutationObserver callback
// runs right after the insertion, so the moment does not include how long
// the test itself took to look. (The script is evaluated over the DevTools
// protocol, which the page's CSP does not govern.)
func (b *browser) recordRows() {
	b.t.Helper()
	eval[bool](b, `(() => {
		const seen = window.toolgateTestRowsSeen = {};
		const note = (n) => {
			if (n.nodeType !== Node.ELEMENT_NODE) return;
			const rows = Array.from(n.querySelectorAll(".card[data-approval-id]"));
			if (n.matches(".card[data-approval-id]")) rows.push(n);
			const at = Date.now();
			rows.forEach((r) => { if (!(r.dataset.approvalId in seen)) seen[r.dataset.approvalId] = at; });
		};
		new MutationObserver((ms) => ms.forEach((m) => m.addedNodes.forEach(note)))
			.observe(document.body, {childList: true, subtree: true});
		return true;
	})()`)
}

// rowShownAt is when the row of approval id entered the page since
// recordRows (the page must not have been reloaded meanwhile).
func (b *browser) rowShownAt(id string) time.Time {
	b.t.Helper()
	ms := eval[int64](b, fmt.Sprintf(`(window.toolgateTestRowsSeen || {})[%q] || 0`, id))
	if ms == 0 {
		b.t.Fatalf("the page did not record when the row of %s appeared (was it reloaded?)", id)
	}
	return time.UnixMilli(ms)
}
