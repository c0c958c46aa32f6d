package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// panicOnce returns a dispatch hook that panics on its first call after
// arm.Store(true), as a bug in the dispatch would.
func panicOnce(arm *atomic.Bool) func() {
	return func() {
		if arm.CompareAndSwap(true, false) {
			panic("attack12: the dispatch panics")
		}
	}
}

// TestLeanParkedCallPanicFailsClosed (attack12): a panic in the dispatch
// of an approved parked call (answered on the gate's goroutine, where
// nothing recovered) does not end the process: the caller gets a
// JSON-RPC internal error on its connection, the request's record says
// outcome "unknown" with that error in the result ledger, the upstream
// did not run, and the next parked call is approved, runs once and is
// answered as usual. No goroutine is left behind.
func TestLeanParkedCallPanicFailsClosed(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	var arm atomic.Bool
	f.g.dispatchHook = panicOnce(&arm) // before the front below serves
	base, parked := parkedFront(t, f, &HTTPOptions{DropGrace: time.Hour})

	arm.Store(true)
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernRequest(host, "5", "up__big", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	f.approveNext(t)
	resp, b := readRaw(t, bufio.NewReader(c))
	if parked.Load() != 1 {
		t.Fatalf("%d calls parked, want 1", parked.Load())
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":5,`)) || !bytes.Contains(b, []byte(`"code":-32603`)) ||
		!bytes.Contains(b, []byte("may or may not have run")) {
		t.Fatalf("answer after a panic: %d %s", resp.StatusCode, b)
	}
	if arm.Load() {
		t.Fatal("the dispatch hook never ran")
	}
	outs := f.waitOutcomes(t, 1)
	if outs[0] != approval.OutcomeUnknown {
		t.Fatalf("outcome %q, want unknown", outs[0])
	}
	rs := f.waitState(t, approval.StateConsumed, 1)
	res, err := f.db.GetResult(t.Context(), rs[0].ID)
	if err != nil || !bytes.Contains(res.Error, []byte(`-32603`)) {
		t.Fatalf("ledger of the panicked call: %+v %v", res, err)
	}
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("big ran %d times, want 0", n)
	}

	// The process and the gateway go on.
	c2, host := dialRaw(t, base)
	if _, err := io.WriteString(c2, rawModernRequest(host, "6", "up__big", `{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	f.approveNext(t)
	resp, b = readRaw(t, bufio.NewReader(c2))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":6,`)) || bytes.Contains(b, []byte(`"error"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		t.Fatalf("the next call: %d %s", resp.StatusCode, b)
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLeanCallPanicAnswersAnError (attack12): a panic in the dispatch of
// a 2026-07-28 call the policy allows at once (answered on the
// connection's goroutine, where net/http recovered it by dropping the
// connection: the agent saw EOF) is answered with a JSON-RPC internal
// error; the gateway goes on.
func TestLeanCallPanicAnswersAnError(t *testing.T) {
	f := newLeanFixture(t, nil)
	var arm atomic.Bool
	f.g.dispatchHook = panicOnce(&arm)
	base := serveHTTP(t, f.g, nil)
	arm.Store(true)
	st, _, b := modernPost(t, base, "up__echo", modernCallBody("3", "up__echo", `{"x":1}`, ""), nil)
	if st != http.StatusOK || !bytes.Contains(b, []byte(`"code":-32603`)) || !bytes.Contains(b, []byte("may or may not have run")) {
		t.Fatalf("answer after a panic: %d %s", st, b)
	}
	st, _, b = modernPost(t, base, "up__echo", modernCallBody("4", "up__echo", `{"x":2}`, ""), nil)
	if st != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("the next call: %d %s", st, b)
	}
	<-f.h.args
}
