package sqlstore

import (
	"strings"
	"testing"
	"time"
)

// TestRenewalReadIsCovered: SQLite reads a renewal's held requests
// (heldRowsQuery, every approvals.lease / 3 over every held request) from
// the index alone. Through 0014's index of held_by it looked each row up
// in the table, with its arguments: at 10,000 held calls most of the
// renewal's CPU, ≈ 2 % of a core while idle (docs/performance.md, held22).
func TestRenewalReadIsCovered(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	ids := createHeld(t, db, "gw-a", t0.Add(time.Minute), 1, 2, 3)
	if _, err := db.RenewLeases(t.Context(), "gw-a", ids, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := queryPlan(t, db, heldRowsQuery, "gw-a"); !strings.Contains(got, "USING COVERING INDEX requests_instance_held") {
		t.Errorf("the renewal's read is planned as %q, want it from the covering index requests_instance_held", got)
	}
}

// queryPlan returns SQLite's EXPLAIN QUERY PLAN of q with args in db: the
// detail of each step, joined by "; ".
func queryPlan(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.sql.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}
