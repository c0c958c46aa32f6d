package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestEventWaitKeepAlivesRaceTheirEnds (attack21): held calls with
// keep-alives waited for without a goroutine, on a beat of one slot that
// fires every millisecond (every call's keep-alive on each callback run),
// joined and ended at once from many goroutines by approve, deny and the
// caller's cancel: each is answered once, as it was ended, and none gets a
// keep-alive after its answer.
func TestEventWaitKeepAlivesRaceTheirEnds(t *testing.T) {
	f := newFixture(t, time.Minute, &Options{KeepAlive: time.Millisecond})
	const n = 30 // under approvals.max_pending_per_principal (32)
	type held struct {
		k      *kaCall
		id     approval.ID
		ch     <-chan *Admission
		cancel context.CancelFunc
	}
	calls := make([]held, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := &kaCall{}
			c := writeCall(fmt.Sprintf("/race-%d", i))
			c.KeepAlive = k.keepAlive
			ctx, cancel := context.WithCancel(t.Context())
			id, ch := holdOnEvents(t, ctx, f.gate, c, nil)
			calls[i] = held{k: k, id: id, ch: ch, cancel: cancel}
		})
	}
	wg.Wait()
	for _, c := range calls {
		defer c.cancel()
		c.k.waitKeepAlives(t, 2)
	}
	// Every end at once, while the beat calls back.
	for i, c := range calls {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				c.cancel()
			case 1:
				if _, err := f.gate.Review(context.Background(), c.id, alice, approval.VerdictApprove, "ok", ""); err != nil {
					t.Error(err)
				}
			case 2:
				if _, err := f.gate.Review(context.Background(), c.id, alice, approval.VerdictDeny, "no", ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i, c := range calls {
		a := recvHeld(t, c.ch)
		c.k.answered.Store(true)
		if want := i%3 == 1; a.Allowed != want {
			t.Errorf("call %d (end %d): allowed %v, want %v: %+v", i, i%3, a.Allowed, want, a)
		}
		if a.Allowed {
			a.Finish(t.Context(), approval.OutcomeOK)
		}
	}
	// More beats: nothing for the answered calls, nor a second answer.
	k := &kaCall{}
	c := writeCall("/race-last")
	c.KeepAlive = k.keepAlive
	ctx, cancel := context.WithCancel(t.Context())
	_, last := holdOnEvents(t, ctx, f.gate, c, nil)
	k.waitKeepAlives(t, 20)
	cancel()
	recvHeld(t, last)
	for i, c := range calls {
		if l := c.k.late.Load(); l != 0 {
			t.Errorf("call %d: %d keep-alives after its answer", i, l)
		}
		select {
		case a := <-c.ch:
			t.Errorf("call %d answered twice: %+v", i, a)
		default:
		}
	}
	waitNoSteps(t)
}
