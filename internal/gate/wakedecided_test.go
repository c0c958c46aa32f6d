package gate

import (
	"context"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// A call held in this process and approved in this process acts on the
// decided request the review hands it with the wake-up: it does not read
// the request again before consuming it (one read per approval fewer;
// docs/performance.md, "Approving them all"). The gate has no store
// watcher here, so the review's wake-up is the only one.
func TestWokenCallTakesTheDecisionFromTheWake(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	fs := newFaulty(db)
	g := New(fs, pol, &Options{})
	for _, v := range []approval.Verdict{approval.VerdictApprove, approval.VerdictDeny} {
		t.Run(string(v), func(t *testing.T) {
			ch := admitAsync(t.Context(), g, writeCall("/"+string(v)))
			r := waitPending(t, db, 1)[0]
			fs.reset()
			if _, err := g.Review(t.Context(), r.ID, alice, v, "ok", ""); err != nil {
				t.Fatal(err)
			}
			a := recv(t, ch)
			if a.Allowed != (v == approval.VerdictApprove) || a.ApprovalID != r.ID {
				t.Fatalf("admission %+v after %s", a, v)
			}
			if n := fs.count("GetRequest"); n != 0 {
				t.Errorf("the woken call read its request %d times after the review; want 0", n)
			}
			if a.Allowed {
				a.Finish(t.Context(), approval.OutcomeOK)
			}
		})
	}
}

// withdrawAfterApprove is a store on which a request, right after a
// review approved it and before the review's wake-up reaches the held
// call, is withdrawn (cancelled) by someone else: the row the wake-up
// carries is stale.
type withdrawAfterApprove struct {
	store.Store
}

func (s withdrawAfterApprove) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	r, err := s.Store.UpdateRequest(ctx, id, actor, fn)
	if err == nil && actor == alice.ID && r.State == approval.StateApproved {
		if _, werr := s.Store.UpdateRequest(ctx, id, "someone-else", func(cur *approval.Request) error { return cur.Withdraw(time.Now()) }); werr != nil {
			return r, werr
		}
	}
	return r, err
}

// A held call woken with a decided request that moved after the decision
// (here withdrawn between the approval and the wake-up) does not run: its
// consume re-checks the stored row and fails, and the call is answered
// with the stored state.
func TestWokenCallWhoseRequestMovedDoesNotRun(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	g := New(withdrawAfterApprove{Store: db}, pol, &Options{})
	offers := signalOffers(g)
	ch := admitAsync(t.Context(), g, writeCall("/moved"))
	r := waitPending(t, db, 1)[0]
	// The decision does not consume the call in its own transaction (the
	// call's offer is taken), so the call consumes the row it was handed.
	waitOffered(t, offers, r.ID)
	release := claimOffer(t, g, r.ID)
	got, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
	release()
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateApproved {
		t.Fatalf("review returned %s, want the (now stale) approved row", got.State)
	}
	a := recv(t, ch)
	if a.Allowed || !strings.Contains(a.Message, "cancelled") {
		t.Fatalf("admission %+v, want a refusal naming the cancellation", a)
	}
	cur, err := db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != approval.StateCancelled || cur.DispatchOutcome != approval.OutcomeNone {
		t.Fatalf("stored request %s outcome %q, want cancelled and never dispatched", cur.State, cur.DispatchOutcome)
	}
}

// The consume of a call made without a session does not ask the store for
// the requesting session's chain (a read of the sessions table inside the
// consume's transaction that it would ignore); a session's call still does
// (TestSessionRevokedBetweenApprovalAndDispatch and the other session tests check what
// it re-checks).
func TestSessionlessConsumeReadsNoChain(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	fs := newFaulty(db)
	g := New(fs, pol, &Options{})
	ch := admitAsync(t.Context(), g, writeCall("/nochain"))
	r := waitPending(t, db, 1)[0]
	if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("admission %+v", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if n := fs.count("UpdateRequestWithChain"); n != 0 {
		t.Errorf("a sessionless consume read the session chain (%d UpdateRequestWithChain)", n)
	}
	cur, err := db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("stored %s/%q, want consumed/ok", cur.State, cur.DispatchOutcome)
	}
}
