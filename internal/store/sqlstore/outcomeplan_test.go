package sqlstore

import (
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestOutcomeFindsItsRowByID: RecordOutcome's statement on Postgres
// (pgOutcome, pgOutcomeLedger) reads its request by id, not by reading
// every request in dispatch. Its UPDATE repeats the condition of
// requests_undispatched (consumed, dispatch_outcome empty),
// and with statistics gathered while the requests were pending, as during
// an approve-all of held calls, the planner took that index, estimated at
// one entry; keyed (state, dispatch_outcome) (migration 13) it then
// filtered every entry on id, keyed by id (migration 23) its index
// condition is the id. The store holds 2,000 pending requests, analysed,
// then 300 of them consumed without an outcome; the plans, custom and
// generic, of both statements must look their row up by id and filter on
// nothing else than the condition.
func TestOutcomeFindsItsRowByID(t *testing.T) {
	db := openTest(t, backends[1].fresh(t)) // Postgres
	ctx := t.Context()
	if _, err := db.sql.ExecContext(ctx, pendingRequestsSQL); err != nil {
		t.Fatalf("insert pending requests: %v", err)
	}
	if _, err := db.sql.ExecContext(ctx, `ANALYZE requests`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.sql.ExecContext(ctx, `UPDATE requests SET state = 'consumed', decided_by = 'alice', decided_at = 1,
		consumed_at = 2, lease_until = 3 WHERE id <= 'r-00300'`); err != nil {
		t.Fatalf("consume requests: %v", err)
	}
	args := []any{"r-00150", "ok", "dispatched", "consumed", "alice", int64(4)}
	ledger := append(append([]any{}, args...), "{}", nil, 0, int64(2), int64(4), int64(5))
	assertFindsByID(t, db, "requests", "pgOutcome", pgOutcome, args...)
	assertFindsByID(t, db, "requests", "pgOutcomeLedger", pgOutcomeLedger, ledger...)
}

// assertFindsByID fails t unless q's plans on Postgres, custom and
// generic (plan_cache_mode auto and force_generic_plan), look its row of
// table up by the id in an index condition (an IN list: id = ANY), never
// filter an index's entries or the table's rows on id (alone or beside
// other conditions), and read table by no sequential scan.
func assertFindsByID(t *testing.T, db *DB, table, name, q string, args ...any) {
	t.Helper()
	for _, mode := range []string{"auto", "force_generic_plan"} {
		plan := idLists.ReplaceAllString(outcomePlan(t, db, mode, q, args...), "$1…$2")
		t.Logf("%s, plan_cache_mode %s: %s", name, mode, plan)
		if !strings.Contains(plan, "Index Cond: (id = ") || filtersOnID(plan) ||
			strings.Contains(plan, "Seq Scan on "+table) {
			t.Errorf("%s (plan_cache_mode %s) does not look its %s row up by id: %s", name, mode, table, plan)
		}
	}
}

// idLists matches the body of an IN list in a plan (an array of values
// or of parameters), which assertFindsByID shortens in its messages.
var idLists = regexp.MustCompile(`(ANY \('\{|ANY \(ARRAY\[)[^}\]]*(\}'|\])`)

// filtersOnID reports whether a plan (explainPlan's lines joined by "; ")
// has a Filter line that compares id: the rows were found by something
// else and then checked against the id.
func filtersOnID(plan string) bool {
	for line := range strings.SplitSeq(plan, "; ") {
		if strings.HasPrefix(line, "Filter: ") && strings.Contains(line, "(id = ") {
			return true
		}
	}
	return false
}

// pendingRequestsSQL inserts 2,000 pending requests, r-00001 to r-02000,
// held by instance-a on its instance's lease (leaseMarker).
const pendingRequestsSQL = `INSERT INTO requests (id, state, server, tool, arguments, arguments_hash,
			display_warnings, tool_digest, rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at,
			required_approvals, approvers, valid_for_ms, reviews, decided_by, decided_at, reason, consumed_at,
			dispatch_outcome, held_by, lease_until)
		SELECT 'r-' || lpad(i::text, 5, '0'), 'pending', 's', 't', '{}', 'sha256:' || i, '[]', '', 'r', 'hold', 'agent', '', '',
			i, i + 300000, 1, '[]', 0, '[]', '', NULL, '', NULL, '', 'instance-a', 253402300799999
		FROM generate_series(1, 2000) AS i`

// outcomePlan is the plan (EXPLAIN, lines joined by "; ") of q with args
// under plan_cache_mode mode, in a transaction rolled back after. q is
// prepared (PREPARE, its parameters' types inferred) and its plan is that
// of EXECUTE with args as literals: an EXPLAIN sent with parameters plans
// its query with their values whatever plan_cache_mode says, so
// force_generic_plan showed the custom plan; through a prepared statement
// it shows the generic one (Postgres 15 has no EXPLAIN (GENERIC_PLAN)).
// The prepared statement's name is random: PREPARE outlives the rollback
// on the pool's connection.
func outcomePlan(t *testing.T, db *DB, mode, q string, args ...any) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "plan_" + hex.EncodeToString(b[:])
	lits := make([]string, len(args))
	for i, a := range args {
		if v, ok := a.(driver.Valuer); ok {
			var err error
			if a, err = v.Value(); err != nil {
				t.Fatal(err)
			}
		}
		switch a := a.(type) {
		case nil:
			lits[i] = "NULL"
		case string:
			lits[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		default:
			lits[i] = fmt.Sprintf("'%v'", a)
		}
	}
	exec := `EXECUTE ` + name
	if len(lits) > 0 {
		exec += `(` + strings.Join(lits, ", ") + `)`
	}
	return explainPlan(t, db, []string{`SET LOCAL plan_cache_mode = ` + mode, `PREPARE ` + name + ` AS ` + q}, exec)
}
