package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestDispatchOutcomes runs approved calls through the real gate and a
// SQLite store and reads the dispatch outcome each one recorded: a call
// the caller cancels after it was sent upstream may have run, so it is
// cancelled_after_dispatch (it used to be transport_error); a result over
// the size limit is tool_error (the upstream ran it and answered); a call
// to an upstream that is down is transport_error (issue 9, item 17).
func TestDispatchOutcomes(t *testing.T) {
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}},
		&gate.Options{})
	h := newHooks()
	up := startRestartable(t, newUpstreamServer(h))
	gw := newGateway(t, []ServerConfig{{Name: "up", URL: up.url()}}, g, &Options{MaxResultBytes: 1 << 20})
	cs := connectHTTP(t, serveHTTP(t, gw, nil), aliceToken, nil, nil)
	approver := approval.Principal{ID: "carol", Kind: "human"}

	approveNext := func() approval.ID { t.Helper(); return approveOnlyPending(t, db, g, approver) }
	outcome := func(id approval.ID) approval.Outcome { t.Helper(); return waitOutcome(t, db, id) }

	t.Run("cancelled after dispatch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__sleep"})
			done <- err
		}()
		id := approveNext()
		if got := <-h.started; got != "sleep" { // it runs upstream
			t.Fatalf("started %q", got)
		}
		cancel()
		if err := <-done; err == nil {
			t.Error("the cancelled call returned no error")
		}
		if o := outcome(id); o != approval.OutcomeCancelledAfterDispatch {
			t.Errorf("outcome %q, want %q", o, approval.OutcomeCancelledAfterDispatch)
		}
	})
	t.Run("result over the limit", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, _ := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 2 << 20}})
			done <- res
		}()
		id := approveNext()
		if res := <-done; res == nil || !res.IsError || !strings.Contains(textOf(t, res), "max_result_bytes") {
			t.Errorf("result %+v, want an isError naming the limit", res)
		}
		if o := outcome(id); o != approval.OutcomeToolError {
			t.Errorf("outcome %q, want %q", o, approval.OutcomeToolError)
		}
	})
	t.Run("upstream down", func(t *testing.T) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, _ := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"down": true}})
			done <- res
		}()
		deadline := time.Now().Add(testWait)
		for { // held: stop the upstream before approving
			rs, _, _ := db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
			if len(rs) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("never held")
			}
			time.Sleep(10 * time.Millisecond)
		}
		up.stop()
		id := approveNext()
		if res := <-done; res == nil || !res.IsError || !strings.Contains(textOf(t, res), `upstream "up" is unavailable`) {
			t.Errorf("result %+v, want an isError naming the upstream", res)
		}
		if o := outcome(id); o != approval.OutcomeTransportError {
			t.Errorf("outcome %q, want %q", o, approval.OutcomeTransportError)
		}
	})
}

// approveOnlyPending waits until db has exactly one pending request,
// approves it through g as approver and returns its id.
func approveOnlyPending(t *testing.T, db store.Store, g *gate.Gate, approver approval.Principal) approval.ID {
	t.Helper()
	return reviewOnlyPending(t, db, g, approver, approval.VerdictApprove)
}

// reviewOnlyPending waits until db has exactly one pending request,
// decides it through g as approver with verdict v and returns its id.
func reviewOnlyPending(t *testing.T, db store.Store, g *gate.Gate, approver approval.Principal, v approval.Verdict) approval.ID {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			if _, err := g.Review(t.Context(), rs[0].ID, approver, v, "", ""); err != nil {
				t.Fatal(err)
			}
			return rs[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending requests, want 1", len(rs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitOutcome waits until request id records its dispatch outcome.
func waitOutcome(t *testing.T, db store.Store, id approval.ID) approval.Outcome {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		r, err := db.GetRequest(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.DispatchOutcome != approval.OutcomeNone {
			return r.DispatchOutcome
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %s has no dispatch outcome (state %s)", id, r.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
