package gate

import (
	"fmt"
	"runtime"
	"testing"

	"toolgate/internal/approval"
)

func closed(w *wakeup) bool {
	select {
	case <-w.C:
		return true
	default:
		return false
	}
}

// While a decision of this process is being written, a plain wake-up of
// its request (the store watcher seeing the decision's own commit) is left
// to the decision's, which hands the waiters the decided request; once it
// is done, plain wake-ups pass again. A decision whose write failed (nil)
// or left the request pending wakes plainly: the waiters read the store.
func TestHubDecisionWakesWithTheDecidedRequest(t *testing.T) {
	h := newHub()
	w, unsub := h.subscribe("r1")
	defer unsub()
	done := h.decide("r1")
	h.wake("r1")
	if closed(w) {
		t.Fatal("a plain wake-up during the decision woke the waiter before the decision's")
	}
	other, unsubOther := h.subscribe("r2")
	defer unsubOther()
	h.wake("r2")
	if !closed(other) {
		t.Fatal("a decision on r1 held back the wake-up of r2")
	}
	r := approval.Request{ID: "r1", State: approval.StateApproved}
	done(&r)
	if !closed(w) || w.decided == nil || w.decided.State != approval.StateApproved {
		t.Fatalf("after the decision: closed %v, decided %+v; want woken with the approved request", closed(w), w.decided)
	}

	w2, unsub2 := h.subscribe("r1")
	defer unsub2()
	h.wake("r1")
	if !closed(w2) || w2.decided != nil {
		t.Fatal("a plain wake-up after the decision did not wake plainly")
	}

	for _, end := range []*approval.Request{nil, {ID: "r1", State: approval.StatePending}} {
		w3, unsub3 := h.subscribe("r1")
		done := h.decide("r1")
		done(end)
		if !closed(w3) || w3.decided != nil {
			t.Fatalf("decision ending with %+v: closed %v, decided %+v; want a plain wake-up", end, closed(w3), w3.decided)
		}
		unsub3()
	}
	if len(h.deciding) != 0 {
		t.Fatalf("decisions still marked: %v", h.deciding)
	}
}

// Several subscriptions of one id: dropping any of them (first, middle,
// last) leaves the others subscribed, a wake-up closes exactly those left,
// dropping one after its wake-up changes nothing, and an id without
// subscriptions leaves nothing behind in the hub.
func TestHubSubscriptionsOfOneID(t *testing.T) {
	for drop := range 3 {
		h := newHub()
		var ws []*wakeup
		var unsubs []func()
		for range 3 {
			w, unsub := h.subscribe("r1")
			ws, unsubs = append(ws, w), append(unsubs, unsub)
		}
		other, unsubOther := h.subscribe("r2")
		unsubs[drop]()
		unsubs[drop]() // twice: nothing
		h.wake("r1")
		for i, w := range ws {
			if closed(w) == (i == drop) {
				t.Errorf("dropped %d: subscription %d closed %v", drop, i, closed(w))
			}
		}
		if closed(other) {
			t.Errorf("dropped %d: a wake-up of r1 closed r2's", drop)
		}
		for _, u := range unsubs {
			u()
		}
		unsubOther()
		if len(h.subs) != 0 {
			t.Errorf("dropped %d: %d ids left subscribed", drop, len(h.subs))
		}
	}
	h := newHub()
	a, unsubA := h.subscribe("r1")
	b, unsubB := h.subscribe("r1")
	unsubA()
	unsubB()
	if len(h.subs) != 0 {
		t.Fatalf("%d ids left after every subscription was dropped", len(h.subs))
	}
	h.wakeAll()
	if closed(a) || closed(b) {
		t.Fatal("a dropped subscription was woken")
	}
}

// A held call's subscription costs the hub one wake-up and its channel,
// not a map per request (docs/performance.md, "heldmem4"): 399 B per
// subscribed request with the map, 233 B with the list, measured as the
// live heap after a collection, the hub's own map of requests included.
func TestHubSubscriptionBytes(t *testing.T) {
	const n = 20000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("id-", i)
	}
	h := newHub()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	unsubs := make([]func(), 0, n)
	for _, id := range ids {
		_, unsub := h.subscribe(id)
		unsubs = append(unsubs, unsub)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n //nolint:gosec // MemStats sizes are far below 2^63
	t.Logf("%d B of live heap per subscribed request", per)
	if per > 320 {
		t.Errorf("%d B per subscribed request, want under 320 (no map per request)", per)
	}
	for _, u := range unsubs {
		u()
	}
	if len(h.subs) != 0 {
		t.Fatalf("%d requests left subscribed", len(h.subs))
	}
}
