package sqlstore

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestRenewLeasesKeepsRequestsCompact renews the leases of 500 held
// requests ten times on Postgres and checks that the requests table did
// not grow: with room in its pages (migration 13's fillfactor) a renewal
// is a heap-only update that rewrites each row on its own page, and the
// page's earlier versions are pruned in place. With full pages each
// renewal wrote every row again elsewhere (and a new entry in every
// index), so the table grew by its own size per renewal until autovacuum
// caught up. Since migration 14 a renewal writes the instance's lease row
// and no request after the first (instance leases), which this also keeps
// checking.
func TestRenewLeasesKeepsRequestsCompact(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	ctx := t.Context()
	const held = 500
	ids := make([]approval.ID, held)
	for i := range ids {
		r := pendingRequest(testID(i + 1))
		r.Arguments = fmt.Appendf(nil, `{"to":"acct-%d","memo":%q}`, i, fmt.Sprintf("%0600d", i))
		r.Renew("gw-a", t0.Add(time.Minute))
		if err := db.CreateRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	size := func() int64 {
		t.Helper()
		var n int64
		if err := db.sql.QueryRowContext(ctx, `SELECT pg_relation_size('requests')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	renew := func(k int) {
		t.Helper()
		got, err := db.RenewLeases(ctx, "gw-a", ids, t0.Add(time.Duration(k+2)*time.Minute))
		if err != nil || len(got) != held {
			t.Fatalf("renewal %d: renewed %d of %d, %v", k, len(got), held, err)
		}
	}
	renew(0)
	before := size()
	for k := 1; k <= 10; k++ {
		renew(k)
	}
	if after := size(); after > before*3/2 {
		t.Errorf("requests grew from %d to %d bytes over ten renewals of %d held requests: renewals are not heap-only updates", before, after, held)
	}
}
