package gate

// An approved session policy change whose consume commits although its
// writer saw an error (the COMMIT's reply lost) applies, once.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// pendingPolicyRequests counts the pending session_policy approvals.
func pendingPolicyRequests(t *testing.T, s store.Store) int {
	t.Helper()
	rs, _, err := s.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		if r.Kind == approval.KindSessionPolicy {
			n++
		}
	}
	return n
}

// The identical request after approval consumes the approval; that
// consume commits but answers an error. Before, the request answered
// approval_required with a new approval and the approved change never
// applied (the approval stayed consumed with no outcome); now the consume
// is read back by its token and the change applies, once.
func TestLostCommitOfPolicyConsumeApplies(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, s, p := newPolicyFixture(t, db)
		lc := &lostCommit{Store: f.db}
		g := New(lc, f.pol, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
		ch := session.Change{Tools: tools("fs", "pay")}
		res := mustRequest(t, f.gate, p, ch)
		approve(t, f.gate, res.Approval.ID)
		lc.armed.Store(true)
		got := mustRequest(t, g, p, ch)
		if n := lc.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1 (the consume's)", n)
		}
		if got.Status != PolicyApplied || !got.Changed || got.Session.Revision != s.Revision+1 || !cmp.Equal(got.Session.Tools, []string{"fs", "pay"}) {
			t.Fatalf("identical retry = %+v, want applied at revision %d", got, s.Revision+1)
		}
		r, err := f.db.GetRequest(t.Context(), res.Approval.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
			t.Errorf("approval = %s/%s, want consumed/ok", r.State, r.DispatchOutcome)
		}
		if n := pendingPolicyRequests(t, f.db); n != 0 {
			t.Errorf("%d pending policy requests, want 0", n)
		}
		// Sent again, it applies nothing more.
		again := mustRequest(t, g, p, ch)
		if again.Status != PolicyApplied || again.Changed || again.Session.Revision != s.Revision+1 {
			t.Errorf("second retry = %+v, want applied, unchanged", again)
		}
	})
}

// A consume that fails without committing (the store unreachable) applies
// nothing, makes no new approval, and answers the error; the approval
// stays approved, and the next identical request applies it.
func TestFailedPolicyConsumeKeepsTheApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, s, p := newPolicyFixture(t, db)
		fs := &failConsume{Store: f.db}
		g := New(fs, f.pol, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
		ch := session.Change{Tools: tools("fs", "pay")}
		res := mustRequest(t, f.gate, p, ch)
		approve(t, f.gate, res.Approval.ID)
		fs.armed.Store(true)
		if _, err := g.RequestSessionPolicy(t.Context(), p, s.ID, ch); err == nil {
			t.Fatal("RequestSessionPolicy with the consume failing: nil error, want one")
		}
		if r, _ := f.db.GetRequest(t.Context(), res.Approval.ID); r.State != approval.StateApproved {
			t.Fatalf("approval %s, want still approved", r.State)
		}
		if n := pendingPolicyRequests(t, f.db); n != 0 {
			t.Errorf("%d pending policy requests, want 0", n)
		}
		if got := mustRequest(t, g, p, ch); got.Status != PolicyApplied || got.Session.Revision != s.Revision+1 {
			t.Fatalf("next identical request = %+v, want applied", got)
		}
	})
}

// failConsume is a real store whose first UpdateRequest, once armed,
// fails without writing, as a store that is unreachable does.
type failConsume struct {
	store.Store
	armed atomic.Bool
}

func (s *failConsume) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if s.armed.CompareAndSwap(true, false) {
		return approval.Request{}, errOutage
	}
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

// lostSessionWrite is a real store whose first session write that changes
// a session, once armed, commits and then answers errLostCommit.
type lostSessionWrite struct {
	store.Store
	armed atomic.Bool
	lost  atomic.Int32
}

// UpdateSessionWithChain is the write of a policy request (UpdateSession
// before fixes21).
func (s *lostSessionWrite) UpdateSessionWithChain(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session, session.Chain) error) (session.Session, bool, error) {
	got, changed, err := s.Store.UpdateSessionWithChain(ctx, id, actor, now, fn)
	if err != nil || !changed || !s.armed.CompareAndSwap(true, false) {
		return got, changed, err
	}
	s.lost.Add(1)
	return session.Session{}, false, errLostCommit
}

// The approved change's session write commits but answers an error: the
// session is read back, the request answers applied and the approval's
// outcome is ok (before: the caller was answered an error and the
// outcome recorded tool_error, with the change applied).
func TestLostCommitOfApprovedSessionWriteIsReadBack(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, s, p := newPolicyFixture(t, db)
		ls := &lostSessionWrite{Store: f.db}
		g := New(ls, f.pol, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
		ch := session.Change{Tools: tools("fs", "pay"), RequireApproval: map[string]session.Requirement{"pay": {All: true}}}
		res := mustRequest(t, f.gate, p, ch)
		if res.Status != PolicyApprovalRequired {
			t.Fatalf("widening = %+v, want approval_required", res)
		}
		approve(t, f.gate, res.Approval.ID)
		ls.armed.Store(true)
		got := mustRequest(t, g, p, ch)
		if n := ls.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1 (the session's)", n)
		}
		if got.Status != PolicyApplied || !got.Changed || got.Session.Revision != s.Revision+1 || !cmp.Equal(got.Session.Tools, []string{"fs", "pay"}) {
			t.Fatalf("identical retry = %+v, want applied at revision %d", got, s.Revision+1)
		}
		if r, _ := f.db.GetRequest(t.Context(), res.Approval.ID); r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
			t.Errorf("approval = %s/%s, want consumed/ok", r.State, r.DispatchOutcome)
		}
	})
}

// A session write that fails without committing is not taken for
// applied: the caller gets the error and the outcome says tool_error.
func TestFailedApprovedSessionWriteIsNotApplied(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, s, p := newPolicyFixture(t, db)
		fw := &failSessionWrite{Store: f.db}
		g := New(fw, f.pol, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
		ch := session.Change{Tools: tools("fs", "pay")}
		res := mustRequest(t, f.gate, p, ch)
		approve(t, f.gate, res.Approval.ID)
		fw.armed.Store(true)
		if _, err := g.RequestSessionPolicy(t.Context(), p, s.ID, ch); err == nil {
			t.Fatal("RequestSessionPolicy with the session write failing: nil error, want one")
		}
		if got := currentSession(t, f.gate, s.ID); got.Revision != s.Revision {
			t.Fatalf("revision %d, want %d (nothing applied)", got.Revision, s.Revision)
		}
		if r, _ := f.db.GetRequest(t.Context(), res.Approval.ID); r.DispatchOutcome != approval.OutcomeToolError {
			t.Errorf("approval outcome %q, want tool_error", r.DispatchOutcome)
		}
	})
}

// failSessionWrite is a real store whose first session write, once armed,
// fails without writing.
type failSessionWrite struct {
	store.Store
	armed atomic.Bool
}

// UpdateSessionWithChain is the write of a policy request (UpdateSession
// before fixes21).
func (s *failSessionWrite) UpdateSessionWithChain(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session, session.Chain) error) (session.Session, bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		return session.Session{}, false, errOutage
	}
	return s.Store.UpdateSessionWithChain(ctx, id, actor, now, fn)
}
