package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// TestLeanHeldCallPanicFailsClosed (attack12): a panic in the dispatch of
// an approved call held by the lean front for a go-sdk client's
// 2025-11-25 session (answered on the connection's goroutine: net/http
// recovered the panic by dropping the connection, and the request stayed
// consumed without an outcome while this process renewed its dispatch
// lease) answers the client a JSON-RPC internal error, records outcome
// "unknown", and the session goes on.
func TestLeanHeldCallPanicFailsClosed(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	var arm atomic.Bool
	f.g.dispatchHook = panicOnce(&arm)
	base := serveHTTP(t, f.g, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	call := func(n int) chan callResult {
		c := make(chan callResult, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)})
			c <- callResult{res, err}
		}()
		return c
	}
	arm.Store(true)
	done := call(1)
	f.approveNext(t)
	r := <-done
	var we *jsonrpc.Error
	if !errors.As(r.err, &we) || we.Code != jsonrpc.CodeInternalError || !strings.Contains(we.Message, "may or may not have run") {
		t.Fatalf("answer after a panic: %+v %v, want a JSON-RPC internal error", r.res, r.err)
	}
	if outs := f.waitOutcomes(t, 1); outs[0] != approval.OutcomeUnknown {
		t.Fatalf("outcome %q, want unknown", outs[0])
	}
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("big ran %d times, want 0", n)
	}
	done = call(2)
	f.approveNext(t)
	if r := <-done; r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(2) {
		t.Fatalf("the next call: %+v %v", r.res, r.err)
	}
}
