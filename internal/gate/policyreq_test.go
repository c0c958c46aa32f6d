package gate

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

func tools(rs ...string) *[]string { return &rs }

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time           { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration)      { c.ns.Add(int64(d)) }
func (c *clock) opts(o *Options) *Options { o.Now = c.now; return o }

// newPolicyFixture returns a gate on db (eachStore's) with servers fs and
// pay and a root session (on behalf of carol) that may use fs__read and
// fs__write.
func newPolicyFixture(t *testing.T, db *sqlstore.DB) (*fixture, *clock, session.Session, approval.Principal) {
	t.Helper()
	clk := newClock()
	f := newFixtureOn(t, db, time.Minute, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
	f.pol.p.Store(allowAll())
	s, p := mustSession(t, f.gate, host, session.NewSession{Tools: []string{"fs__read", "fs__write"}})
	return f, clk, s, p
}

func mustRequest(t *testing.T, g *Gate, p approval.Principal, ch session.Change) PolicyResult {
	t.Helper()
	res, err := g.RequestSessionPolicy(t.Context(), p, session.ID(p.SessionID), ch)
	if err != nil {
		t.Fatalf("RequestSessionPolicy = %v", err)
	}
	return res
}

func currentSession(t *testing.T, g *Gate, id session.ID) session.Session {
	t.Helper()
	c, err := g.SessionChain(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func approve(t *testing.T, g *Gate, id approval.ID) {
	t.Helper()
	if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
		t.Fatalf("approve %s = %v", id, err)
	}
}

func TestPolicyRequestNarrowingAppliesAndVoidsOlderRequests(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		wide := mustRequest(t, f.gate, p, session.Change{Tools: tools("fs")})
		if wide.Status != PolicyApprovalRequired {
			t.Fatalf("widening status = %s", wide.Status)
		}
		res := mustRequest(t, f.gate, p, session.Change{Tools: tools("fs__read")})
		if res.Status != PolicyApplied || !res.Changed || res.Session.Revision != s.Revision+1 {
			t.Fatalf("narrowing = %+v, want applied at revision %d", res, s.Revision+1)
		}
		if got := currentSession(t, f.gate, s.ID); !cmp.Equal(got.Tools, []string{"fs__read"}) {
			t.Errorf("tools = %v", got.Tools)
		}
		old, err := f.db.GetRequest(t.Context(), wide.Approval.ID)
		if err != nil {
			t.Fatal(err)
		}
		if old.State != approval.StateCancelled || old.Reason != ReasonPolicyRevision {
			t.Errorf("older pending request = %s (%q), want cancelled because the revision moved", old.State, old.Reason)
		}
		// Asking for what it already has changes nothing.
		res = mustRequest(t, f.gate, p, session.Change{Tools: tools("fs__read")})
		if res.Status != PolicyApplied || res.Changed || res.Session.Revision != s.Revision+1 {
			t.Errorf("no-op = %+v", res)
		}
	})
}

func TestPolicyRequestWideningNeedsApprovalOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		ch := session.Change{Tools: tools("fs", "pay")}
		res := mustRequest(t, f.gate, p, ch)
		if res.Status != PolicyApprovalRequired || res.Approval.Kind != approval.KindSessionPolicy ||
			res.Approval.Target != string(s.ID) || res.Approval.BaseRevision != s.Revision || res.Approval.RequestedBy != p.ID {
			t.Fatalf("widening = %+v", res)
		}
		if got := currentSession(t, f.gate, s.ID); got.Revision != s.Revision {
			t.Fatalf("revision moved to %d before approval", got.Revision)
		}
		if again := mustRequest(t, f.gate, p, ch); again.Approval.ID != res.Approval.ID {
			t.Errorf("identical pending request made a new approval %s, want %s", again.Approval.ID, res.Approval.ID)
		}
		approve(t, f.gate, res.Approval.ID)
		// A different proposal does not use the approval.
		if other := mustRequest(t, f.gate, p, session.Change{Tools: tools("fs")}); other.Status != PolicyApprovalRequired || other.Approval.ID == res.Approval.ID {
			t.Fatalf("different proposal = %+v", other)
		}
		got := mustRequest(t, f.gate, p, ch)
		if got.Status != PolicyApplied || got.Session.Revision != s.Revision+1 || !cmp.Equal(got.Session.Tools, []string{"fs", "pay"}) {
			t.Fatalf("identical retry = %+v", got)
		}
		if r, _ := f.db.GetRequest(t.Context(), res.Approval.ID); r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
			t.Errorf("approval = %s/%s, want consumed/ok", r.State, r.DispatchOutcome)
		}
		// Asking again for what it now has applies nothing new; widening again
		// (after a narrowing) needs a new approval.
		mustRequest(t, f.gate, p, session.Change{Tools: tools("fs")})
		if again := mustRequest(t, f.gate, p, ch); again.Status != PolicyApprovalRequired || again.Approval.ID == res.Approval.ID {
			t.Errorf("second identical retry = %+v, want a new approval", again)
		}
	})
}

func TestPolicyRequestConcurrentRetriesApplyOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		ch := session.Change{RequireApproval: map[string]session.Requirement{}, Tools: tools("fs", "pay")}
		res := mustRequest(t, f.gate, p, ch)
		approve(t, f.gate, res.Approval.ID)
		const n = 8
		var wg sync.WaitGroup
		var applied atomic.Int32
		for range n {
			wg.Go(func() {
				r, err := f.gate.RequestSessionPolicy(t.Context(), p, s.ID, ch)
				if err == nil && r.Status == PolicyApplied && r.Changed {
					applied.Add(1)
				}
			})
		}
		wg.Wait()
		if applied.Load() != 1 {
			t.Errorf("%d retries applied the change, want 1", applied.Load())
		}
		if got := currentSession(t, f.gate, s.ID); got.Revision != s.Revision+1 {
			t.Errorf("revision = %d, want %d", got.Revision, s.Revision+1)
		}
	})
}

func TestPolicyRequestCeilingAndMixed(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		child, cp := mustSession(t, f.gate, p, session.NewSession{Tools: []string{"fs__read"},
			RequireApproval: map[string]session.Requirement{"fs": {All: true}}})
		// Mixed narrowing (raise nothing, drop write) and widening: nothing applies.
		mixed := mustRequest(t, f.gate, cp, session.Change{Tools: tools("fs__write"), RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"read"}}}})
		if mixed.Status != PolicyApprovalRequired {
			t.Fatalf("mixed = %+v", mixed)
		}
		if got := currentSession(t, f.gate, child.ID); got.Revision != child.Revision || !cmp.Equal(got.Tools, []string{"fs__read"}) {
			t.Fatalf("mixed applied something: %+v", got)
		}
		// Past the parent: 403 even after an approver approved something similar.
		similar := mustRequest(t, f.gate, cp, session.Change{Tools: tools("fs__read", "fs__write")})
		approve(t, f.gate, similar.Approval.ID)
		_, err := f.gate.RequestSessionPolicy(t.Context(), cp, child.ID, session.Change{Tools: tools("fs__read", "fs__write", "pay__refund"),
			RequireApproval: map[string]session.Requirement{"fs": {All: true}}})
		if !errors.Is(err, session.ErrCeiling) {
			t.Fatalf("past the ceiling = %v, want ErrCeiling", err)
		}
		if got := currentSession(t, f.gate, child.ID); got.Revision != child.Revision {
			t.Errorf("ceiling refusal applied something: revision %d", got.Revision)
		}
		// Not its own session.
		if _, err := f.gate.RequestSessionPolicy(t.Context(), cp, s.ID, session.Change{Tools: tools()}); !errors.Is(err, ErrNotOwnSession) {
			t.Errorf("other session = %v, want ErrNotOwnSession", err)
		}
	})
}

func TestPolicyRequestSelfReviewAndDenial(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		ch := session.Change{Tools: tools("fs")}
		res := mustRequest(t, f.gate, p, ch)
		for _, who := range []approval.Principal{{ID: p.ID}, {ID: s.OnBehalfOf}} {
			if _, err := f.gate.Review(t.Context(), res.Approval.ID, who, approval.VerdictApprove, "", ""); !errors.Is(err, approval.ErrSelfReview) {
				t.Errorf("review by %s = %v, want ErrSelfReview", who.ID, err)
			}
		}
		if _, err := f.gate.Review(t.Context(), res.Approval.ID, alice, approval.VerdictDeny, "not today", ""); err != nil {
			t.Fatal(err)
		}
		denied := mustRequest(t, f.gate, p, ch)
		if denied.Status != PolicyDenied || denied.Approval.Reason != "not today" || denied.Answer().Reason != "not today" {
			t.Fatalf("after denial = %+v", denied)
		}
		if next := mustRequest(t, f.gate, p, ch); next.Status != PolicyApprovalRequired || next.Approval.ID == res.Approval.ID {
			t.Errorf("after the denial was answered = %+v, want a new request", next)
		}
	})
}

func TestPolicyRequestRevisionChangeInvalidatesApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, _, s, p := newPolicyFixture(t, db)
		ch := session.Change{Tools: tools("fs")}
		res := mustRequest(t, f.gate, p, ch)
		approve(t, f.gate, res.Approval.ID)
		if _, _, err := f.gate.SetSessionRequirement(t.Context(), host, s.ID, "fs", session.Requirement{All: true}, s.Revision); err != nil {
			t.Fatal(err)
		}
		pending := mustRequest(t, f.gate, p, session.Change{Tools: tools("fs", "pay")})
		if r, _ := f.db.GetRequest(t.Context(), res.Approval.ID); r.State != approval.StateInvalidated || r.Reason != ReasonPolicyRevision {
			t.Errorf("approval after an admin change = %s (%q), want invalidated", r.State, r.Reason)
		}
		if _, _, err := f.gate.SetSessionRequirement(t.Context(), host, s.ID, "fs", session.Requirement{}, s.Revision+1); err != nil {
			t.Fatal(err)
		}
		if r, _ := f.db.GetRequest(t.Context(), pending.Approval.ID); r.State != approval.StateCancelled || r.Reason != ReasonPolicyRevision {
			t.Errorf("pending request after an admin change = %s (%q), want cancelled", r.State, r.Reason)
		}
		got := mustRequest(t, f.gate, p, ch)
		if got.Status != PolicyApprovalRequired || got.Approval.ID == res.Approval.ID {
			t.Fatalf("retry after a revision change = %+v, want a new approval", got)
		}
	})
}

func TestPolicyRequestCap(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, s, p := newPolicyFixture(t, db)
		for i := range 32 {
			res := mustRequest(t, f.gate, p, session.Change{RequireApproval: map[string]session.Requirement{"pay": {Tools: []string{fmt.Sprint("t", i)}}}, Tools: tools("fs")})
			if res.Status != PolicyApprovalRequired {
				t.Fatalf("request %d = %+v", i, res)
			}
		}
		_, err := f.gate.RequestSessionPolicy(t.Context(), p, s.ID, session.Change{Tools: tools("fs", "pay")})
		if !errors.Is(err, ErrTooManyPolicyRequests) {
			t.Fatalf("33rd = %v, want ErrTooManyPolicyRequests", err)
		}
		// Tool-call approvals have their own cap: the session may still be held.
		if n, _ := f.db.CountPending(t.Context(), p.ID); n != 0 {
			t.Errorf("tool-call pending count = %d, want 0", n)
		}
		// Expired requests leave no trace in the count, swept or not.
		clk.add(301 * time.Second)
		if res := mustRequest(t, f.gate, p, session.Change{Tools: tools("fs", "pay")}); res.Status != PolicyApprovalRequired {
			t.Fatalf("after expiry = %+v", res)
		}
		f.gate.sweep(t.Context())
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{Kind: approval.KindSessionPolicy, Target: string(s.ID), State: approval.StateExpired})
		if err != nil || len(rs) != 32 {
			t.Errorf("expired = %d, %v; want 32", len(rs), err)
		}
	})
}
