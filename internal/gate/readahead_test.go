package gate

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore"
)

// TestReadAheadPanicStillHolds (attack14): an identical re-send that takes
// over a pending request reads it ahead in AdmitOrHold (readAhead), on the
// goroutine that admits it: the lean front's connection goroutine, or the
// goroutine of a parked call's admission, where nothing recovers. A panic
// in that read (a store bug) escaped AdmitOrHold with the request taken
// over, its lease mark this process's and renewed, and no call waiting on
// it: an approval woke nobody. The read ahead only saves the wait a read,
// so the panic is logged and the wait reads the request itself: the call
// is held and runs once on its approval. On both stores.
func TestReadAheadPanicStillHolds(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		hs := &readHook{Store: db}
		g := New(hs, pol, &Options{})
		// The first call goes away: its request stays pending, released.
		ctx, cancel := context.WithCancelCause(t.Context())
		ch := admitAsync(ctx, g, writeCall("/read-ahead"))
		r := waitPending(t, db, 1)[0]
		cancel(errors.New("client connection dropped"))
		if a := recv(t, ch); a.Allowed {
			t.Fatal("dropped call was allowed")
		}
		// The identical re-send takes it over; its read ahead panics.
		// Only the read ahead's read panics: a re-send that finds the lease
		// not yet released (a renewal in flight, a slow store under load)
		// reads the request in takeOver first, which is not under attack.
		var (
			hit   bool
			ahead func(approval.ID)
		)
		ahead = func(approval.ID) {
			buf := make([]byte, 64<<10)
			if !bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("(*Gate).readAhead(")) {
				hs.arm(ahead, nil)
				return
			}
			hit = true
			panic("attack14: in the read ahead")
		}
		hs.arm(ahead, nil)
		var (
			id  approval.ID
			got <-chan *Admission
		)
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("AdmitOrHold panicked (%v); lease marks left: %v", v, g.leases.ids())
				}
			}()
			id, got = holdOnEvents(t, t.Context(), g, writeCall("/read-ahead"), nil)
		}()
		if id != r.ID || !hit {
			t.Fatalf("re-send held on %s (read ahead ran: %v), want %s", id, hit, r.ID)
		}
		if _, err := g.Review(t.Context(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recvHeld(t, got)
		if !a.Allowed {
			t.Fatalf("re-send after approval: %+v", a)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		waitNoSteps(t)
		rr, err := db.GetRequest(t.Context(), id)
		if err != nil || rr.State != approval.StateConsumed || rr.DispatchOutcome != approval.OutcomeOK {
			t.Fatalf("request %s outcome %q (%v), want consumed, ok", rr.State, rr.DispatchOutcome, err)
		}
		if ids := g.leases.ids(); len(ids) != 0 {
			t.Fatalf("lease marks left: %v", ids)
		}
	})
}
