package gate

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/sqlitetest"
)

// growStack uses a frame of 6 KiB, so that the goroutine that calls it
// runs on a stack of at least 8 KiB afterwards, as a parked call's waiter
// does in the real gateway (it starts at the burst's average stack size).
//
//go:noinline
func growStack(n int) byte {
	var b [6 << 10]byte
	b[n%len(b)] = 1
	return b[(n*7)%len(b)]
}

// waitLikeTheGateway calls WaitHold, as the gateway's parked calls do, below a frame as large as the
// gateway's two parked frames above it (waitParked and leanHold.wait:
// 128 B), the pad kept live across the wait.
//
//go:noinline
func waitLikeTheGateway(g *Gate, hctx context.Context, hold HeldCall) byte {
	var pad [96]byte
	pad[len(hold.h.r.id)%len(pad)] = 1
	ans := g.WaitHold(hctx, hold)
	return pad[len(ans.ApprovalID)%len(pad)]
}

// A held call's waiter, once parked, uses less than a quarter of a 4 KiB
// stack with the runtime's no-split reserve (800 B), so the collector
// halves an 8 KiB waiter to 4 KiB (docs/performance.md, "Smaller held
// calls"): with its frames just over 2 KB it stayed at 8 KiB, 4 KB more
// per held call. The stacks are measured as the runtime's StackInuse per
// parked waiter after three collections, and what the gate keeps per held
// call while it waits as the live heap (HeapAlloc after a collection)
// from before the admissions.
func TestHeldWaiterStackShrinksTo4KiB(t *testing.T) {
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{})

	const n = 600
	var atStart runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&atStart)
	ctx, cancel := context.WithCancel(t.Context())
	type held struct {
		hctx context.Context //nolint:containedctx // AdmitOrHold's context, handed to WaitHold as the gateway's leanHold does
		hold HeldCall
	}
	hs := make([]held, 0, n)
	for i := range n {
		c := writeCall(fmt.Sprintf("/s%d", i))
		c.Principal.ID = fmt.Sprintf("agent-%d", i%30) // under max_pending_per_principal
		adm := new(Admission)
		hctx, ok := g.AdmitOrHold(ctx, &c, adm)
		if !ok {
			t.Fatalf("call %d not held: %+v", i, *adm)
		}
		hs = append(hs, held{hctx, adm.TakeHold()}) // the Admission is not kept, as in the gateway
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			growStack(len(h.hold.h.r.id))
			waitLikeTheGateway(g, h.hctx, h.hold)
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if k := parkedInWaitFor(); k == n {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters parked in waitFor", k, n)
		}
	}
	for range 3 {
		runtime.GC() // each halves a stack at most once
	}
	runtime.ReadMemStats(&after)
	perCall := (int64(after.StackInuse) - int64(before.StackInuse)) / n //nolint:gosec // MemStats sizes are far below 2^63
	heap := (int64(after.HeapAlloc) - int64(atStart.HeapAlloc)) / n     //nolint:gosec // as above
	t.Logf("stacks: %d B per parked waiter; live heap %d B per held call", perCall, heap)
	switch {
	case raceEnabled:
		t.Log("-race: the stack bound is for the real binary (the race detector doubles the stack guard); not checked")
	case perCall > 6<<10:
		t.Errorf("a parked waiter's stack is %d B, want 4 KiB (its frames under a quarter of it)", perCall)
	}
	// 5.8 KB before the hold's Admission, the hub's copy of the Call and
	// the wait's copies of the request were dropped, 3.3 KB after.
	if heap > 4500 {
		t.Errorf("the gate keeps %d B of live heap per held call, want under 4.5 KB", heap)
	}
}

// parkedInWaitFor counts the goroutines parked in waitFor's select: in
// waitFor and waiting in a select (the dump's "[select" state). One that
// is in waitFor but still running or runnable (in startHeld, or its
// first keep-alive) is not counted: a collection does not shrink a
// running goroutine's stack, and one preempted asynchronously is shrunk
// only at its next synchronous safe point (fixes25).
func parkedInWaitFor() int {
	buf := make([]byte, 8<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	k := 0
	for _, g := range strings.Split(dump, "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(head, "[select") && strings.Contains(g, "gate.(*Gate).waitFor(") {
			k++
		}
	}
	return k
}
