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

// TestLongDispatchAfterKeptConsume (lease45b): instance A holds a call,
// its request marked for A's instance lease; a decision on A consumes it
// and A keeps the lease (gate.holdForDispatch: the row stays marked). The
// tool then runs for three leases while A's and B's gates both run their
// renewals and sweepers on one store (two handles; on SQLite one file):
// throughout, the request stays consumed, held by A, its effective lease
// ahead of now; B's identical re-send neither takes it over nor runs it;
// and A's outcome is the one recorded, not B's sweeper's "unknown". With
// A's renewal dropping the dispatch id (or not renewing the instance row)
// B's sweeper records "unknown" within a lease and the test fails.
func TestLongDispatchAfterKeptConsume(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			dbA, dbB := openTest(t, cfg), openTest(t, cfg)
			const lease = 3 * time.Second // renewed every second: a renewal stalled up to 2 s on a loaded CI machine (-race, both cores busy) still keeps it live
			pol := &policy.Policy{
				Default:  policy.Approve,
				Approval: policy.Approval{Timeout: time.Hour, Mode: "hold", Approvals: 1, ValidFor: 10 * time.Minute},
			}
			opts := func(name string) *gate.Options {
				return &gate.Options{Instance: name, Lease: lease, SweepInterval: 20 * time.Millisecond}
			}
			gA, gB := gate.New(dbA, pol, opts("gw-a")), gate.New(dbB, pol, opts("gw-b"))
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { _ = gA.Run(ctx) })
			wg.Go(func() { _ = gB.Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })

			call := gate.Call{Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, Server: "fs", Tool: "write_file",
				ToolDigest: "sha256:d1", Arguments: []byte(`{"path":"/long","content":"x"}`)}
			admitted := make(chan gate.Admission, 1)
			go func() { admitted <- gA.Admit(ctx, call) }()

			var id approval.ID
			for deadline := time.Now().Add(30 * time.Second); ; {
				rs, _, err := dbB.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) == 1 && rawLease(t, dbA, rs[0].ID) == leaseMarker {
					id = rs[0].ID // held by A and marked by A's renewal
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no pending request marked for gw-a after 30 s (%d pending)", len(rs))
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := gA.Review(t.Context(), id, approval.Principal{ID: "bob", Kind: "human"}, approval.VerdictApprove, "ok", ""); err != nil {
				t.Fatal(err)
			}
			a := admission(t, "A (approved)", admitted)
			if !a.Allowed || a.ApprovalID != id {
				t.Fatalf("A's held call: %+v, want allowed through %s", a, id)
			}
			if raw := rawLease(t, dbA, id); raw != leaseMarker {
				t.Errorf("after the consume: stored lease_until %d, want the marker (the lease kept)", raw)
			}

			// The tool runs for three leases.
			bCall := make(chan gate.Admission, 1)
			go func() {
				bctx, bcancel := context.WithTimeout(ctx, lease)
				defer bcancel()
				bCall <- gB.Admit(bctx, call) // an identical re-send on B while A runs it
			}()
			end := time.Now().Add(3 * lease)
			for time.Now().Before(end) {
				r, err := dbB.GetRequest(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if now := time.Now(); r.State != approval.StateConsumed || r.DispatchOutcome != "" || r.HeldBy != "gw-a" || !r.LeaseUntil.After(now) {
					t.Fatalf("%v into the dispatch: %s, outcome %q, held by %q until %v (now %v); want consumed, no outcome, held by gw-a with a live lease",
						3*lease-end.Sub(now), r.State, r.DispatchOutcome, r.HeldBy, r.LeaseUntil, now)
				}
				time.Sleep(lease / 10)
			}
			if ab := <-bCall; ab.Allowed {
				t.Errorf("B's identical re-send was admitted while A ran the call: %+v", ab)
			}
			a.Finish(t.Context(), approval.OutcomeOK)
			r, err := dbB.GetRequest(t.Context(), id)
			if err != nil || r.State != approval.StateConsumed || r.DispatchOutcome != approval.OutcomeOK {
				t.Fatalf("after the dispatch: %s %q (%v), want consumed, ok", r.State, r.DispatchOutcome, err)
			}
		})
	}
}
