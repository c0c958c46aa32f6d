package gate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// storePolicy is the store-backed policy of a test gate, as cmd wires it:
// a policystore.Service over the test's store, putting revisions in force
// in holder. It counts its calls; Sync fails with fail once set.
type storePolicy struct {
	svc    *policystore.Service
	holder *policy.Holder
	syncs  atomic.Int32
	reads  atomic.Int32
	fail   atomic.Pointer[error]
}

// newStorePolicy bootstraps p as revision 1 of db's policy, in force in
// the returned storePolicy's holder.
func newStorePolicy(t *testing.T, db store.Store, p *policy.Policy) *storePolicy {
	t.Helper()
	sp := &storePolicy{holder: policy.NewHolder(nil)}
	sp.svc = policystore.New(db, &policystore.Options{Install: func(_ store.PolicyRevision, p *policy.Policy) { sp.holder.Store(p) }})
	if _, err := sp.svc.Bootstrap(t.Context(), p, "test"); err != nil {
		t.Fatal(err)
	}
	return sp
}

func (sp *storePolicy) Sync(ctx context.Context) error {
	sp.syncs.Add(1)
	if err := sp.fail.Load(); err != nil {
		return *err
	}
	return sp.svc.Sync(ctx)
}

func (sp *storePolicy) Installed() int64 {
	sp.reads.Add(1)
	return sp.svc.Installed()
}

// appendRevision stores p as the revision after db's current one, as
// another instance does: nothing here puts it in force.
func appendRevision(ctx context.Context, db store.Store, p *policy.Policy) error {
	cur, err := db.CurrentPolicy(ctx)
	if err != nil {
		return err
	}
	text, digest, err := policystore.Canonical(p)
	if err != nil {
		return err
	}
	_, err = db.AppendPolicy(ctx, cur.Revision, store.PolicyRevision{Policy: text, Digest: digest, CreatedAt: time.Now(), CreatedBy: "other-instance"}, "other-instance")
	return err
}

// denyWrites is testPolicy with writes denied: the revision another
// instance stores while a write waits for its approval.
func denyWrites() *policy.Policy {
	p := testPolicy(time.Minute)
	p.Rules = append(p.Rules, policy.Rule{Name: "no writes now", Tools: []string{"write_file"}, Effect: policy.Deny})
	return p
}

// TestConsumeCatchesUpPolicy: with Options.Policies, the consume of an
// approved call reads the store's newest policy revision in its
// transaction, whether the call consumes on its own (an approval made by
// another process, seen by the watcher) or the decision's transaction
// consumes it (approved here): a newer revision (stored by another
// instance, not in force here) is put in force and denies the call at
// consume, and a failure to put it in force refuses the call without
// dispatching (fail closed), the approval left for a re-send. Allowed
// calls never read the policy store.
func TestConsumeCatchesUpPolicy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		here  bool  // approved through this gate (the joined consume), else in the store directly
		fail  error // Sync's error
		state approval.State
		why   string
	}{
		{name: "newer revision, approved elsewhere", state: approval.StateInvalidated, why: "no writes now"},
		{name: "newer revision, approved here", here: true, state: approval.StateInvalidated, why: "no writes now"},
		{name: "store unreadable", fail: errors.New("policy revision 7: invalid"), state: approval.StateApproved, why: "approval store failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, time.Minute, nil)
			sp := newStorePolicy(t, f.db, testPolicy(time.Minute))
			g := New(f.db, sp.holder, &Options{Policies: sp})
			watch(t, f.db, g)

			read := Call{Principal: agent, Server: "fs", Tool: "read_text_file", Arguments: []byte(`{}`), ToolDigest: "sha256:d1"}
			if a := g.Admit(t.Context(), read); !a.Allowed {
				t.Fatalf("read: %+v, want allowed", a)
			}
			if n, m := sp.syncs.Load(), sp.reads.Load(); n+m != 0 {
				t.Fatalf("an allowed call used the policy store's follower (%d syncs, %d reads), want nothing", n, m)
			}
			ch := admitAsync(t.Context(), g, writeCall("/a"))
			r := waitPending(t, f.db, 1)[0]
			if err := appendRevision(t.Context(), f.db, denyWrites()); err != nil {
				t.Fatal(err)
			}
			if tc.fail != nil {
				sp.fail.Store(&tc.fail)
			}
			if tc.here {
				if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
					t.Fatal(err)
				}
			} else if _, err := f.db.UpdateRequest(t.Context(), r.ID, "carol", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictApprove, "", "", time.Now())
			}); err != nil {
				t.Fatal(err)
			}
			a := recv(t, ch)
			if a.Allowed || !strings.Contains(a.Message, tc.why) {
				t.Errorf("write: allowed %v, %q; want refused naming %q", a.Allowed, a.Message, tc.why)
			}
			got, err := f.db.GetRequest(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.state {
				t.Errorf("state %s (%s), want %s", got.State, got.Reason, tc.state)
			}
			if sp.syncs.Load() == 0 {
				t.Error("the consume never caught up with the newer revision")
			}
		})
	}
}

// revisionInWindow is a store that, once armed on a request, stores
// revision next (appendRevision) as the gate's next write of that request
// begins: after the consume's policy check was made, before its
// transaction reads anything. It stands for another instance whose
// revision commits in that window.
type revisionInWindow struct {
	store.Store
	mu    sync.Mutex
	id    approval.ID
	next  *policy.Policy
	times int // writes of id that store next, each a new revision
	err   error
}

func (s *revisionInWindow) arm(id approval.ID, next *policy.Policy, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.next, s.times = id, next, times
}

// fire stores the armed revision if the write is of the armed request.
func (s *revisionInWindow) fire(ctx context.Context, id approval.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.times == 0 || id != s.id || s.err != nil {
		return
	}
	s.err = appendRevision(ctx, s.Store, s.next)
	s.times--
}

func (s *revisionInWindow) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.fire(ctx, id)
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

func (s *revisionInWindow) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	s.fire(ctx, id)
	return s.Store.UpdateRequestWithChain(ctx, id, actor, fn)
}

func (s *revisionInWindow) UpdateRequestReading(ctx context.Context, id approval.ID, actor string, reads store.TxReads, fn func(*approval.Request, store.TxRead) error) (approval.Request, error) {
	s.fire(ctx, id)
	return s.Store.UpdateRequestReading(ctx, id, actor, reads, fn)
}

// TestConsumeSeesRevisionCommittedAfterItsCheck: another instance's
// revision denying the call commits after the consume's policy check (and,
// before branch consume39, after its catch-up read) and before its
// transaction: the consume's transaction reads the newest revision, rolls
// back, catches up and decides again, so the call is refused with the new
// revision's deny and never dispatched, whether it consumes on its own or
// in the decision's transaction. On both stores. Before branch consume39
// it was dispatched under the replaced revision.
func TestConsumeSeesRevisionCommittedAfterItsCheck(t *testing.T) {
	for _, here := range []bool{false, true} {
		name := "approved elsewhere"
		if here {
			name = "approved here"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				sp := newStorePolicy(t, db, testPolicy(time.Minute))
				ws := &revisionInWindow{Store: db}
				g := New(ws, sp.holder, &Options{Policies: sp})
				watch(t, db, g)
				offers := signalOffers(g)
				ch := admitAsync(t.Context(), g, writeCall("/window-"+name))
				r := waitPending(t, db, 1)[0]
				waitOffered(t, offers, r.ID)
				ws.arm(r.ID, denyWrites(), 1)
				if here {
					if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
						t.Fatal(err)
					}
				} else if _, err := db.UpdateRequest(t.Context(), r.ID, "carol", func(r *approval.Request) error {
					return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictApprove, "", "", time.Now())
				}); err != nil {
					t.Fatal(err)
				}
				a := recv(t, ch)
				if ws.err != nil {
					t.Fatalf("store the revision in the window: %v", ws.err)
				}
				if a.Allowed {
					a.Finish(t.Context(), approval.OutcomeOK)
					t.Fatal("the call was dispatched under the policy revision replaced before its consume committed")
				}
				if !strings.Contains(a.Message, "no writes now") {
					t.Errorf("refusal %q, want the new revision's deny (no writes now)", a.Message)
				}
				got, err := db.GetRequest(t.Context(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != approval.StateInvalidated {
					t.Errorf("state %s (%s), want invalidated", got.State, got.Reason)
				}
			})
		})
	}
}

// TestConsumeRefusedWhenPolicyKeepsMoving: a new revision commits before
// every transaction of the consume (here: one that still allows the
// call): after maxRevisionMoves catch-ups the call is refused without
// dispatching and its approval stays approved for a re-send.
func TestConsumeRefusedWhenPolicyKeepsMoving(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	sp := newStorePolicy(t, f.db, testPolicy(time.Minute))
	ws := &revisionInWindow{Store: f.db}
	g := New(ws, sp.holder, &Options{Policies: sp})
	watch(t, f.db, g)
	ch := admitAsync(t.Context(), g, writeCall("/moving"))
	r := waitPending(t, f.db, 1)[0]
	ws.arm(r.ID, testPolicy(time.Minute), maxRevisionMoves+1)
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "carol", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictApprove, "", "", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if ws.err != nil {
		t.Fatal(ws.err)
	}
	if a.Allowed || !strings.Contains(a.Message, "kept changing") {
		t.Fatalf("write: allowed %v, %q; want refused, the policy kept changing", a.Allowed, a.Message)
	}
	got, err := f.db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateApproved {
		t.Errorf("state %s (%s), want approved (left for a re-send)", got.State, got.Reason)
	}
	if n := sp.syncs.Load(); n != maxRevisionMoves {
		t.Errorf("%d catch-ups, want %d", n, maxRevisionMoves)
	}
}
