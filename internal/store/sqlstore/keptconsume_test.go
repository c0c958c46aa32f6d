package sqlstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
)

// keptLease is the lease of the gates in the kept-consume tests.
const keptLease = 15 * time.Second

// manualClock is a gate's Options.Now that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// keptGate is a gate of instance name on db, on clock, with no Run: the
// test renews and sweeps by hand.
func keptGate(db *DB, name string, clock *manualClock) *gate.Gate {
	pol := &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Hour, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
	}
	return gate.New(db, pol, &gate.Options{Instance: name, Lease: keptLease, Now: clock.Now})
}

var keptCall = gate.Call{Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, Server: "fs", Tool: "write_file",
	ToolDigest: "sha256:d1", Arguments: []byte(`{"path":"/kept","content":"x"}`)}

// holdOn starts keptCall on g and returns its request's id (the only
// pending one, held by holder) and the admission's channel.
func holdOn(t *testing.T, ctx context.Context, g *gate.Gate, db *DB, holder string) (approval.ID, chan gate.Admission) {
	t.Helper()
	admitted := make(chan gate.Admission, 1)
	go func() { admitted <- g.Admit(ctx, keptCall) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rs, _, err := db.ListRequests(ctx, store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 && rs[0].HeldBy == holder {
			return rs[0].ID, admitted
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending request held by %s after 30 s (%d pending)", holder, len(rs))
		}
	}
}

func admission(t *testing.T, who string, ch chan gate.Admission) gate.Admission {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("%s's held call not answered within 30 s", who)
		return gate.Admission{}
	}
}

// consumedEvents returns how many consumed events of request id db's
// change feed holds (among its first 1,000 events).
func consumedEvents(t *testing.T, db *DB, id approval.ID) int {
	t.Helper()
	evs, err := db.Events(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.RequestID == id && ev.Type == approval.EventConsumed {
			n++
		}
	}
	return n
}

// TestConsumeAtTheHalfLeaseBoundary (lease45b): the consume of a request
// its process holds through the instance lease (marked) keeps that lease
// when exactly Lease/2 of it is left at the consume (the row stays
// marked, its effective lease the instance's), and renews it to a
// concrete now+Lease when a millisecond less is left: a dispatch starts
// with at least Lease/2 of lease. Both stores; the gate's clock is set by
// hand and the stores keep milliseconds, so the boundary is exact.
func TestConsumeAtTheHalfLeaseBoundary(t *testing.T) {
	for _, b := range backends {
		for _, tc := range []struct {
			name string
			left time.Duration
			keep bool
		}{
			{"exactly Lease/2 left", keptLease / 2, true},
			{"Lease/2 less 1ms left", keptLease/2 - time.Millisecond, false},
		} {
			t.Run(b.driver+"/"+tc.name, func(t *testing.T) {
				db := openTest(t, b.fresh(t))
				start := time.Now().Truncate(time.Second)
				clock := &manualClock{now: start}
				g := keptGate(db, "gw-a", clock)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				id, admitted := holdOn(t, ctx, g, db, "gw-a")
				consumeAt := start.Add(keptLease)
				mustRenew(t, db, "gw-a", []approval.ID{id}, consumeAt.Add(tc.left), id) // marked, the instance's lease consumeAt+left
				clock.set(consumeAt)
				if _, err := g.Review(t.Context(), id, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictApprove, "ok", ""); err != nil {
					t.Fatal(err)
				}
				a := admission(t, "gw-a", admitted)
				if !a.Allowed {
					t.Fatalf("held call: %+v, want allowed", a)
				}
				defer a.Finish(t.Context(), approval.OutcomeOK)
				raw := rawLease(t, db, id)
				h, lu := leaseOf(t, db, id)
				switch {
				case h != "gw-a":
					t.Errorf("consumed: held by %q, want gw-a", h)
				case tc.keep && (raw != leaseMarker || !lu.Equal(consumeAt.Add(tc.left))):
					t.Errorf("consumed with %v left: stored %d, effective %v; want the marker, effective %v (kept)", tc.left, raw, lu, consumeAt.Add(tc.left))
				case !tc.keep && raw != consumeAt.Add(keptLease).UnixMilli():
					t.Errorf("consumed with %v left: stored %d (effective %v), want %v (renewed to now+Lease)", tc.left, raw, lu, consumeAt.Add(keptLease))
				}
			})
		}
	}
}

// TestTakeOverBetweenDecisionAndConsume (lease45b): gw-a holds a call,
// its request marked for gw-a's instance lease; that lease lapses (gw-a's
// renewals stopped) and an identical re-send on gw-b takes the request
// over. The approval then arrives, through either gateway: whichever
// consumes it (the deciding gateway's held call, joined to the decision),
// exactly one held call is admitted, the request is consumed once, and its
// row names the admitted one's instance with at least Lease/2 of lease (a
// take-over at consume is never a kept lease: holdForDispatch). Both
// stores, two handles on one store.
func TestTakeOverBetweenDecisionAndConsume(t *testing.T) {
	for _, b := range backends {
		for _, decider := range []string{"gw-a", "gw-b"} {
			t.Run(b.driver+"/decided on "+decider, func(t *testing.T) {
				cfg := b.fresh(t)
				dbA, dbB := openTest(t, cfg), openTest(t, cfg)
				start := time.Now().Truncate(time.Second)
				clock := &manualClock{now: start}
				gA, gB := keptGate(dbA, "gw-a", clock), keptGate(dbB, "gw-b", clock)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				id, admittedA := holdOn(t, ctx, gA, dbA, "gw-a")
				mustRenew(t, dbA, "gw-a", []approval.ID{id}, start.Add(keptLease), id) // marked
				clock.set(start.Add(keptLease + time.Second))                          // gw-a's instance lease lapsed
				_, admittedB := holdOn(t, ctx, gB, dbB, "gw-b")                        // the re-send takes it over
				if raw := rawLease(t, dbB, id); raw == leaseMarker {
					t.Fatalf("taken over: stored lease %d, want a concrete one", raw)
				}
				g, other := gA, gB
				if decider == "gw-b" {
					g, other = gB, gA
				}
				if _, err := g.Review(t.Context(), id, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictApprove, "ok", ""); err != nil {
					t.Fatal(err)
				}
				other.Wake(id) // as its watch would
				a, bb := admission(t, "gw-a", admittedA), admission(t, "gw-b", admittedB)
				if a.Allowed == bb.Allowed {
					t.Fatalf("gw-a admitted %v, gw-b admitted %v: want exactly one (gw-a: %s; gw-b: %s)", a.Allowed, bb.Allowed, a.Message, bb.Message)
				}
				winner, adm, loser := "gw-a", a, bb
				if bb.Allowed {
					winner, adm, loser = "gw-b", bb, a
				}
				t.Logf("admitted on %s; the other answered %q", winner, loser.Message)
				h, lu := leaseOf(t, dbA, id)
				if now := clock.Now(); h != winner || lu.Sub(now) < keptLease/2 {
					t.Errorf("consumed: held by %q until %v (%v left), want %s with at least Lease/2", h, lu, lu.Sub(now), winner)
				}
				adm.Finish(t.Context(), approval.OutcomeOK)
				consumed := consumedEvents(t, dbA, id)
				r, err := dbA.GetRequest(t.Context(), id)
				if err != nil || consumed != 1 || r.DispatchOutcome != approval.OutcomeOK {
					t.Errorf("consumed %d times, outcome %q (%v); want once, ok", consumed, r.DispatchOutcome, err)
				}
			})
		}
	}
}
