package sqlstore

import (
	"strings"
	"testing"
)

// TestDueReadsOnlyCandidates checks that the sweeper's Due query finds the
// consumed requests without a dispatch outcome through their partial index
// (requests_undispatched), not by reading every consumed request the store
// keeps: before migration 13 its third branch read requests_state_expires
// for state = 'consumed' and then each row, so the query, run every sweep
// interval, grew with retention.requests' history. The store holds 2,000
// consumed requests with an outcome and two without; the plan of the query
// (EXPLAIN, with statistics gathered) must name the partial index.
func TestDueReadsOnlyCandidates(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			if _, err := db.sql.ExecContext(ctx, db.d.rebind(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2002)
				INSERT INTO requests (id, state, server, tool, arguments, arguments_hash, display_warnings, tool_digest, rule,
					mode, requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers,
					valid_for_ms, reviews, decided_by, decided_at, reason, consumed_at, dispatch_outcome, held_by, lease_until)
				SELECT 'r-' || i, 'consumed', 's', 't', '{}', 'sha256:00', '[]', '', 'r', 'hold', 'agent', '', '', i, i + 300000, 1,
					'[]', 0, '[]', 'alice', i + 1000, '', i + 2000, CASE WHEN i > 2000 THEN '' ELSE 'ok' END, 'instance-a', i + 17000
				FROM c`)); err != nil {
				t.Fatalf("insert consumed requests: %v", err)
			}
			explain := "EXPLAIN QUERY PLAN "
			if b.driver == DriverPostgres {
				if _, err := db.sql.ExecContext(ctx, `ANALYZE requests`); err != nil {
					t.Fatal(err)
				}
				explain = "EXPLAIN "
			}
			rows, err := db.sql.QueryContext(ctx, db.d.rebind(explain+dueQuery), int64(1e12), int64(1e12), int64(1e12), 100)
			if err != nil {
				t.Fatalf("explain Due: %v", err)
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				t.Fatal(err)
			}
			var plan strings.Builder
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				for _, v := range vals { // SQLite: id, parent, notused, detail; Postgres: one text column
					switch v := v.(type) {
					case string:
						plan.WriteString(v + "\n")
					case []byte:
						plan.WriteString(string(v) + "\n")
					}
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan.String(), "requests_undispatched") {
				t.Errorf("the Due query does not use requests_undispatched; plan:\n%s", plan.String())
			}
			ids, err := db.Due(ctx, t0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, id := range ids {
				got = append(got, string(id))
			}
			if strings.Join(got, ",") != "r-2001,r-2002" {
				t.Errorf("Due = %v, want [r-2001 r-2002] (the consumed requests without an outcome)", got)
			}
		})
	}
}
