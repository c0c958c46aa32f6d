package gate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// parentPutFirst is a real store on which, once armed, the first read of
// session child's chain or the first write of child runs put (another
// admin's PUT on the parent, to its commit) before it goes on: a parent
// change that commits while a PUT on child is under way.
type parentPutFirst struct {
	store.Store
	child session.ID
	put   func()
	armed atomic.Bool
}

func (s *parentPutFirst) fire(id session.ID) {
	if id == s.child && s.armed.CompareAndSwap(true, false) {
		s.put()
	}
}

func (s *parentPutFirst) Chain(ctx context.Context, id session.ID) (session.Chain, error) {
	c, err := s.Store.Chain(ctx, id)
	s.fire(id)
	return c, err
}

// UpdateSessionWithChain goes through an interface of its own so that
// this file also builds on a store without the method (the base commit).
func (s *parentPutFirst) UpdateSessionWithChain(ctx context.Context, id session.ID, actor string, now time.Time, fn func(*session.Session, session.Chain) error) (session.Session, bool, error) {
	s.fire(id)
	return s.Store.(interface {
		UpdateSessionWithChain(context.Context, session.ID, string, time.Time, func(*session.Session, session.Chain) error) (session.Session, bool, error)
	}).UpdateSessionWithChain(ctx, id, actor, now, fn)
}

// TestRequirementWidenCheckSeesAConcurrentParentPUT (fixes20): PUT
// …/require-approval on a child read its parent chain before the write's
// transaction, so a PUT on the parent that committed in between went
// unseen: the child's weaker value was stored although the parent's
// stronger one had committed first. The check now runs inside the
// transaction (the ancestors' rows held), so it sees the parent's value.
func TestRequirementWidenCheckSeesAConcurrentParentPUT(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval})
		f.pol.p.Store(allowAll())
		parent, pp := mustSession(t, f.gate, host, session.NewSession{})
		child, _ := mustSession(t, f.gate, pp, session.NewSession{})
		var parentErr error
		ps := &parentPutFirst{Store: db, child: child.ID, put: func() {
			_, _, parentErr = f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "fs", session.Requirement{All: true}, parent.Revision)
		}}
		ps.armed.Store(true)
		g := New(ps, f.pol, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval})
		_, _, err := g.SetSessionRequirement(t.Context(), host, child.ID, "fs", session.Requirement{Tools: []string{"write_file"}}, child.Revision)
		if ps.armed.Load() || parentErr != nil {
			t.Fatalf("the parent's PUT did not run during the child's (armed %v): %v", ps.armed.Load(), parentErr)
		}
		if !errors.Is(err, session.ErrWiden) {
			got, _ := db.GetSession(t.Context(), child.ID)
			t.Fatalf("child's PUT after the parent's committed = %v (child now %v), want ErrWiden: the parent requires all of fs", err, got.RequireApproval)
		}
	})
}

// TestRequirementPUTsRaceWithRevocation: PUTs on a parent and its child
// and the parent's revocation, at once and many times, end without a
// deadlock or an error other than those of their order.
func TestRequirementPUTsRaceWithRevocation(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f := newFixtureOn(t, db, time.Minute, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval})
		f.pol.p.Store(allowAll())
		for range 4 {
			parent, pp := mustSession(t, f.gate, host, session.NewSession{})
			child, _ := mustSession(t, f.gate, pp, session.NewSession{})
			errs := make([]error, 3)
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _, errs[0] = f.gate.SetSessionRequirement(t.Context(), host, parent.ID, "fs", session.Requirement{All: true}, parent.Revision)
			})
			wg.Go(func() {
				_, _, errs[1] = f.gate.SetSessionRequirement(t.Context(), host, child.ID, "fs", session.Requirement{Tools: []string{"write_file"}}, child.Revision)
			})
			wg.Go(func() { _, errs[2] = f.gate.RevokeSession(t.Context(), host, parent.ID) })
			wg.Wait()
			for i, err := range errs {
				if err != nil && !errors.Is(err, session.ErrWiden) && !errors.Is(err, session.ErrRevoked) {
					t.Fatalf("operation %d: %v", i, err)
				}
			}
		}
	})
}

// parentChangeAtWrite is a real store on which, once armed, the write of
// session child (UpdateSessionWithChain, the policy request's write)
// runs put (a change of the parent, to its commit) before it goes on: a
// parent change that commits after the child's change was checked,
// before it is written. A request written any other way (UpdateSession,
// as before fixes21) fails the test as "the parent's change did not run".
type parentChangeAtWrite struct{ parentPutFirst }

// Chain does not fire: only the write does.
func (s *parentChangeAtWrite) Chain(ctx context.Context, id session.ID) (session.Chain, error) {
	return s.Store.Chain(ctx, id)
}

// TestPolicyRequestCeilingSeesAConcurrentParentChange (fixes21): a
// session's own policy request checked its change against its parent
// chain as read before the write, and the write (applyNarrowing's, or
// that of an approved change) held the session's row only: a change of
// the parent that committed in between went unseen, so the child ended up
// allowing a tool its parent no longer allows. The check now runs again
// inside the write's transaction, the ancestors' rows held
// (UpdateSessionWithChain), as for PUT …/require-approval (fixes20).
func TestPolicyRequestCeilingSeesAConcurrentParentChange(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		f, clk, _, _ := newPolicyFixture(t, db)
		for _, path := range []struct {
			name  string
			child []string  // the child's tools
			ask   *[]string // what the child asks for
		}{
			{name: "narrowing", child: []string{"fs__read", "fs__write"}, ask: tools("fs__write")},
			{name: "approved widening", child: []string{"fs__read"}, ask: tools("fs__read", "fs__write")},
		} {
			_, pp := mustSession(t, f.gate, host, session.NewSession{Tools: []string{"fs__read", "fs__write"}})
			child, cp := mustSession(t, f.gate, pp, session.NewSession{Tools: path.child})
			if path.name == "approved widening" {
				res := mustRequest(t, f.gate, cp, session.Change{Tools: path.ask})
				if res.Status != PolicyApprovalRequired {
					t.Fatalf("%s: first request %+v, want an approval required", path.name, res)
				}
				approve(t, f.gate, res.Approval.ID)
			}
			var parentErr error
			ps := &parentChangeAtWrite{parentPutFirst{Store: db, child: child.ID, put: func() {
				// The parent's own request drops fs__write: it only
				// narrows, so it applies at once.
				_, parentErr = f.gate.RequestSessionPolicy(t.Context(), pp, session.ID(pp.SessionID), session.Change{Tools: tools("fs__read")})
			}}}
			ps.armed.Store(true)
			g := New(ps, f.pol, clk.opts(&Options{ServerExists: knownServers, SessionApproval: allowAll().Approval}))
			res, err := g.RequestSessionPolicy(t.Context(), cp, child.ID, session.Change{Tools: path.ask})
			if ps.armed.Load() || parentErr != nil {
				t.Fatalf("%s: the parent's change did not run during the child's request (armed %v): %v", path.name, ps.armed.Load(), parentErr)
			}
			got := currentSession(t, f.gate, child.ID)
			if !errors.Is(err, session.ErrCeiling) || !slices.Equal(got.Tools, path.child) {
				t.Errorf("%s: child's request after the parent dropped fs__write = %s, %v (child tools now %v), want ErrCeiling and the tools unchanged (%v)", path.name, res.Status, err, got.Tools, path.child)
			}
		}
	})
}
