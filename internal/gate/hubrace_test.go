package gate

import (
	"fmt"
	"sync"
	"testing"
)

// TestHubListsUnderChurn (breakheld): subscriptions that stay on an id
// while others of the same id come and go concurrently (dropped as head,
// middle or tail of the id's list, some after a wake-up took them) are all
// still listed: one wake-up of the id closes every one of them, and once
// all are dropped nothing is left in the hub. Run with -race.
func TestHubListsUnderChurn(t *testing.T) {
	h := newHub()
	const ids, stay, churners, rounds = 3, 8, 8, 300
	var stayers [ids][]*wakeup
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range ids {
		id := fmt.Sprint("r", i)
		for range stay / 2 {
			w, _ := h.subscribe(id)
			stayers[i] = append(stayers[i], w)
		}
		for range stay / 2 {
			wg.Go(func() {
				<-start
				w, _ := h.subscribe(id)
				mu.Lock()
				stayers[i] = append(stayers[i], w)
				mu.Unlock()
			})
		}
	}
	for c := range churners {
		wg.Go(func() {
			<-start
			for n := range rounds {
				id := fmt.Sprint("r", (c+n)%ids)
				var held []func()
				for range 1 + n%3 {
					_, unsub := h.subscribe(id)
					held = append(held, unsub)
				}
				// Drop them in an order that takes heads, middles and tails.
				for k := range held {
					held[(k*2+n)%len(held)]()
				}
				for _, u := range held {
					u() // twice: nothing
				}
				// A wake-up of an id no stayer waits on, racing the drops.
				other := fmt.Sprint("x", c%2)
				w, unsub := h.subscribe(other)
				if n%2 == 0 {
					h.wake(other)
					if !closed(w) {
						t.Errorf("a subscription made before a wake-up of its id was not closed by it")
					}
				}
				unsub()
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range ids {
		h.wake(fmt.Sprint("r", i))
		for k, w := range stayers[i] {
			if !closed(w) {
				t.Errorf("r%d: stayer %d not woken: it fell off its id's list while others were dropped", i, k)
			}
		}
	}
	if len(h.subs) != 0 {
		t.Fatalf("%d ids left subscribed after every subscription was woken or dropped", len(h.subs))
	}
}

// TestHubWakeRacesSubscribe (breakheld): a subscription made before a
// wake-up of its id starts is closed by it, whatever other subscriptions
// of the id and wake-ups run at the same time (no lost wake-up); one made
// after may stay open until the next.
func TestHubWakeRacesSubscribe(t *testing.T) {
	h := newHub()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 500 {
				id := fmt.Sprint("r", (g+n)%2)
				w, unsub := h.subscribe(id)
				if n%3 == 0 {
					unsub() // dropped before the wake: must not be closed by it, nor break the list
					h.wake(id)
					continue
				}
				done := h.decide(id)
				h.wake(id) // left to the decision's
				done(nil)
				if !closed(w) {
					t.Errorf("a subscription made before a decision's wake-up was not closed")
				}
				unsub()
			}
		})
	}
	wg.Wait()
	h.wakeAll()
	if len(h.subs) != 0 || len(h.deciding) != 0 {
		t.Fatalf("%d ids subscribed, %d decisions marked, want none", len(h.subs), len(h.deciding))
	}
}
