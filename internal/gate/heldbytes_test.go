package gate

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/sqlitetest"
)

// heldCallBytesMax is what a hold taken out of its Admission (HeldCall)
// may keep on the heap that nothing else keeps, per held call: the
// heldCall and what it alone points at, without the Call (the caller's,
// lent) and without what the wait adds. Measured 360 B (a 240 B heldCall
// with the compact request, the 80 B argument hash, readAhead's 40 B);
// 824 B when it kept the whole approval.Request and its display copy
// (docs/performance.md, "heldmem5").
const heldCallBytesMax = 400

// A held call keeps, besides its Call, a heldCall and what it alone
// points at: the request it is held on (its id, state, expiry, what a
// max-hold answer and a requestState need), never the request's display
// copy of the arguments, its warnings, approvers, lease holder or
// policy revision, which nothing reads while it is held. Measured as the
// heap that goes when the holds are dropped (the hub's subscriptions, the
// leases and the store's rows stay).
func TestHeldCallBytes(t *testing.T) {
	const n = 400
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(testPolicy(time.Hour))
	g := New(db, pol, &Options{MaxPendingPerPrincipal: 2 * n})

	calls := make([]Call, n)
	holds := make([]HeldCall, n)
	for i := range calls {
		// Arguments of the benchmark's size (BenchmarkHeldCalls: a
		// path-like key and a short value).
		calls[i] = writeCall(fmt.Sprintf("/held/bytes/%06d", i))
		adm := new(Admission)
		if _, held := g.AdmitOrHold(t.Context(), &calls[i], adm); !held {
			t.Fatalf("call %d not held: %+v", i, *adm)
		}
		holds[i] = adm.TakeHold()
	}
	var with, without runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&with)
	for i := range holds {
		holds[i] = HeldCall{}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&without)
	per := (int64(with.HeapAlloc) - int64(without.HeapAlloc)) / n //nolint:gosec // MemStats sizes are far below 2^63
	t.Logf("%d B of live heap per held call kept by its hold alone", per)
	if per > heldCallBytesMax {
		t.Errorf("%d B per held call kept by its hold, want at most %d (a compact request, no display copy)", per, heldCallBytesMax)
	}
	runtime.KeepAlive(calls)
	runtime.KeepAlive(g) // its hub and leases keep what is not the hold's alone
}
