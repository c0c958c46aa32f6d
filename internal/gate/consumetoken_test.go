package gate

// A consume that committed although its writer saw an error (the COMMIT's
// reply lost with the connection) is recognised by the holder that made
// it, by its consume token, and dispatched exactly once; any other holder
// still finds the approval used.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// errLostCommit is what a write whose COMMIT reached the database but whose
// reply did not answers: the store cannot tell it committed.
var errLostCommit = fmt.Errorf("commit: %w: connection terminated after COMMIT (injected)", store.ErrUnavailable)

// lostCommit is a real store whose first write that leaves a request
// consumed without an outcome, once armed, commits and then answers
// errLostCommit, as a consume whose COMMIT reply was lost does. after,
// when set, runs after that write, before the error is answered.
type lostCommit struct {
	store.Store
	armed atomic.Bool
	lost  atomic.Int32
	after func(id approval.ID)
}

func (s *lostCommit) lose(r approval.Request, err error) (approval.Request, error) {
	if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeNone || !s.armed.CompareAndSwap(true, false) {
		return r, err
	}
	s.lost.Add(1)
	if s.after != nil {
		s.after(r.ID)
	}
	return approval.Request{}, errLostCommit
}

func (s *lostCommit) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	return s.lose(s.Store.UpdateRequest(ctx, id, actor, fn))
}

func (s *lostCommit) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	return s.lose(s.Store.UpdateRequestWithChain(ctx, id, actor, fn))
}

// consumedEvents counts the consumed events of id in db's event log.
func consumedEvents(t *testing.T, db *sqlstore.DB, id approval.ID) int {
	t.Helper()
	evs, err := db.Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.RequestID == id && ev.Type == approval.EventConsumed {
			n++
		}
	}
	return n
}

// checkRanOnce checks that the held call's admission ch is the one
// dispatch of id (allowed, with the call's bytes, and no second answer),
// finishes it ok, and checks the stored request: consumed once, outcome
// ok.
func checkRanOnce(t *testing.T, db *sqlstore.DB, ch <-chan Admission, c Call, id approval.ID) {
	t.Helper()
	a := recv(t, ch)
	if !a.Allowed || a.ApprovalID != id || string(a.Arguments) != string(c.Arguments) {
		t.Fatalf("admission %+v, want allowed via %s with the call's arguments", a, id)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	select {
	case b := <-ch:
		t.Fatalf("a second admission %+v", b)
	default:
	}
	cur, err := db.GetRequest(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeOK || cur.ConsumeToken == "" {
		t.Fatalf("stored %s/%q token %q, want consumed/ok with a consume token", cur.State, cur.DispatchOutcome, cur.ConsumeToken)
	}
	if n := consumedEvents(t, db, id); n != 1 {
		t.Fatalf("%d consumed events, want 1", n)
	}
}

// The held call's own consume (the decision made by another process or
// instance) commits but answers an error: the retry finds the request
// consumed with the call's token and dispatches it, once (before, it
// found it "already used" and refused an approved call).
func TestLostCommitOfConsumeDispatchesOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Minute))
		lc := &lostCommit{Store: db}
		g := New(lc, pol, &Options{})
		watch(t, db, g)
		other := New(db, pol, &Options{}) // another instance: it has no call to join
		c := writeCall("/lost-consume")
		ch := admitAsync(t.Context(), g, c)
		r := waitPending(t, db, 1)[0]
		lc.armed.Store(true)
		if _, err := other.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		checkRanOnce(t, db, ch, c, r.ID)
		if n := lc.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1 (the consume's)", n)
		}
	})
}

// The decision's transaction consumes the call held here (the joined
// consume), commits, and answers an error: the reviewer is told it failed
// (a 503; its retry answers duplicate), and the held call, woken, finds
// the request consumed with its own token and dispatches it, once.
func TestLostCommitOfJoinedConsumeDispatchesOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Minute))
		lc := &lostCommit{Store: db}
		g := New(lc, pol, &Options{})
		watch(t, db, g)
		offers := signalOffers(g)
		c := writeCall("/lost-joined")
		ch := admitAsync(t.Context(), g, c)
		r := waitPending(t, db, 1)[0]
		waitOffered(t, offers, r.ID)
		lc.armed.Store(true)
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("review = %v, want the lost commit's error (ErrUnavailable)", err)
		}
		if n := lc.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1 (the decision's)", n)
		}
		checkRanOnce(t, db, ch, c, r.ID)
		// The reviewer's retry: the decision is recorded.
		cur, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", "")
		if !errors.Is(err, approval.ErrDuplicate) || cur.State != approval.StateConsumed {
			t.Fatalf("retried review = %s, %v; want consumed, ErrDuplicate", cur.State, err)
		}
	})
}

// A consume whose commit was lost, and whose outcome a sweeper recorded
// "unknown" before the holder's retry (its lease lapsed during an
// outage), is not dispatched: an outcome is final.
func TestLostCommitSweptUnknownIsNotDispatched(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Minute))
		lc := &lostCommit{Store: db}
		lc.after = func(id approval.ID) {
			// What another instance's sweeper writes for a lapsed lease.
			if _, err := db.UpdateRequest(context.Background(), id, "toolgate", func(r *approval.Request) error {
				return r.RecordOutcome(approval.OutcomeUnknown)
			}); err != nil {
				t.Error(err)
			}
		}
		g := New(lc, pol, &Options{})
		watch(t, db, g)
		other := New(db, pol, &Options{})
		ch := admitAsync(t.Context(), g, writeCall("/lost-swept"))
		r := waitPending(t, db, 1)[0]
		lc.armed.Store(true)
		if _, err := other.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, ch)
		if a.Allowed || !strings.Contains(a.Message, "unknown") {
			t.Fatalf("admission %+v, want refused naming the unknown outcome", a)
		}
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeUnknown {
			t.Fatalf("stored %s/%q, want consumed/unknown", cur.State, cur.DispatchOutcome)
		}
	})
}

// Only the holder that made a consume's token turns "already consumed"
// into a dispatch, and only while no outcome is recorded: the check every
// consume runs inside its transaction (consumeCheck.apply).
func TestConsumeTokenIsTheHoldersOnly(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	g := f.gate
	c := writeCall("/token")
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	mine := g.consumeCheck(c)
	theirs := g.consumeCheck(c)
	if mine.token == "" || mine.token == theirs.token {
		t.Fatalf("tokens %q and %q: want two different, non-empty", mine.token, theirs.token)
	}
	c.consumeToken = "held-call-token"
	if k := g.consumeCheck(c); k.token != c.consumeToken {
		t.Fatalf("a held call's check carries %q, want its token %q", k.token, c.consumeToken)
	}
	approved := func() *approval.Request {
		return &approval.Request{ID: "r1", State: approval.StateApproved, RequestedBy: agent.ID, Server: c.Server, Tool: c.Tool,
			ArgumentsHash: hash, ToolDigest: c.ToolDigest, ExpiresAt: g.now().Add(time.Hour),
			Reviews: []approval.Review{{By: "alice", Verdict: approval.VerdictApprove}}} // as Review leaves it
	}
	r := approved()
	if err := mine.apply(r, store.TxRead{}); err != nil || r.State != approval.StateConsumed || r.ConsumeToken != mine.token || r.HeldBy != g.instance {
		t.Fatalf("consume: %v, %s token %q held by %q; want consumed with its token, held here", err, r.State, r.ConsumeToken, r.HeldBy)
	}
	r.HeldBy, r.LeaseUntil = "", time.Time{}
	if err := mine.apply(r, store.TxRead{}); err != nil || r.State != approval.StateConsumed || r.HeldBy != g.instance || r.LeaseUntil.IsZero() {
		t.Fatalf("own consume again: %v, %s held by %q until %v; want consumed, the lease renewed here", err, r.State, r.HeldBy, r.LeaseUntil)
	}
	if err := theirs.apply(r, store.TxRead{}); !errors.Is(err, approval.ErrNotApproved) {
		t.Fatalf("another holder's consume of it: %v, want ErrNotApproved", err)
	}
	r.DispatchOutcome = approval.OutcomeUnknown
	if err := mine.apply(r, store.TxRead{}); !errors.Is(err, approval.ErrNotApproved) {
		t.Fatalf("own consume with its outcome recorded: %v, want ErrNotApproved", err)
	}
	old := approved()
	old.State = approval.StateConsumed // consumed before migration 15: no token
	if err := theirs.apply(old, store.TxRead{}); !errors.Is(err, approval.ErrNotApproved) {
		t.Fatalf("consume of a request consumed without a token: %v, want ErrNotApproved", err)
	}
	// settle: a consumed request is a refusal unless it carries c's token.
	other := c
	other.consumeToken = "another-holder"
	r2 := *old
	r2.ConsumeToken = "held-call-token"
	if a := g.settle(t.Context(), other, r2); a.Allowed {
		t.Fatalf("settle of another holder's consume: %+v, want refused", a)
	}
	if a := g.settle(t.Context(), Call{}, r2); a.Allowed {
		t.Fatalf("settle for a caller gone: %+v, want refused", a)
	}
}
