package gate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/eachstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// signalOffers makes g's hub report the calls offered to this process's
// decisions (hub.offer: the wait has started, the held call is
// subscribed to its request's wake-ups and, unless its admission created
// the request, has read it), for waitOffered. Call it before the call is
// admitted.
func signalOffers(g *Gate) <-chan approval.ID {
	offers := make(chan approval.ID, 64)
	g.hub.offered = func(id string) {
		select {
		case offers <- approval.ID(id):
		default:
		}
	}
	return offers
}

// readSignal is a store that reports the id of every GetRequest on read
// (dropped when read is full).
type readSignal struct {
	store.Store
	read chan approval.ID
}

func (s readSignal) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	select {
	case s.read <- id:
	default:
	}
	return s.Store.GetRequest(ctx, id)
}

// waitRead waits for a read of id on reads (readSignal's channel).
func waitRead(t *testing.T, reads <-chan approval.ID, id approval.ID) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-reads:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("the call held on %s never read its request", id)
		}
	}
}

// waitOffered waits until the call held on id is offered to this
// process's decisions (offers: signalOffers's channel).
func waitOffered(t *testing.T, offers <-chan approval.ID, id approval.ID) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-offers:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("the call held on %s was never offered", id)
		}
	}
}

// eachStore runs fn on SQLite and on a fresh Postgres database
// (eachstore.Run).
func eachStore(t *testing.T, fn func(t *testing.T, db *sqlstore.DB)) {
	t.Helper()
	eachstore.Run(t, fn)
}

// writes counts the request writes (transactions) fs saw.
func writes(fs *faulty) int {
	return fs.count("UpdateRequest") + fs.count("UpdateRequestWithChain") + fs.count("RecordDispatch") + fs.count("RecordOutcome")
}

// An approval of a call held in this process consumes it in the
// decision's own transaction: two request writes per approval (the
// decision with the consume, then the outcome with its ledger result)
// instead of three, and no read. The event log is the same as for a
// consume of its own: requested, reviewed, approved, consumed,
// dispatched. The reviewer is answered with the decision (approved).
func TestApprovalConsumesTheHeldCallInItsTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Minute))
		fs := newFaulty(db)
		g := New(fs, pol, &Options{})
		offers := signalOffers(g)
		ch := admitAsync(t.Context(), g, writeCall("/joined"))
		r := waitPending(t, db, 1)[0]
		waitOffered(t, offers, r.ID)
		fs.reset()
		got, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != approval.StateApproved || got.DecidedBy != alice.ID {
			t.Errorf("review answered %s by %q, want approved by alice", got.State, got.DecidedBy)
		}
		a := recv(t, ch)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("admission %+v, want allowed", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		if n := writes(fs); n != 2 {
			t.Errorf("%d request writes for one approval, want 2 (decision with consume, outcome)", n)
		}
		if n := fs.count("GetRequest"); n != 0 {
			t.Errorf("%d request reads after the review, want 0", n)
		}
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeOK || cur.DecidedBy != alice.ID {
			t.Fatalf("stored %s/%q decided by %q, want consumed/ok by alice", cur.State, cur.DispatchOutcome, cur.DecidedBy)
		}
		evs, err := db.Events(t.Context(), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		// Each event carries the state it left the request in, as a
		// decision and a consume in two changes would have (a webhook or
		// chat message about "approved" says approved).
		// The review and the approval are the reviewer's, the consume and
		// the dispatch the gateway's (newuser4: the consume was alice's).
		var logged []string
		for _, ev := range evs {
			if ev.RequestID == r.ID {
				logged = append(logged, string(ev.Type)+"/"+string(ev.State)+" by "+ev.Actor)
			}
		}
		want := []string{"requested/pending by " + agent.ID, "reviewed/approved by alice", "approved/approved by alice",
			"consumed/consumed by toolgate", "dispatched/consumed by toolgate"}
		if !slices.Equal(logged, want) {
			t.Fatalf("events %v, want %v", logged, want)
		}
	})
}

// A decision whose transaction finds the held call's caller gone does not
// consume for it in its transaction: no consumed event is written in the
// reviewer's change. (What the held call does next is as before: it may
// have taken the decision before it saw its context end.)
func TestJoinedConsumeSkipsACallerGone(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	fs := newFaulty(db)
	g := New(fs, pol, &Options{})
	offers := signalOffers(g)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	ch := admitAsync(ctx, g, writeCall("/gone"))
	r := waitPending(t, db, 1)[0]
	waitOffered(t, offers, r.ID)
	// The decision has claimed the call when its transaction starts; the
	// caller leaves right then.
	fs.beforeConsume = func() { cancel(errors.New("client gone")) }
	got, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateApproved {
		t.Fatalf("review answered %s, want approved", got.State)
	}
	if a := recv(t, ch); a.Allowed {
		a.Finish(t.Context(), approval.OutcomeCancelledAfterDispatch)
	}
	evs, err := db.Events(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.RequestID == r.ID && ev.Type == approval.EventConsumed && ev.Actor == alice.ID {
			t.Fatalf("the decision consumed the request of a caller gone (event %+v)", ev)
		}
	}
}

// With a quorum of two, the first approval leaves the request pending and
// the call's offer free; the second approves and consumes it in one
// transaction.
func TestJoinedConsumeWaitsForTheQuorum(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	p := testPolicy(time.Minute)
	p.Approval.Approvals = 2
	pol.p.Store(p)
	fs := newFaulty(db)
	g := New(fs, pol, &Options{})
	offers := signalOffers(g)
	reads := make(chan approval.ID, 64)
	g.store = readSignal{Store: g.store, read: reads}
	ch := admitAsync(t.Context(), g, writeCall("/quorum"))
	r := waitPending(t, db, 1)[0]
	waitOffered(t, offers, r.ID)
	fs.reset()
	first, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if first.State != approval.StatePending {
		t.Fatalf("after one of two approvals: %s, want pending", first.State)
	}
	// The first review woke the call (it re-reads and waits on, still
	// offered): wait for that before the second.
	waitRead(t, reads, r.ID)
	bob := approval.Principal{ID: "bob-reviewer", Kind: "human"}
	if _, err := g.Review(t.Context(), r.ID, bob, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("admission %+v, want allowed after the quorum", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if n := writes(fs); n != 3 {
		t.Errorf("%d request writes, want 3 (two reviews, the second with the consume; the outcome)", n)
	}
	cur, err := db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != approval.StateConsumed || len(cur.Reviews) != 2 || cur.DispatchOutcome != approval.OutcomeOK {
		t.Fatalf("stored %s with %d reviews, outcome %q; want consumed, 2, ok", cur.State, len(cur.Reviews), cur.DispatchOutcome)
	}
}

// claimOffer takes the offer of the call held on id, as a concurrent
// decision would, so that the next decision does not join its consume and
// the call consumes on its own after the wake-up (the path every decision
// took before the joined consume). release frees it, unused.
func claimOffer(t *testing.T, g *Gate, id approval.ID) (release func()) {
	t.Helper()
	_, c, _, rel := g.hub.claim(string(id))
	if c == nil {
		t.Fatalf("no call offered on %s", id)
	}
	return func() { rel(approval.Request{}, false) }
}
