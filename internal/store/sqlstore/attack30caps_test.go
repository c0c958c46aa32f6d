package sqlstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestPipelinedCapsTwoInstances (attack30, held29's pipeline): creators
// on two *DB over one Postgres database, as two gateway instances, race
// for a principal cap (3 each of 4 principals) and the total (7), in odd
// rounds while reviewers on both deny pending requests (each denial frees
// a place). After each round no principal has more than 3 pending
// requests and all of them no more than 7 (exactly 7 after a round without
// reviewers); each request that exists was created by a
// CreateRequest that returned nil and has exactly one "requested" event;
// each refusal is a CapError and left no row and no event.
func TestPipelinedCapsTwoInstances(t *testing.T) {
	cfg := postgresConfig(pgtest.Fresh(t))
	dbs := []*DB{openTest(t, cfg), openTest(t, cfg)}
	ctx := t.Context()
	const (
		principals = 4
		own        = 3
		total      = 7
		perRound   = 48
		rounds     = 4
	)
	var (
		mu      sync.Mutex
		created = map[approval.ID]bool{}
		refused = map[approval.ID]bool{}
	)
	totalCap := store.Cap{Scope: store.CapTotal, Limit: total, Name: "total"}
	next := 0
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range perRound {
			next++
			id, db := testID(next), dbs[i%2]
			r := pendingRequest(id)
			r.RequestedBy = fmt.Sprint("p", i%principals)
			ownCap := store.Cap{Scope: store.CapPrincipal, Key: r.RequestedBy, Limit: own, Name: "own"}
			wg.Go(func() {
				<-start
				err := db.CreateRequest(ctx, r, ownCap, totalCap)
				mu.Lock()
				defer mu.Unlock()
				var ce *store.CapError
				switch {
				case err == nil:
					created[id] = true
				case errors.As(err, &ce):
					refused[id] = true
				default:
					t.Errorf("CreateRequest(%s) = %v", id, err)
				}
			})
		}
		// In odd rounds reviewers deny what is pending meanwhile, on both
		// instances.
		for k := range 4 * (round % 2) {
			db := dbs[k%2]
			wg.Go(func() {
				<-start
				for range 3 {
					page, _, err := db.ListRequests(ctx, store.Filter{State: approval.StatePending, Limit: 2})
					if err != nil {
						t.Error(err)
						return
					}
					for _, p := range page {
						_, err := db.UpdateRequest(ctx, p.ID, "rev", func(cur *approval.Request) error {
							return cur.Review(approval.Reviewer{ID: "rev"}, approval.VerdictDeny, "", "", t0.Add(time.Minute))
						})
						if err != nil && !errors.Is(err, approval.ErrResolved) && !errors.Is(err, approval.ErrConflict) && !errors.Is(err, approval.ErrDuplicate) {
							t.Errorf("deny %s = %v", p.ID, err)
						}
					}
				}
			})
		}
		close(start)
		wg.Wait()
		all := 0
		for p := range principals {
			n, err := dbs[round%2].CountPending(ctx, fmt.Sprint("p", p))
			if err != nil {
				t.Fatal(err)
			}
			if n > own {
				t.Errorf("round %d: p%d has %d pending, cap %d", round, p, n, own)
			}
			all += n
		}
		if all > total || round%2 == 0 && all != total {
			// Without reviewers the 48 creators fill the total.
			t.Errorf("round %d: %d pending, total cap %d", round, all, total)
		}
	}
	requested := map[approval.ID]int{}
	for after := int64(0); ; {
		evs, err := dbs[0].Events(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Type == approval.EventRequested {
				requested[e.RequestID]++
			}
		}
		after = evs[len(evs)-1].Seq
	}
	for id := range created {
		if requested[id] != 1 {
			t.Errorf("created %s has %d requested events", id, requested[id])
		}
	}
	for id := range refused {
		if requested[id] != 0 {
			t.Errorf("refused %s has %d requested events", id, requested[id])
		}
		if _, err := dbs[1].GetRequest(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("refused %s: GetRequest = %v, want ErrNotFound", id, err)
		}
	}
	if len(requested) != len(created) {
		t.Errorf("%d requests have events, %d were created", len(requested), len(created))
	}
	t.Logf("%d created, %d refused over %d rounds", len(created), len(refused), rounds)
}
