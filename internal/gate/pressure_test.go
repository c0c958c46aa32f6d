package gate

// Regression tests of issue 9's defects 2, 3, 4, 6, 13 and 17 (parts): the
// gate keeps its promises under pressure.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// errOutage is what the faulty store answers while it is down: what an
// unreachable database gives.
var errOutage = fmt.Errorf("%w: injected outage", store.ErrUnavailable)

// faulty is a real store whose every call can be made to fail as if the
// database were down, counting calls as it goes; hooks run before
// chosen calls.
type faulty struct {
	store.Store
	down  atomic.Bool
	fails atomic.Int32 // calls refused while down

	mu    sync.Mutex
	calls map[string]int // guarded by mu
	tick  chan struct{}  // closed and cleared on every call; guarded by mu

	// beforeConsume, when set, runs before every UpdateRequest and
	// UpdateRequestWithChain (the consume goes through one of them).
	beforeConsume func()
	// beforeOpenIdentical and beforeCreate, when set, run before those
	// calls.
	beforeOpenIdentical func()
	beforeCreate        func(r approval.Request)
}

func newFaulty(s store.Store) *faulty { return &faulty{Store: s, calls: map[string]int{}} }

func (f *faulty) call(name string) error {
	f.mu.Lock()
	f.calls[name]++
	if f.tick != nil {
		close(f.tick)
		f.tick = nil
	}
	f.mu.Unlock()
	if f.down.Load() {
		f.fails.Add(1)
		return errOutage
	}
	return nil
}

func (f *faulty) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// waitCount waits until name was called at least n times; false when ctx
// ended first. It waits on the calls themselves, not on a clock.
func (f *faulty) waitCount(ctx context.Context, name string, n int) bool {
	for {
		f.mu.Lock()
		got := f.calls[name]
		if f.tick == nil {
			f.tick = make(chan struct{})
		}
		tick := f.tick
		f.mu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-tick:
		case <-ctx.Done():
			return false
		}
	}
}

func (f *faulty) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.calls)
}

func (f *faulty) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	if err := f.call("GetRequest"); err != nil {
		return approval.Request{}, err
	}
	return f.Store.GetRequest(ctx, id)
}

func (f *faulty) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	if f.beforeCreate != nil {
		f.beforeCreate(r)
	}
	if err := f.call("CreateRequest"); err != nil {
		return err
	}
	return f.Store.CreateRequest(ctx, r, caps...)
}

func (f *faulty) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if f.beforeConsume != nil {
		f.beforeConsume()
	}
	if err := f.call("UpdateRequest"); err != nil {
		return approval.Request{}, err
	}
	return f.Store.UpdateRequest(ctx, id, actor, fn)
}

func (f *faulty) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	if f.beforeConsume != nil {
		f.beforeConsume()
	}
	if err := f.call("UpdateRequestWithChain"); err != nil {
		return approval.Request{}, err
	}
	return f.Store.UpdateRequestWithChain(ctx, id, actor, fn)
}

func (f *faulty) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if err := f.call("RecordDispatch"); err != nil {
		return approval.Request{}, err
	}
	return f.Store.RecordDispatch(ctx, r, actor, fn)
}

func (f *faulty) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	if err := f.call("RecordOutcome"); err != nil {
		return err
	}
	return f.Store.RecordOutcome(ctx, id, o, rec, actor)
}

func (f *faulty) PutResult(ctx context.Context, r store.Result) error {
	if err := f.call("PutResult"); err != nil {
		return err
	}
	return f.Store.PutResult(ctx, r)
}

func (f *faulty) RenewLeases(ctx context.Context, holder string, ids []approval.ID, until time.Time) ([]approval.ID, error) {
	if err := f.call("RenewLeases"); err != nil {
		return nil, err
	}
	return f.Store.RenewLeases(ctx, holder, ids, until)
}

func (f *faulty) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	if err := f.call("Due"); err != nil {
		return nil, err
	}
	return f.Store.Due(ctx, now, limit)
}

func (f *faulty) OpenIdentical(ctx context.Context, principal, server, tool, hash string) ([]approval.Request, error) {
	if f.beforeOpenIdentical != nil {
		f.beforeOpenIdentical()
	}
	if err := f.call("OpenIdentical"); err != nil {
		return nil, err
	}
	return f.Store.OpenIdentical(ctx, principal, server, tool, hash)
}

// faultyFixture is a gate over a faulty store on a throwaway SQLite file,
// woken by the file's change feed like a process of its own; db is the
// database as another process sees it (never down).
type faultyFixture struct {
	db    *sqlstore.DB
	store *faulty
	pol   *swappable
	gate  *Gate
}

func newFaultyFixture(t *testing.T, timeout time.Duration, opts *Options) *faultyFixture {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(timeout))
	if opts == nil {
		opts = &Options{}
	}
	fs := newFaulty(db)
	f := &faultyFixture{db: db, store: fs, pol: pol, gate: New(fs, pol, opts)}
	watch(t, db, f.gate)
	return f
}

// run runs g.Run until the test ends.
func run(t *testing.T, g *Gate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = g.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitUntil polls cond (a hang guard of 30s, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPendingCapHoldsUnderConcurrency sends 100 gated calls at once with a
// cap of 8 per principal: exactly 8 are held and 92 refused with a message
// naming the cap (defect 3: check-then-insert left 83–100 pending). The
// total cap holds the same way across principals.
func TestPendingCapHoldsUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      Options
		principal func(i int) approval.Principal
		cap       string
	}{
		{"per principal", Options{MaxPendingPerPrincipal: 8, MaxPending: 1000},
			func(int) approval.Principal { return agent }, "approvals.max_pending_per_principal"},
		{"total", Options{MaxPendingPerPrincipal: 100, MaxPending: 8},
			func(i int) approval.Principal { return approval.Principal{ID: fmt.Sprint("agent-", i), Kind: "agent"} }, "approvals.max_pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, time.Minute, &tc.opts)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			const n = 100
			answers := make(chan Admission, n)
			for i := range n {
				c := writeCall(fmt.Sprint("/cap/", i))
				c.Principal = tc.principal(i)
				go func() { answers <- f.gate.Admit(ctx, c) }()
			}
			refused := 0
			for range n - 8 {
				a := recv(t, answers)
				if a.Allowed || !strings.Contains(a.Message, tc.cap) {
					t.Fatalf("answer %+v, want a refusal naming %s", a, tc.cap)
				}
				refused++
			}
			if got := len(waitPending(t, f.db, 8)); got != 8 {
				t.Fatalf("%d pending, want 8", got)
			}
			select {
			case a := <-answers:
				t.Fatalf("a held call answered: %+v", a)
			default:
			}
			if n, err := f.db.CountPending(t.Context(), ""); err != nil || n != 8 {
				t.Errorf("CountPending = %d, %v; want 8 (and %d refused)", n, err, refused)
			}
		})
	}
}

// revokingStore revokes session sid right before the first consume after
// arm was called, as a DELETE /v1/sessions/{id} racing the approval would:
// after the holder read "approved" and before its consume commits.
func revokingStore(t *testing.T, s store.Store, sid session.ID) (_ *faulty, arm func()) {
	t.Helper()
	f := newFaulty(s)
	var armed, once atomic.Bool
	f.beforeConsume = func() {
		if armed.Load() && once.CompareAndSwap(false, true) {
			if _, err := s.RevokeSession(context.Background(), sid, "host-app", time.Now()); err != nil {
				t.Errorf("RevokeSession = %v", err)
			}
		}
	}
	return f, func() { armed.Store(true) }
}

// TestRevocationBeforeConsumeWins approves a held call of a session and
// revokes the session right before the holder consumes: the call must not
// run (defect 2: the session was checked outside the consume transaction,
// so a revocation committed in between was not seen).
func TestRevocationBeforeConsumeWins(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	p := allowAll()
	p.Rules = append(p.Rules, policy.Rule{Name: "writes", Server: "fs", Tools: []string{"write_*"}, Effect: policy.Approve})
	pol.p.Store(p)
	// The session is made and the call approved through a plain gate (the
	// approver's side); the holder's gate uses the revoking store.
	plain := New(db, pol, &Options{ServerExists: knownServers})
	root, sp := mustSession(t, plain, host, session.NewSession{})
	fs, arm := revokingStore(t, db, root.ID)
	g := New(fs, pol, &Options{ServerExists: knownServers})
	watch(t, db, g)

	ch := admitAsync(t.Context(), g, sessionCall(sp, "fs", "write_file"))
	r := waitPending(t, db, 1)[0]
	arm()
	if _, err := plain.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	g.Wake(r.ID)
	a := recv(t, ch)
	if a.Allowed {
		t.Fatalf("a call approved and then revoked before its consume was admitted: %+v", a)
	}
	got, err := db.GetRequest(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != approval.StateInvalidated {
		t.Errorf("request is %s (%q), want invalidated", got.State, got.Reason)
	}
}

// TestRevocationRacingApproval approves a held call of a session while the
// session is revoked concurrently, 100 times: when the revocation has
// answered, the call has either been consumed already (its consume
// committed first, and the revocation left it alone) or never runs. Odd
// rounds start the revocation only once the approval committed, so it
// races the holder's consume rather than the approval.
func TestRevocationRacingApproval(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	p := allowAll()
	p.Rules = append(p.Rules, policy.Rule{Name: "writes", Server: "fs", Tools: []string{"write_*"}, Effect: policy.Approve})
	pol.p.Store(p)
	g := New(db, pol, &Options{ServerExists: knownServers})
	watch(t, db, g)
	ran, voided := 0, 0
	for i := range 100 {
		s, sp := mustSession(t, g, host, session.NewSession{})
		c := sessionCall(sp, "fs", "write_file")
		c.Arguments = []byte(fmt.Sprintf(`{"round":%d}`, i))
		ch := admitAsync(t.Context(), g, c)
		var r approval.Request
		waitUntil(t, "the held request", func() bool {
			rs, _, err := db.ListRequests(t.Context(), store.Filter{RequestedBy: sp.ID})
			if err != nil || len(rs) == 0 {
				return false
			}
			r = rs[0]
			return true
		})
		var (
			wg       sync.WaitGroup
			rev      store.Revocation
			approved = make(chan struct{})
		)
		wg.Go(func() {
			defer close(approved)
			if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil &&
				!errors.Is(err, approval.ErrResolved) {
				t.Errorf("round %d: approve = %v", i, err)
			}
		})
		wg.Go(func() {
			if i%2 == 1 {
				<-approved
			}
			var err error
			if rev, err = g.RevokeSession(t.Context(), host, s.ID); err != nil {
				t.Errorf("round %d: revoke = %v", i, err)
			}
		})
		wg.Wait()
		a := recv(t, ch)
		final, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		voidedByRevocation := slices.Contains(rev.Cancelled, r.ID) || slices.Contains(rev.Invalidated, r.ID)
		switch {
		case a.Allowed:
			ran++
			if voidedByRevocation || final.State != approval.StateConsumed {
				t.Errorf("round %d: the call ran, but the revocation voided it (%v) or it ended %s", i, voidedByRevocation, final.State)
			}
			// Its consume committed before the revocation did (SQLite's
			// event order is commit order).
			if consumedAt, revokedAt := eventSeq(t, db, string(r.ID), approval.EventConsumed), eventSeq(t, db, string(s.ID), approval.EventSessionRevoked); consumedAt > revokedAt {
				t.Errorf("round %d: consumed (event %d) after the revocation (event %d)", i, consumedAt, revokedAt)
			}
			a.Finish(t.Context(), approval.OutcomeOK)
		default:
			voided++
			if final.State == approval.StateConsumed || final.State == approval.StateApproved || final.State == approval.StatePending {
				t.Errorf("round %d: refused (%q), but the request is %s", i, a.Message, final.State)
			}
		}
	}
	t.Logf("100 rounds: %d ran (consumed before the revocation), %d voided", ran, voided)
}

// eventSeq returns the seq of the event of type typ of the request or
// session subject, or fails.
func eventSeq(t *testing.T, db *sqlstore.DB, subject string, typ approval.EventType) int64 {
	t.Helper()
	for after := int64(0); ; {
		evs, err := db.Events(t.Context(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			t.Fatalf("no %s event of %s", typ, subject)
		}
		for _, ev := range evs {
			if ev.Type == typ && (string(ev.RequestID) == subject || ev.SessionID == subject) {
				return ev.Seq
			}
			after = ev.Seq
		}
	}
}

// TestPolicyRequestUsesLiveApprovers reloads the deployment policy with new
// approvers: a session's policy request made afterwards names them, not
// the approvers of startup (defect 4).
func TestPolicyRequestUsesLiveApprovers(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(allowAll())
		startup := allowAll().Approval
		startup.Approvers = []string{"group:old"}
		live := startup
		live.Approvers, live.Approvals = []string{"group:new"}, 2
		g := New(db, pol, &Options{ServerExists: knownServers, SessionApproval: startup,
			SessionApprovalFunc: func() policy.Approval { return live }})
		s, p := mustSession(t, g, host, session.NewSession{Tools: []string{"fs__read"}})
		res, err := g.RequestSessionPolicy(t.Context(), p, s.ID, session.Change{Tools: tools("fs")})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Approval.Approvers, []string{"group:new"}) || res.Approval.RequiredApprovals != 2 {
			t.Errorf("policy request approvers %v (%d approvals), want the live policy's [group:new] (2)", res.Approval.Approvers, res.Approval.RequiredApprovals)
		}
	})
}

// TestIdenticalPolicyRetriesLeaveNothingPending lets two identical retries
// of an approved session policy request both find it approved; the one
// that loses the consume must not put a new (stale) request in front of
// approvers once the winner applied the change (defect 17).
func TestIdenticalPolicyRetriesLeaveNothingPending(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(allowAll())
	fs := newFaulty(db)
	g := New(fs, pol, &Options{ServerExists: knownServers, SessionApproval: allowAll().Approval})
	watch(t, db, g)
	s, p := mustSession(t, g, host, session.NewSession{Tools: []string{"fs__read"}})
	ch := session.Change{Tools: tools("fs", "pay")}
	first := mustRequest(t, g, p, ch)
	approve(t, g, first.Approval.ID)

	// Both retries read the approved request before either consumes it.
	var (
		arrived    atomic.Int32
		bothRead   = make(chan struct{})
		winnerDone = make(chan struct{})
		closeOnce  sync.Once
	)
	fs.beforeOpenIdentical = func() {
		if n := arrived.Add(1); n == 2 {
			close(bothRead)
		} else if n > 2 {
			return
		}
		<-bothRead
	}
	// A loser that creates a new request does so only after the winner
	// is done (the order that left a stale request pending).
	fs.beforeCreate = func(r approval.Request) {
		if r.Kind == approval.KindSessionPolicy {
			select {
			case <-winnerDone:
			case <-time.After(30 * time.Second): // a hang guard
			}
		}
	}
	var (
		wg      sync.WaitGroup
		results [2]PolicyResult
		errs    [2]error
	)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = g.RequestSessionPolicy(t.Context(), p, s.ID, ch)
			if errs[i] == nil && results[i].Changed {
				closeOnce.Do(func() { close(winnerDone) })
			}
		})
	}
	wg.Wait()
	closeOnce.Do(func() { close(winnerDone) })
	changed := 0
	for i := range 2 {
		if errs[i] != nil {
			t.Errorf("retry %d = %v", i, errs[i])
			continue
		}
		if results[i].Status != PolicyApplied {
			t.Errorf("retry %d = %s (approval %s), want applied", i, results[i].Status, results[i].Approval.ID)
		}
		if results[i].Changed {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d retries changed the session, want 1", changed)
	}
	rs, _, err := db.ListRequests(t.Context(), store.Filter{Kind: approval.KindSessionPolicy, Target: string(s.ID), State: approval.StatePending})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Errorf("stale pending policy request %s (base revision %d) left in front of approvers", r.ID, r.BaseRevision)
	}
}

// TestConsumeRetriesThroughOutage approves a held call and takes the store
// down before the holder consumes it: the holder keeps trying and, once
// the store is back, consumes and admits the call (defect 13: the call was
// refused and the request left approved).
func TestConsumeRetriesThroughOutage(t *testing.T) {
	f := newFaultyFixture(t, time.Minute, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/outage"))
	r := waitPending(t, f.db, 1)[0]
	f.store.down.Store(true)
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "alice", func(x *approval.Request) error {
		return x.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "", "", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the holder failing against the store", func() bool { return f.store.fails.Load() >= 3 })
	select {
	case a := <-ch:
		t.Fatalf("the call was answered while the store was down: %+v", a)
	default:
	}
	f.store.down.Store(false)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("after the outage: %+v, want the approved call admitted", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if got, _ := f.db.GetRequest(t.Context(), r.ID); got.State != approval.StateConsumed || got.DispatchOutcome != approval.OutcomeOK {
		t.Errorf("request %s/%s, want consumed/ok", got.State, got.DispatchOutcome)
	}
}

// TestExpireAtDeadlineRetriesThroughOutage lets an approval commit right
// before the deadline while the holder cannot reach the store: at the
// deadline its expire fails; it must retry and, finding the request
// approved, run the call rather than answer "timed out" and leave it
// approved (the e2e TestApproveRacingExpiry failure under load).
func TestExpireAtDeadlineRetriesThroughOutage(t *testing.T) {
	// The approval must commit before the deadline: 3 s leaves room on a
	// loaded machine (600 ms did not: the approve itself found the request
	// expired).
	f := newFaultyFixture(t, 3*time.Second, nil)
	ch := admitAsync(t.Context(), f.gate, writeCall("/deadline"))
	r := waitPending(t, f.db, 1)[0]
	f.store.down.Store(true)
	if _, err := f.db.UpdateRequest(t.Context(), r.ID, "alice", func(x *approval.Request) error {
		return x.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "", "", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deadline passing", func() bool { return time.Now().After(r.ExpiresAt.Add(200 * time.Millisecond)) })
	waitUntil(t, "failed attempts", func() bool { return f.store.fails.Load() >= 3 })
	f.store.down.Store(false)
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("approved before its deadline, yet answered %+v", a)
	}
	a.Finish(t.Context(), approval.OutcomeOK)
	if got, _ := f.db.GetRequest(t.Context(), r.ID); got.State != approval.StateConsumed {
		t.Errorf("request is %s, want consumed", got.State)
	}
}

// TestOutcomeRecordedAfterOutage takes the store down between the dispatch
// and its outcome, for longer than a lease: Finish returns at once, the
// outcome is written when the store is back, and another process's
// sweeper does not record "unknown" meanwhile (defect 13: a call that ran
// was recorded unknown).
func TestOutcomeRecordedAfterOutage(t *testing.T) {
	const lease = 300 * time.Millisecond
	f := newFaultyFixture(t, time.Minute, &Options{Lease: lease, SweepInterval: 20 * time.Millisecond})
	run(t, f.gate)
	// Another process, cut off by the same outage, sweeps the same file.
	other := newFaulty(f.db)
	sweeper := New(other, f.pol, &Options{Lease: lease, SweepInterval: 20 * time.Millisecond})
	run(t, sweeper)

	ch := admitAsync(t.Context(), f.gate, writeCall("/ran"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	a := recv(t, ch)
	if !a.Allowed {
		t.Fatalf("%+v", a)
	}
	f.store.down.Store(true)
	other.down.Store(true)
	a.Finish(t.Context(), approval.OutcomeOK) // returns although the store is down
	// Down for three leases: the dispatch lease lapses meanwhile.
	waitUntil(t, "the dispatch lease lapsing", func() bool {
		got, err := f.db.GetRequest(t.Context(), r.ID)
		return err == nil && time.Now().After(got.LeaseUntil.Add(2*lease))
	})
	f.store.down.Store(false)
	other.down.Store(false)
	waitUntil(t, "the outcome recorded", func() bool {
		got, err := f.db.GetRequest(t.Context(), r.ID)
		return err == nil && got.DispatchOutcome != approval.OutcomeNone
	})
	if got, _ := f.db.GetRequest(t.Context(), r.ID); got.DispatchOutcome != approval.OutcomeOK {
		t.Errorf("dispatch outcome %q, want ok: the holder was alive and retrying", got.DispatchOutcome)
	}
}

// TestIdleHeldCallsCostNoReads holds 200 calls and watches several lease
// intervals go by: the store is written once per interval for all of them
// and no held call re-reads its request (defect 6: one renewal write per
// held call, each waking every waiter to re-read).
func TestIdleHeldCallsCostNoReads(t *testing.T) {
	const n = 200
	f := newFaultyFixture(t, time.Minute, &Options{Lease: 300 * time.Millisecond, MaxPendingPerPrincipal: n})
	run(t, f.gate)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range n {
		admitAsync(ctx, f.gate, writeCall(fmt.Sprint("/idle/", i)))
	}
	waitUntil(t, "every call held", func() bool {
		got, err := f.db.CountPending(t.Context(), "")
		return err == nil && got == n
	})
	// Let the wake-ups of the creations settle: until a renewal round
	// passes without a read.
	waitUntil(t, "a quiet renewal round", func() bool {
		f.store.reset()
		waitUntil(t, "a renewal round", func() bool { return f.store.count("RenewLeases") > 0 })
		return f.store.count("GetRequest") == 0
	})
	f.store.reset()
	const rounds = 4
	waitUntil(t, "renewal rounds", func() bool { return f.store.count("RenewLeases") >= rounds })
	reads, writes := f.store.count("GetRequest"), f.store.count("UpdateRequest")+f.store.count("UpdateRequestWithChain")
	t.Logf("%d held calls, %d renewal rounds: %d request reads, %d request writes", n, f.store.count("RenewLeases"), reads, writes)
	if writes != 0 {
		t.Errorf("%d per-request writes while idle, want 0 (leases are renewed in batches)", writes)
	}
	if reads > n/10 {
		t.Errorf("%d request reads while idle, want none per held call", reads)
	}
	rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending, Limit: 1})
	if err != nil || len(rs) != 1 || !rs[0].LeaseUntil.After(rs[0].CreatedAt.Add(300*time.Millisecond)) {
		t.Errorf("pending request lease: %+v, %v; want renewed past its first lease", rs, err)
	}
}

// readsFailAfterCreate is a store whose reads of requests fail from the
// moment a request was created until heal is called.
type readsFailAfterCreate struct {
	store.Store
	failing atomic.Bool
}

func (s *readsFailAfterCreate) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	err := s.Store.CreateRequest(ctx, r, caps...)
	if err == nil {
		s.failing.Store(true)
	}
	return err
}

func (s *readsFailAfterCreate) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	if s.failing.Load() {
		return approval.Request{}, errOutage
	}
	return s.Store.GetRequest(ctx, id)
}

// TestMaxHoldThroughOutageStaysPending: the store cannot be read at all
// while a call waits out approvals.max_hold; the caller still gets the
// pending answer naming its approval, and the request stays pending for
// the re-send (it was neither expired nor taken for decided).
func TestMaxHoldThroughOutageStaysPending(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Minute))
	s := &readsFailAfterCreate{Store: db}
	g := New(s, pol, &Options{})
	c := writeCall("/outage")
	c.MaxHold = 300 * time.Millisecond
	a := g.Admit(t.Context(), c)
	if a.Allowed || !a.Pending || a.ApprovalID == "" {
		t.Fatalf("admission %+v, want the pending answer", a)
	}
	s.failing.Store(false)
	r := mustStored(t, db, a.ApprovalID)
	if r.State != approval.StatePending {
		t.Fatalf("request is %s after the max hold, want pending", r.State)
	}
	// The answer was made from what the hold kept of the request (heldReq),
	// not from a read: it has what the pending answer and a requestState
	// (MRTR) read, as stored (the store keeps milliseconds).
	h := *a.Held
	if h.ID != r.ID || h.State != r.State || h.Server != r.Server || h.Tool != r.Tool || h.Kind != r.Kind ||
		h.ArgumentsHash != r.ArgumentsHash || h.RequestedBy != r.RequestedBy || h.Rule != r.Rule || h.Mode != r.Mode ||
		h.ExpiresAt.Sub(r.ExpiresAt).Abs() >= time.Millisecond || h.ValidFor != r.ValidFor || h.RequiredApprovals != r.RequiredApprovals ||
		len(h.Reviews) != len(r.Reviews) {
		t.Errorf("the pending answer's request %+v, want the stored %+v on the fields it is read for", h, r)
	}
}
