package gate

// Attacks on consume tokens: a consume whose commit was lost is picked up
// by its own holder only, and by nobody once that holder is gone.

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// Two identical re-sends of an approved retry-mode call: the first one's
// consume commits but answers an error, and the second arrives before the
// first retries. Each has its own token: the second finds the approval
// used (a consumed request is not shared: it asks for a new approval), the
// first's retry dispatches it; one dispatch.
func TestLostCommitResendDoesNotTakeTheConsume(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(retryPolicy(time.Minute))
		lc := &lostCommit{Store: db}
		g := New(lc, pol, &Options{RetryWait: 50 * time.Millisecond})
		watch(t, db, g)
		c := writeCall("/lost-resend")
		first := g.Admit(t.Context(), c)
		if first.Allowed || first.ApprovalID == "" {
			t.Fatalf("first call %+v, want approval required", first)
		}
		if _, err := g.Review(t.Context(), first.ApprovalID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		var second Admission
		lc.after = func(approval.ID) { second = g.Admit(context.Background(), c) }
		lc.armed.Store(true)
		run := g.Admit(t.Context(), c)
		if n := lc.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1", n)
		}
		if second.Allowed || second.ApprovalID == first.ApprovalID {
			t.Fatalf("the second re-send: %+v, want not allowed, asking for a new approval", second)
		}
		if !run.Allowed || run.ApprovalID != first.ApprovalID {
			t.Fatalf("the first re-send: %+v, want allowed via %s", run, first.ApprovalID)
		}
		run.Finish(t.Context(), approval.OutcomeOK)
		if n := consumedEvents(t, db, first.ApprovalID); n != 1 {
			t.Fatalf("%d consumed events, want 1", n)
		}
	})
}

// The held call's consume commits but answers an error, and its caller
// goes away before the retry: nothing is dispatched, the lease is
// released, and the sweeper records the outcome unknown (the call did not
// run, but nothing can say so more precisely); no later re-send of the
// call turns the consume into a dispatch.
func TestLostCommitCallerGoneDispatchesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		clk := newClock()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Minute))
		lc := &lostCommit{Store: db}
		g := New(lc, pol, clk.opts(&Options{}))
		watch(t, db, g)
		other := New(db, pol, clk.opts(&Options{}))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		lc.after = func(approval.ID) { cancel() }
		c := writeCall("/lost-gone")
		ch := admitAsync(ctx, g, c)
		r := waitPending(t, db, 1)[0]
		lc.armed.Store(true)
		if _, err := other.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		if a := recv(t, ch); a.Allowed {
			t.Fatalf("admission %+v, want refused (the caller is gone)", a)
		}
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeNone || cur.ConsumeToken == "" || !cur.LeaseLapsed(clk.now().Add(time.Millisecond)) {
			t.Fatalf("stored %s/%q token %q lease %v, want consumed, no outcome, a token, the lease released", cur.State, cur.DispatchOutcome, cur.ConsumeToken, cur.LeaseUntil)
		}
		// The identical call again: a new request, never this consume.
		actx, acancel := context.WithCancel(t.Context())
		again := admitAsync(actx, g, c)
		if rs := waitPending(t, db, 1); rs[0].ID == r.ID {
			t.Fatalf("the re-send waits on %s, want a new request", r.ID)
		}
		// Another instance's sweeper, steady for a lease (it says unknown
		// only then).
		other.sweep(t.Context())
		clk.add(time.Minute)
		other.sweep(t.Context())
		cur, err = db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.DispatchOutcome != approval.OutcomeUnknown {
			t.Fatalf("outcome after the sweep %q, want unknown", cur.DispatchOutcome)
		}
		if n := consumedEvents(t, db, r.ID); n != 1 {
			t.Fatalf("%d consumed events, want 1", n)
		}
		acancel()
		if a := recv(t, again); a.Allowed {
			t.Fatalf("the re-send, its caller gone: %+v, want not allowed", a)
		}
	})
}
