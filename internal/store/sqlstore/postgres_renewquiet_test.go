package sqlstore

import (
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/pgtest"
)

// TestRenewalCountsAfterTakeOverInFlight: a renewal that names an id more
// than the last one (so it reads the marked rows, not only counts them)
// reads a request as held, then waits on its instance row for a
// take-over of that request that read the lapsed lease before. Once the
// take-over commits, the renewal's count of the rows still marked falls
// short of those it read, and it reads them again: the request taken over
// is not reported renewed. Trusting the first read, the old holder would
// go on believing it holds the request the new holder holds.
func TestRenewalCountsAfterTakeOverInFlight(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
	mustRenew(t, db, "gw-a", ids[:2], t0.Add(5*time.Minute), ids[:2]...)
	if got := renewDuringTakeOver(t, db, ids); len(got) != 2 || got[0] != ids[1] || got[1] != ids[2] {
		t.Errorf("renewal after the take-over renewed %v, want [%s %s]", got, ids[1], ids[2])
	}
	if raw := rawLease(t, db, ids[2]); raw != leaseMarker {
		t.Errorf("the id named anew: stored lease_until %d, want the marker", raw)
	}
}
