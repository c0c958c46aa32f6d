package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/store"
)

// verifyNoLeaks registers, first so that it runs after every other
// cleanup, a check that the test left no goroutine behind.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		// goleak.VerifyNone gives up after about two seconds; in a busy
		// full suite an SDK connection's reader can take longer than that
		// to see its closed body. Ask again until testWait: a goroutine
		// that is really left behind is still there then.
		deadline := time.Now().Add(testWait)
		for {
			err := goleak.Find(ignore)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// waitState waits until the store has n requests in state st.
func (f *leanFixture) waitState(t *testing.T, st approval.State, n int) []approval.Request {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: st})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests %s, want %d", len(rs), st, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// served checks that the lean front served exactly one POST since the
// last take, and that it was asked the policy once for it.
func (f *leanFixture) servedOnce(t *testing.T, what string, evalsBefore int64) {
	t.Helper()
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Errorf("%s: lean trail %v, want [true] (held by the lean front)", what, got)
	}
	if n := f.pol.n.Load() - evalsBefore; n != 1 {
		t.Errorf("%s: %d policy evaluations, want 1", what, n)
	}
}

// approvalOf is the approval id a refusal's _meta names.
func approvalOf(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	v, _ := res.Meta[approvalMetaKey].(map[string]any)
	id, _ := v["id"].(string)
	return id
}

// TestLeanFrontHoldsHeldCalls (issue 13): a plain call the policy holds,
// on a go-sdk client's 2025-11-25 session, is held by the lean front, and
// each way a held call ends gets the answer the SDK path gives: approved
// (the upstream's result, run once), denied by a human (an isError result
// naming the approval in _meta), cancelled by the agent (the client's
// context.Canceled, the request recorded as cancelled). One policy
// evaluation each, no goroutine left behind.
func TestLeanFrontHoldsHeldCalls(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	ctx := t.Context()
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()

	call := func(ctx context.Context, n int) chan callResult {
		c := make(chan callResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)})
			c <- callResult{res, err}
		}()
		return c
	}

	before := f.pol.n.Load()
	done := call(ctx, 3)
	f.approveNext(t)
	if r := <-done; r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(3) {
		t.Fatalf("held then approved: %+v %v", r.res, r.err)
	}
	f.servedOnce(t, "approved", before)
	if n := f.waitState(t, approval.StateConsumed, 1); len(n) != 1 {
		t.Fatal("the approved request is not consumed")
	}

	before = f.pol.n.Load()
	done = call(ctx, 4)
	f.reviewNext(t, approval.VerdictDeny)
	r := <-done
	if r.err != nil || !r.res.IsError || approvalOf(r.res) == "" || !strings.Contains(textOf(t, r.res), "denied") {
		t.Fatalf("held then denied: %+v %v; want an isError result naming the approval", r.res, r.err)
	}
	f.servedOnce(t, "denied", before)

	before = f.pol.n.Load()
	cctx, cancel := context.WithCancel(ctx)
	done = call(cctx, 5)
	f.waitState(t, approval.StatePending, 1)
	cancel()
	if r := <-done; !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled: %+v %v, want context.Canceled", r.res, r.err)
	}
	f.waitState(t, approval.StateCancelled, 1)
	f.servedOnce(t, "cancelled", before)
	if ran := f.h.count("big"); ran != 1 {
		t.Errorf("the upstream ran big %d times, want 1 (the approved call)", ran)
	}
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

// TestLeanHeldCallMaxHold: a call held past the gateway's MaxHold gets the
// pending answer (isError, the approval in _meta with how to resume) from
// the lean front, and its request stays pending.
func TestLeanHeldCallMaxHold(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixtureWith(t, &Options{MaxHold: time.Millisecond}, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()
	before := f.pol.n.Load()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":1}`)})
	if err != nil || !res.IsError || approvalOf(res) == "" {
		t.Fatalf("max hold: %+v %v; want the pending answer naming the approval", res, err)
	}
	f.servedOnce(t, "max hold", before)
	if rs := f.waitState(t, approval.StatePending, 1); string(rs[0].ID) != approvalOf(res) {
		t.Errorf("pending request %s, answer names %s", rs[0].ID, approvalOf(res))
	}
}

// heldPOST sends a plain up__big call as a raw POST on session sid and
// returns the response's lines as they arrive (closed at its end).
func heldPOST(t *testing.T, base, sid, version string) <-chan string {
	t.Helper()
	resp := sessionRequest(t, http.MethodPost, base, aliceToken, sid, version, //nolint:bodyclose // the reader goroutine below closes it
		strings.NewReader(`{"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"name":"up__big","arguments":{"n":2}}}`))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("held POST: %d %v, want 200 and an event stream", resp.StatusCode, resp.Header)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// answerOf waits for the data line of the stream's message event, counting
// the heartbeat comments before it.
func answerOf(t *testing.T, lines <-chan string) (data string, beats int) {
	t.Helper()
	timeout := time.After(testWait)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended without an answer")
			}
			if l == strings.TrimSpace(heartbeatComment) {
				beats++
			}
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				return d, beats
			}
		case <-timeout:
			t.Fatal("no answer on the held call's stream")
		}
	}
}

// TestLeanHeldCallKeepsItsSessionAndEndsWithIt: a call the lean front
// holds sends heartbeats; its session does not idle out while it is held,
// however long (the idle timeout passes several times over); a DELETE of
// the session ends it with the SDK path's answer (the caller went away,
// the approval stays pending).
func TestLeanHeldCallKeepsItsSessionAndEndsWithIt(t *testing.T) {
	verifyNoLeaks(t)
	// idle bounds the agent's connect too (initialize to its
	// notifications/initialized): at 300 ms a loaded -race run lost the
	// session before the call was sent (1 run in 20 or fewer).
	const idle = time.Second
	f := newLeanFixture(t, &HTTPOptions{SessionTimeout: idle, HeartbeatFirst: idle / 4, Heartbeat: idle / 4})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	f.trail.take()
	before := f.pol.n.Load()
	lines := heldPOST(t, f.base, sid, version)
	f.waitState(t, approval.StatePending, 1)
	// 12 heartbeats: three idle timeouts while held.
	for beats := 0; beats < 12; {
		select {
		case l := <-lines:
			if l == strings.TrimSpace(heartbeatComment) {
				beats++
			}
		case <-time.After(testWait):
			t.Fatalf("%d heartbeats on the held call's stream, want 12", beats)
		}
	}
	live := false
	f.g.leanRegs.Range(func(k, _ any) bool {
		live = k.(*leanSessions).get(sid) != nil
		return !live
	})
	if !live {
		t.Fatal("the session expired while the lean front held one of its calls")
	}
	if resp, _ := sessionExchange(t, http.MethodDelete, f.base, aliceToken, sid, version, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	data, _ := answerOf(t, lines)
	var m struct {
		ID     string              `json:"id"`
		Result *mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil || m.ID != "h-1" || m.Result == nil || !m.Result.IsError ||
		!strings.Contains(data, "went away") {
		t.Fatalf("answer after DELETE: %s (%v); want the isError 'went away' result under id h-1", data, err)
	}
	f.waitState(t, approval.StatePending, 1)
	f.servedOnce(t, "deleted", before)
}

// TestLeanHeldCallEndsOnClose: the gateway's Close ends a call the lean
// front holds (ErrShutdown) with the gate's answer for a caller gone, as on
// the SDK path, and the approval stays pending for a re-send.
func TestLeanHeldCallEndsOnClose(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	f.trail.take()
	lines := heldPOST(t, f.base, sid, version)
	f.waitState(t, approval.StatePending, 1)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := answerOf(t, lines); !strings.Contains(data, `"id":"h-1"`) || !strings.Contains(data, `"isError":true`) || !strings.Contains(data, "went away") {
		t.Fatalf("answer after Close: %s, want the isError 'went away' result under id h-1", data)
	}
	f.waitState(t, approval.StatePending, 1)
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Errorf("lean trail %v, want [true]", got)
	}
}

// leanFramesGatekeeper hands every call off as one to hold
// (AdmitUnlessHeld) and then admits it in place, recording the gateway's
// frames it was asked from (framesGatekeeper).
type leanFramesGatekeeper struct{ framesGatekeeper }

func (leanFramesGatekeeper) AdmitUnlessHeld(context.Context, *gate.Call, *gate.Admission) *gate.HandOff {
	return &gate.HandOff{}
}

// TestLeanHeldCallWaitsInSmallFrames: a call the lean front holds on its
// connection's goroutine (not parked) waits below admitCall, leanHold.wait
// and ServeHTTP only: the front's reading,
// decoding (serve, serveLean) and answering run in frames that have
// returned or not yet started (docs/performance.md, "Held calls at
// scale").
func TestLeanHeldCallWaitsInSmallFrames(t *testing.T) {
	gk := leanFramesGatekeeper{framesGatekeeper{frames: make(chan []string, 1)}}
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, gk, nil)
	trail := &leanTrail{}
	g.leanHook = trail.hook
	g.noPark = true // held on the connection's goroutine, not parked (leanpark.go)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	waitInitialized(t, g, cs.ID())
	trail.take()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError || textOf(t, res) != `{"x":1}` {
		t.Fatalf("call: %+v, %v; want the echo", res, err)
	}
	if got := trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("lean trail %v, want [true]", got)
	}
	want := []string{"(*Gateway).admitCall", "(*leanHold).wait", "(*httpFront).ServeHTTP"}
	if got := <-gk.frames; !slices.Equal(got, want) {
		t.Fatalf("the gatekeeper was asked from the gateway's frames %v, want %v", got, want)
	}
}
