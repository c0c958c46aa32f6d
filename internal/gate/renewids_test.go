package gate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"toolgate/internal/approval"
)

// TestRenewalIDsFollowTheMarks: the renewal's ids, kept from one renewal
// to the next and updated from the marks' changes (leases.renewalIDs),
// are at every renewal what collecting the marks afresh and sorting them
// gives (leases.ids): ids held, claimed, created, marked for dispatch,
// unheld, released and dropped in a random order, some of them more than
// once between two renewals, ids arriving out of order and between ids
// already held. Fails when a change is missed (an id renewed after its
// hold ended, or not renewed while held) or the merge breaks the order.
func TestRenewalIDsFollowTheMarks(t *testing.T) {
	all := make([]approval.ID, 200)
	for i := range all {
		all[i] = approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", i))
	}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := newLeases()
		holds := map[approval.ID]holdMark{}
		id := func() approval.ID { return all[rng.IntN(len(all))] }
		for step := range 1500 {
			switch x := id(); rng.IntN(9) {
			case 0, 1:
				holds[x] = l.hold(x, rng.IntN(3) == 0)
			case 2:
				if m, _ := l.claim(x); m != 0 {
					holds[x] = m
				}
			case 3:
				l.drop(x, leaseCreating)
			case 4:
				l.add(x, leaseDispatch)
			case 5:
				l.drop(x, leaseDispatch)
			case 6:
				l.unhold(x, holds[x])
			case 7:
				if end := l.release(x, holds[x]); end != nil {
					end()
				}
			case 8:
				l.renewing.Lock()
				got, want := slices.Clone(l.renewalIDs()), l.ids()
				l.renewing.Unlock()
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d, step %d: the renewal names %d ids %v, want the %d marked %v", seed, step, len(got), got, len(want), want)
				}
			}
		}
	}
}

// TestRenewalIDsLetGoOfEndedHolds: once most holds ended, the renewal's
// array is not kept at its old size, and it never keeps an id alive past
// the renewal after its hold ended.
func TestRenewalIDsLetGoOfEndedHolds(t *testing.T) {
	l := newLeases()
	marks := make([]holdMark, 5000)
	for i := range marks {
		marks[i] = l.hold(approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", i)), false)
	}
	l.renewing.Lock()
	defer l.renewing.Unlock()
	if n := len(l.renewalIDs()); n != len(marks) {
		t.Fatalf("the renewal names %d ids, want %d", n, len(marks))
	}
	for i, m := range marks[:len(marks)-10] {
		l.unhold(approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", i)), m)
	}
	ids := l.renewalIDs()
	if len(ids) != 10 || cap(ids) > 2*len(ids)+1024 {
		t.Fatalf("the renewal names %d ids in an array of %d, want 10 in at most %d", len(ids), cap(ids), 2*len(ids)+1024)
	}
	if n := len(l.held); n != 10 {
		t.Fatalf("%d marks, want 10", n)
	}
}

// BenchmarkRenewalIDs: the ids of a renewal of 10,000 held calls while
// nothing changed (the idle window), and with 100 holds ended and 100
// new ones since the last renewal.
func BenchmarkRenewalIDs(b *testing.B) {
	for _, churn := range []int{0, 100} {
		b.Run(fmt.Sprintf("churn=%d", churn), func(b *testing.B) {
			l := newLeases()
			n := 0
			next := func() approval.ID { n++; return approval.ID(fmt.Sprintf("01900000-0000-7000-8000-%012x", n)) }
			var held []approval.ID
			marks := map[approval.ID]holdMark{}
			for range 10000 {
				id := next()
				held = append(held, id)
				marks[id] = l.hold(id, false)
			}
			l.renewing.Lock()
			defer l.renewing.Unlock()
			l.renewalIDs()
			b.ReportAllocs()
			for b.Loop() {
				for range churn {
					l.unhold(held[0], marks[held[0]])
					delete(marks, held[0])
					held = held[1:]
					id := next()
					held = append(held, id)
					marks[id] = l.hold(id, false)
				}
				if len(l.renewalIDs()) != 10000 {
					b.Fatal("wrong count")
				}
			}
		})
	}
}
