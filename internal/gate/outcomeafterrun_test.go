package gate

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestNoOutcomeWriterAfterRun (fixes26): Run waits for the background
// writers of dispatch outcomes (drainOutcomes) before it returns, so that
// nothing of the gate writes to the store after it (serve closes the
// store then). A call that finished while or after Run waited, its
// outcome's first write refused by a store in trouble, started a writer
// Run did not wait for: it wrote after Run had returned (and its
// WaitGroup.Go could race drainOutcomes' Wait). Once Run waits, such an
// outcome is not written later; it is not lost either: the request stays
// consumed without an outcome, its dispatch lease lapses, and a live
// sweeper records it "unknown".
func TestNoOutcomeWriterAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		f := newFaulty(db)
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		g := New(f, pol, &Options{Instance: "a"})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { _ = g.Run(ctx); close(done) }()

		ch := admitAsync(t.Context(), g, writeCall("/outcome-after-run"))
		r := waitPending(t, db, 1)[0]
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, ch)
		if !a.Allowed {
			t.Fatalf("admission %+v, want allowed", a)
		}
		cancel()
		<-done // Run returned: the gate writes nothing more

		f.reset()
		f.down.Store(true)
		a.FinishWith(t.Context(), approval.OutcomeOK, Recorded{Result: []byte(`{"content":[]}`)})
		synctest.Wait() // every goroutine of the bubble done or blocked
		if n := writes(f); n != 1 {
			t.Errorf("after Run returned the gate made %d outcome writes, want 1 (the call's own first attempt; more: a background writer Run did not wait for)", n)
		}
		if n := f.count("PutResult"); n != 0 {
			t.Errorf("after Run returned the gate wrote the result on its own %d times, want none", n)
		}

		// Not lost: another instance's sweeper records the outcome
		// unknown once the lease has lapsed and the store has answered
		// it for a lease.
		f.down.Store(false)
		g2 := New(db, pol, &Options{Instance: "b"})
		ctx2, cancel2 := context.WithCancel(t.Context())
		done2 := make(chan struct{})
		go func() { _ = g2.Run(ctx2); close(done2) }()
		time.Sleep(3 * g2.opts.Lease) // synctest's clock
		synctest.Wait()
		cancel2()
		<-done2
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State != approval.StateConsumed || cur.DispatchOutcome != approval.OutcomeUnknown {
			t.Fatalf("request %s, outcome %q; want consumed, outcome unknown", cur.State, cur.DispatchOutcome)
		}
	})
}
