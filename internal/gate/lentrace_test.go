package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"toolgate/internal/approval"
)

// TestLentCallRacesApprovalAndCancel (breakheld): held calls whose Call is
// lent to the gate (AdmitOrHold, WaitHold on another goroutine) are
// approved while their callers cancel, all at once. Under -race: nothing
// reads or writes the lent Call concurrently with its holder, nor after
// WaitHold returned (the test then overwrites it, as a caller reusing it
// would). Each call runs at most once, and an approved request is never
// left consumed without its call having been admitted (silently lost).
func TestLentCallRacesApprovalAndCancel(t *testing.T) {
	f, _, _, _ := handOffFixture(t)
	const n = 24
	type held struct {
		c      *Call
		hctx   context.Context //nolint:containedctx // the hold's, as the gateway keeps it
		hold   HeldCall
		cancel context.CancelFunc
	}
	hs := make([]held, n)
	for i := range hs {
		ctx, cancel := context.WithCancel(t.Context())
		c := new(Call)
		*c = writeCall(fmt.Sprintf("/race/%d", i))
		if i%2 == 0 {
			// Half of them through the lean front's hand-off.
			h := f.gate.AdmitUnlessHeld(ctx, c, new(Admission))
			if h == nil {
				t.Fatal("not handed off")
			}
			c.Prior = h
		}
		adm := new(Admission)
		hctx, ok := f.gate.AdmitOrHold(ctx, c, adm)
		if !ok {
			t.Fatalf("call %d not held: %+v", i, *adm)
		}
		hs[i] = held{c: c, hctx: hctx, hold: adm.TakeHold(), cancel: cancel}
	}
	rs := waitPending(t, f.db, n)
	byPath := map[string]approval.ID{}
	for _, r := range rs {
		byPath[string(r.Arguments)] = r.ID
	}
	answers := make([]*Admission, n)
	var wg sync.WaitGroup
	for i := range hs {
		wg.Go(func() {
			answers[i] = f.gate.WaitHold(hs[i].hctx, hs[i].hold)
			*hs[i].c = Call{Server: "reused"} // the caller reuses its Call
		})
	}
	for i := range hs {
		id := byPath[string(hs[i].c.Arguments)]
		if id == "" {
			t.Fatalf("no request for call %d", i)
		}
		wg.Go(func() {
			if _, err := f.gate.Review(context.Background(), id, alice, approval.VerdictApprove, "ok", ""); err != nil {
				t.Logf("review %d: %v", i, err)
			}
		})
		if i%3 != 0 {
			wg.Go(hs[i].cancel)
		}
	}
	wg.Wait()
	for i, a := range answers {
		if a.Allowed {
			a.Finish(t.Context(), approval.OutcomeOK)
		}
		got, err := f.db.GetRequest(t.Context(), a.ApprovalID)
		if err != nil {
			t.Fatalf("call %d (%+v): %v", i, *a, err)
		}
		if got.State == approval.StateConsumed && !a.Allowed {
			t.Errorf("call %d: request consumed but the call was refused (%s): an approved call lost", i, a.Message)
		}
		if a.Allowed && got.State != approval.StateConsumed {
			t.Errorf("call %d admitted but its request is %s", i, got.State)
		}
		if i%3 == 0 && !a.Allowed {
			t.Errorf("call %d, not cancelled, refused after its approval: %s", i, a.Message)
		}
		hs[i].cancel()
	}
}
