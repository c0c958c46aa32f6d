package gate

import (
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestConsumeKeepsAHeldLease: a consume by the process that holds the
// request with at least Lease/2 of lease left keeps that lease (on
// sqlstore the row keeps taking it from the instance's row, so the next
// renewal writes nothing on it: holdForDispatch); one with less left, one
// held by another instance (a take-over at consume) and one held by
// nobody get a lease of Lease from now, held here. The same holds for the
// consume's read-back (consumed with its token).
func TestConsumeKeepsAHeldLease(t *testing.T) {
	f := newFixture(t, time.Minute, nil)
	g := f.gate
	c := writeCall("/keep")
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	lease := g.opts.Lease
	for _, tc := range []struct {
		name   string
		holder string
		left   time.Duration
		keep   bool
	}{
		{"held here, 2/3 left", g.instance, lease * 2 / 3, true},
		{"held here, a full lease left", g.instance, lease, true},
		{"held here, just over 1/2 left", g.instance, lease/2 + time.Second, true},
		{"held here, 1/3 left", g.instance, lease / 3, false},
		{"held here, lapsed", g.instance, -time.Second, false},
		{"held by another instance", "gw-other", lease, false},
		{"held by nobody", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, readBack := range []bool{false, true} {
				k := g.consumeCheck(c)
				now := g.now()
				r := &approval.Request{ID: "r1", State: approval.StateApproved, RequestedBy: agent.ID, Server: c.Server, Tool: c.Tool,
					ArgumentsHash: hash, ToolDigest: c.ToolDigest, ExpiresAt: now.Add(time.Hour),
					Reviews: []approval.Review{{By: "alice", Verdict: approval.VerdictApprove}}} // as Review leaves it
				if readBack {
					// the consume committed by an earlier attempt: consumed
					// with k's token
					r.State, r.ConsumeToken, r.ConsumedAt = approval.StateConsumed, k.token, now
				}
				if tc.holder != "" {
					r.Renew(tc.holder, now.Add(tc.left))
				}
				before := r.LeaseUntil
				if err := k.apply(r, store.TxRead{}); err != nil || r.State != approval.StateConsumed {
					t.Fatalf("read back %v: consume: %v, %s; want consumed", readBack, err, r.State)
				}
				after := g.now()
				switch {
				case r.HeldBy != g.instance:
					t.Errorf("read back %v: held by %q, want %q", readBack, r.HeldBy, g.instance)
				case tc.keep && !r.LeaseUntil.Equal(before):
					t.Errorf("read back %v: lease until %v, want the held lease kept (%v)", readBack, r.LeaseUntil, before)
				case !tc.keep && (r.LeaseUntil.Before(now.Add(lease)) || r.LeaseUntil.After(after.Add(lease))):
					t.Errorf("read back %v: lease until %v, want renewed to Lease (%v) from now (%v)", readBack, r.LeaseUntil, lease, now)
				}
			}
		})
	}
}
