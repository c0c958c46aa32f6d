package gate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/approval"
	"toolgate/internal/telemetry"
)

// TestLeaseTakenOverCounted (ops20): when an instance took over the hold
// of a call another instance held (its lease lapsed or was let go),
// nothing counted it. toolgate_leases_taken_over_total now counts it on
// the instance that took over; a re-send to the instance that held the
// call itself is not a take-over.
func TestLeaseTakenOverCounted(t *testing.T) {
	regA, reg := prometheus.NewRegistry(), prometheus.NewRegistry()
	f := newFixture(t, time.Minute, &Options{Instance: "a", Lease: 30 * time.Second, Metrics: telemetry.NewMetrics(regA)})
	b := New(f.db, f.pol, &Options{Instance: "b", Lease: 30 * time.Second, Metrics: telemetry.NewMetrics(reg)})
	takenOver := func() float64 {
		return counterValue(t, reg, "toolgate_leases_taken_over_total", map[string]string{"how": "resend"})
	}
	found := false
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		found = found || mf.GetName() == "toolgate_leases_taken_over_total"
	}
	if n := takenOver(); n != 0 || !found {
		t.Fatalf("taken over %v (present %v) before anything, want 0, present", n, found)
	}
	// Held on a; its caller drops, so a lets go of it; its re-send to a
	// takes a's own hold again (no take-over), and drops again.
	// held admits the call on g and returns once it is held there (its
	// first keep-alive), with its answer to come.
	held := func(ctx context.Context, g *Gate) <-chan Admission {
		t.Helper()
		started := make(chan struct{}, 1)
		c := writeCall("/taken-over")
		c.KeepAlive = func(context.Context, string) {
			select {
			case started <- struct{}{}:
			default:
			}
		}
		ch := admitAsync(ctx, g, c)
		select {
		case <-started:
		case a := <-ch:
			t.Fatalf("not held on %s: %+v", g.instance, a)
		}
		return ch
	}
	for range 2 {
		ctx, cancel := context.WithCancelCause(t.Context())
		ch := held(ctx, f.gate)
		cancel(errors.New("client connection dropped"))
		recv(t, ch)
	}
	r := waitPending(t, f.db, 1)[0]
	if n := counterValue(t, regA, "toolgate_leases_taken_over_total", map[string]string{"how": "resend"}); n != 0 {
		t.Errorf("a counted %v take-overs of its own holds, want 0", n)
	}
	// The identical re-send reaches b, which takes the hold over.
	ch := held(t.Context(), b)
	if got, err := f.db.GetRequest(t.Context(), r.ID); err != nil || got.HeldBy != "b" {
		t.Fatalf("held by %q (%v), want b", got.HeldBy, err)
	}
	if n := takenOver(); n != 1 {
		t.Errorf("taken over %v after b took a's hold, want 1", n)
	}
	if _, err := b.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	} else {
		a.Finish(t.Context(), approval.OutcomeOK)
	}
}

// TestSweepOfALapsedDispatchCounted (closing21): the take-over counter
// counted only re-sends and resumes. The other act on another instance's
// lapsed claim is the sweeper's: a call that instance consumed and was
// dispatching when it stopped gets the outcome unknown. It is counted
// (how="outcome_unknown"); an expiry of a request another instance holds
// is not a take-over, nor is the sweep of a dispatch of the sweeper's own
// instance.
func TestSweepOfALapsedDispatchCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, time.Minute, &Options{Instance: "a"})
	var ahead atomic.Int64 // b's clock runs ahead by this (set to an hour: a's leases and the requests' expiry lapsed)
	later := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	sweeper := New(f.db, f.pol, &Options{Instance: "b", Now: later, Metrics: telemetry.NewMetrics(reg)})
	count := func(how string) float64 {
		return counterValue(t, reg, "toolgate_leases_taken_over_total", map[string]string{"how": how})
	}
	// a consumes an approved call and "dies" mid-dispatch (no Finish); a
	// second call stays pending, held by a.
	ch := admitAsync(t.Context(), f.gate, writeCall("/dispatching"))
	r := waitPending(t, f.db, 1)[0]
	if _, err := f.gate.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "", ""); err != nil {
		t.Fatal(err)
	}
	if a := recv(t, ch); !a.Allowed {
		t.Fatalf("%+v", a)
	}
	held := admitAsync(t.Context(), f.gate, writeCall("/held"))
	waitPending(t, f.db, 1)
	ahead.Store(int64(time.Hour))
	sweeper.sweep(t.Context())
	if got, err := f.db.GetRequest(t.Context(), r.ID); err != nil || got.DispatchOutcome != approval.OutcomeUnknown {
		t.Fatalf("outcome %q (%v), want unknown", got.DispatchOutcome, err)
	}
	if n := count("outcome_unknown"); n != 1 {
		t.Errorf("counted %v outcome_unknown take-overs after b swept a's lapsed dispatch, want 1", n)
	}
	if n := count("resend"); n != 0 {
		t.Errorf("counted %v resend take-overs, want 0 (the held call expired)", n)
	}
	if a := recv(t, held); !a.Timeout {
		t.Errorf("held call: %+v, want timed out", a)
	}
}
