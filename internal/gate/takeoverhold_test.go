package gate

import (
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// TestTakeOverWaitCountsAgainstMaxHold (fixes24): an identical re-send
// whose request another instance holds waits once for that lease to end
// before taking the request over (takeOver), and that wait did not count
// against the call's MaxHold: the call was held for a whole MaxHold more
// once it took the request over (max_hold 50 s after up to one lease,
// 15 s: 65 s, past the 60 s timeout of the clients max_hold is set for,
// whose timeout then cancels the approval). Here the other instance's
// lease ends 5 s after the re-send comes, its MaxHold is 200 ms: it is
// answered pending at its MaxHold, having taken nothing over. On both
// stores.
func TestTakeOverWaitCountsAgainstMaxHold(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(2 * time.Hour))
		x := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-x"}) // renews nothing: its lease ends as written
		watch(t, db, x)
		held := admitHeld(t.Context(), t, x, writeCall("/max-hold-take-over"))
		r := waitPending(t, db, 1)[0]
		if r.HeldBy != "gw-x" || r.LeaseLapsed(time.Now()) {
			t.Fatalf("request %s held by %q until %v, want by gw-x", r.ID, r.HeldBy, r.LeaseUntil)
		}
		// Instance y's clock runs ahead so that, to y, x's lease ends 5 s
		// after the re-send came.
		var ahead atomic.Int64
		y := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-y", Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
		watch(t, db, y)
		c := writeCall("/max-hold-take-over")
		c.MaxHold = 200 * time.Millisecond
		tookOver := make(chan approval.ID, 1)
		c.OnHold = func(r approval.Request) { tookOver <- r.ID }
		ahead.Store(int64(time.Until(r.LeaseUntil) - 5*time.Second))
		a := y.Admit(t.Context(), c)
		select {
		case id := <-tookOver:
			t.Fatalf("the re-send took %s over after its max hold had passed (answered %q): its wait for the other instance's lease did not count against its max hold", id, a.Message)
		default:
		}
		if !a.Pending || a.ApprovalID != r.ID {
			t.Fatalf("re-send answered %+v, want pending on %s", a, r.ID)
		}
		if rs := waitPending(t, db, 1); rs[0].ID != r.ID {
			t.Fatalf("pending %s, want %s only", rs[0].ID, r.ID)
		}
		if _, err := x.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		first := recv(t, held)
		if !first.Allowed || first.ApprovalID != r.ID {
			t.Fatalf("the held call after approval: %+v, want allowed on %s", first, r.ID)
		}
		first.Finish(t.Context(), approval.OutcomeOK)
	})
}
