package gate

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// panicOutcome is the real store, except that while armed every write
// of a dispatch outcome panics before it writes, as a bug in the store or
// the ledger's record would (attack13).
type panicOutcome struct {
	store.Store
	armed atomic.Bool
}

func (s *panicOutcome) check() {
	if s.armed.Load() {
		panic("attack13: in the outcome's write")
	}
}

func (s *panicOutcome) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	s.check()
	return s.Store.RecordOutcome(ctx, id, o, rec, actor)
}

func (s *panicOutcome) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.check()
	return s.Store.RecordDispatch(ctx, r, actor, fn)
}

// TestOutcomePanicReleasesTheDispatchLease (attack13): a panic while an
// approved call's outcome is recorded (Admission.FinishOnce, on the
// gateway's answer paths that recover it: answerfail.go) left this
// process renewing the request's dispatch lease for as long as it ran,
// so the request stayed consumed without an outcome and the sweeper never
// called it "unknown": the call was left "dispatching" forever. Now the
// lease is let go, the panic goes on to the caller's recovery, and once
// the lease lapses the sweep records the outcome unknown.
func TestOutcomePanicReleasesTheDispatchLease(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ps := &panicOutcome{Store: db}
		g := New(ps, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/panic-in-outcome"), nil)
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recvHeld(t, ch)
		if !a.Allowed {
			t.Fatalf("approved call refused: %+v", a)
		}
		if !g.leases.has(id, leaseDispatch) {
			t.Fatal("no dispatch lease before the outcome")
		}
		ps.armed.Store(true)
		var recovered any
		func() {
			defer func() { recovered = recover() }()
			a.FinishOnce(t.Context(), approval.OutcomeOK, Recorded{})
		}()
		if recovered == nil {
			t.Fatal("the outcome's write did not panic")
		}
		if g.leases.has(id, leaseDispatch) {
			t.Fatal("after a panic in the outcome's write this process still renews the dispatch lease: the request stays consumed without an outcome for as long as it runs")
		}
		// A second FinishOnce (the caller's recovery) writes nothing.
		a.FinishOnce(t.Context(), approval.OutcomeUnknown, Recorded{})
		ps.armed.Store(false)
		r, err := db.GetRequest(t.Context(), id)
		if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeNone {
			t.Fatalf("request %s outcome %q (%v), want consumed without an outcome (for the sweep)", r.State, r.DispatchOutcome, err)
		}
	})
}

// panicBeforeUpdate is the real store, except that, once armed, its next
// UpdateRequest panics before it writes (a bug in the consume's
// transaction, before it commits).
type panicBeforeUpdate struct {
	store.Store
	armed atomic.Bool
}

func (s *panicBeforeUpdate) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if s.armed.CompareAndSwap(true, false) {
		panic("attack13: before the consume")
	}
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

// TestEventWaitSettlePanicBeforeConsume (attack13): a panic while a held
// call waited for on events is settled, before anything was consumed
// (here in the consume's write), answers the call refused, as
// TestEventWaitSettlePanicAfterConsume's does. It also left this process
// holding the request's lease for the call it had just refused (afterHold,
// which lets it go, was never reached): the approved request stayed held
// by a call that no longer waited, renewed for as long as the process
// ran. Now the hold is let go as a caller gone would let it go, and an
// identical re-send takes the approval over and runs once.
func TestEventWaitSettlePanicBeforeConsume(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ps := &panicBeforeUpdate{Store: db}
		g := New(ps, pol, &Options{})
		other := New(db, pol, &Options{})
		id, ch := holdOnEvents(t, t.Context(), g, writeCall("/panic-before-consume"), nil)
		if _, err := other.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		ps.armed.Store(true)
		g.Wake(id) // as the store's watch would
		a := recvHeld(t, ch)
		wantPanicRefusal(t, a, &ps.armed)
		waitNoSteps(t)
		if g.leases.has(id, leaseHold) {
			t.Fatal("this process still holds the lease of a request whose call it refused")
		}
		r, err := db.GetRequest(t.Context(), id)
		if err != nil || r.State != approval.StateApproved || !r.LeaseLapsed(time.Now()) {
			t.Fatalf("request %s, lease until %v (%v), want approved with its lease released", r.State, r.LeaseUntil, err)
		}
		// The identical re-send takes the approval over and runs once.
		id2, ch2 := holdOnEvents(t, t.Context(), g, writeCall("/panic-before-consume"), nil)
		if id2 != id {
			t.Fatalf("re-send held on %s, want %s", id2, id)
		}
		a = recvHeld(t, ch2)
		if !a.Allowed {
			t.Fatalf("re-send after the approval: %+v", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		if r, err := db.GetRequest(t.Context(), id); err != nil || r.DispatchOutcome != approval.OutcomeOK {
			t.Fatalf("request %s outcome %q (%v), want ok", r.State, r.DispatchOutcome, err)
		}
	})
}

// TestGoroutineWaitPanicRefuses (attack13): a panic in the wait of a held
// call waited for on a goroutine (WaitHold: calls with keep-alives, the
// SDK path's held calls, the task runners) ended the process, every held
// call with it: attack12 made the wait on events fail closed, not this
// one. Now it fails closed the same way: the call is refused, nothing
// runs, the request stays pending with its lease released, and an
// identical re-send takes it over and runs once it is approved.
func TestGoroutineWaitPanicRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &readHook{Store: db}
		g := New(hs, pol, &Options{})
		call := func() (Call, <-chan struct{}) {
			c := writeCall("/panic-in-goroutine-wait")
			waiting := make(chan struct{}, 1)
			c.KeepAlive = func(context.Context, string) { // waited for on a goroutine
				select {
				case waiting <- struct{}{}:
				default:
				}
			}
			return c, waiting
		}
		c, waiting := call()
		ch := admitAsync(t.Context(), g, c)
		select {
		case <-waiting:
		case a := <-ch:
			t.Fatalf("not held: %+v", a)
		}
		id := waitPending(t, db, 1)[0].ID
		hs.arm(nil, func(approval.ID) { panic("attack13: in the read") })
		g.Wake(id) // a wake-up without a row: the wait reads the store
		a := recv(t, ch)
		if a.Allowed || a.ApprovalID != id || !strings.Contains(a.Message, "internal error") {
			t.Fatalf("answer %+v, want a refusal naming an internal error", a)
		}
		if g.leases.has(id, leaseHold) {
			t.Fatal("this process still holds the lease of the refused call's request")
		}
		r, err := db.GetRequest(t.Context(), id)
		if err != nil || r.State != approval.StatePending || !r.LeaseLapsed(time.Now()) {
			t.Fatalf("request %s, lease until %v (%v), want pending with its lease released", r.State, r.LeaseUntil, err)
		}
		c, waiting = call()
		ch = admitAsync(t.Context(), g, c)
		select {
		case <-waiting:
		case a := <-ch:
			t.Fatalf("re-send not held: %+v", a)
		}
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a = recv(t, ch)
		if !a.Allowed || a.ApprovalID != id {
			t.Fatalf("re-send after approval: %+v, want allowed through %s", a, id)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
	})
}

// TestGoroutineWaitSettlePanicAfterConsume (attack13): a panic while a
// held call waited for on a goroutine is settled, after its consume
// committed (another instance's approval; this gate consumes while
// settling), ended the process. Now the call is refused, the request's
// record says it was not dispatched (transport_error), and this process
// holds no lease on it, as on the wait on events.
func TestGoroutineWaitSettlePanicAfterConsume(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ps := &panicAfterConsume{Store: db}
		g := New(ps, pol, &Options{})
		other := New(db, pol, &Options{})
		c := writeCall("/panic-after-consume-goroutine")
		waiting := make(chan struct{}, 1)
		c.KeepAlive = func(context.Context, string) {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		ch := admitAsync(t.Context(), g, c)
		select {
		case <-waiting:
		case a := <-ch:
			t.Fatalf("not held: %+v", a)
		}
		id := waitPending(t, db, 1)[0].ID
		ps.armed.Store(true)
		if _, err := other.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		g.Wake(id) // as the store's watch would
		a := recv(t, ch)
		wantPanicRefusal(t, &a, &ps.armed)
		wantNotDispatched(t, db, id)
		if g.leases.has(id, leaseHold|leaseDispatch) {
			t.Fatal("this process still holds a lease on the refused call's request")
		}
	})
}

// panicRecorder panics on the audit record of an admitted approval.
type panicRecorder struct{}

func (panicRecorder) Decided(_ context.Context, d Decided) {
	if d.Allowed && d.ApprovalID != "" {
		panic("attack13: in the audit record")
	}
}

// TestHeldRecordPanicRecordsNotDispatched (attack13): a panic in the
// audit record of an approved held call waited for on a goroutine (a
// record is made for one with a monitor verdict), after its consume and
// outside its wait, reached the caller without the admission: the
// request stayed consumed without an outcome and this process renewed
// its dispatch lease (with the gateway's recoveries of prompts/get,
// resources/read and task runners, for as long as the process lived).
// Now it is recorded as not dispatched (transport_error; nothing ran) and
// the lease is let go.
func TestHeldRecordPanicRecordsNotDispatched(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		yes := true
		p := testPolicy(time.Hour)
		p.Rules = append(p.Rules, policy.Rule{Name: "watch writes", Tools: []string{"write_*"}, Effect: policy.Deny, Monitor: &yes})
		pol := &swappable{}
		pol.p.Store(p)
		g := New(db, pol, &Options{Recorder: panicRecorder{}})
		c := writeCall("/record-panic")
		waiting := make(chan struct{}, 1)
		c.KeepAlive = func(context.Context, string) { // waited for on a goroutine
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		panicked := make(chan any, 1)
		go func() {
			defer func() { panicked <- recover() }()
			g.Admit(t.Context(), c)
		}()
		select {
		case <-waiting:
		case v := <-panicked:
			t.Fatalf("Admit returned before holding (%v)", v)
		}
		id := waitPending(t, db, 1)[0].ID
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		select {
		case v := <-panicked:
			if v == nil {
				t.Fatal("the audit record did not panic")
			}
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("Admit did not return")
		}
		r, err := db.GetRequest(t.Context(), id)
		if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeTransportError {
			t.Fatalf("request %s outcome %q (%v), want consumed, transport_error (nothing was dispatched)", r.State, r.DispatchOutcome, err)
		}
		if g.leases.has(id, leaseDispatch) {
			t.Fatal("this process still renews the dispatch lease of a call never handed to its caller")
		}
	})
}
