package storetest

import (
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// testNextDue: the times store.DueTimer reports are the earliest of the
// kinds Due lists (pending expiry, approved validity), whether a consumed
// request is still dispatching, and the ledger's earliest expiry; states
// Due never lists do not count. A store without DueTimer skips it.
func testNextDue(t *testing.T, s store.Store) {
	dt, ok := s.(store.DueTimer)
	if !ok {
		t.Skip("the store does not tell its next due times")
	}
	ctx := t.Context()
	check := func(when string, want store.DueTimes) {
		t.Helper()
		got, err := dt.NextDue(ctx)
		if err != nil {
			t.Fatalf("%s: NextDue = %v", when, err)
		}
		if !got.Requests.Equal(want.Requests) || got.Dispatching != want.Dispatching || !got.Ledger.Equal(want.Ledger) {
			t.Errorf("%s: NextDue = %+v, want %+v", when, got, want)
		}
	}
	check("empty store", store.DueTimes{})
	add := func(n int, expires, valid time.Duration, fn func(*approval.Request) error) approval.ID {
		t.Helper()
		r := pending(id(5, n))
		r.ExpiresAt, r.ValidFor = t0.Add(expires), valid
		mustCreate(t, s, r)
		if fn != nil {
			mustUpdate(t, s, r.ID, "bob", fn)
		}
		return r.ID
	}
	review := func(v approval.Verdict) func(*approval.Request) error {
		return func(r *approval.Request) error { return r.Review(reviewer("bob"), v, "", "", t0.Add(time.Minute)) }
	}
	first := add(1, 7*time.Minute, 0, nil)
	check("one pending", store.DueTimes{Requests: t0.Add(7 * time.Minute)})
	add(2, 2*time.Minute, 0, review(approval.VerdictDeny))
	add(3, 3*time.Minute, 0, review(approval.VerdictApprove)) // no validity limit
	add(4, time.Minute, 0, func(r *approval.Request) error { return r.Expire(t0.Add(time.Minute)) })
	add(5, 2*time.Minute, 0, func(r *approval.Request) error {
		if err := consumedHeld(t0.Add(time.Minute))(r); err != nil {
			return err
		}
		return r.RecordOutcome(approval.OutcomeOK)
	})
	check("only states Due never lists added", store.DueTimes{Requests: t0.Add(7 * time.Minute)})
	add(6, 20*time.Minute, 5*time.Minute, review(approval.VerdictApprove)) // decided t0+1m, valid until t0+6m
	check("an approval valid until t0+6m", store.DueTimes{Requests: t0.Add(6 * time.Minute)})
	add(7, 20*time.Minute, 0, consumedHeld(t0.Add(time.Hour)))
	check("a consumed request dispatching", store.DueTimes{Requests: t0.Add(6 * time.Minute), Dispatching: true})
	if err := s.UseRequestState(ctx, "nonce-next-due", first, t0.Add(30*time.Minute)); err != nil {
		t.Fatalf("UseRequestState = %v", err)
	}
	if err := s.PutResult(ctx, store.Result{RequestID: first, Error: []byte(`{"code":-1,"message":"x"}`), RecordedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatalf("PutResult = %v", err)
	}
	check("ledger rows", store.DueTimes{Requests: t0.Add(6 * time.Minute), Dispatching: true, Ledger: t0.Add(30 * time.Minute)})
}
