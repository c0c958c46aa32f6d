package sqlstore

import (
	"fmt"
	"testing"
)

// TestIDListsFindTheirRowsByID: the statements that name requests by
// primary key beside a condition an index covers read those rows by
// their key on Postgres, whatever the statistics say of the condition:
// RenewLeases' mark of the ids a holder holds (live: requests_state_expires
// and requests_undispatched) and its unmark (marked for the holder:
// requests_instance_held), Prune's openAmong (open: the same two indexes),
// and pgLockLease (marked: requests_instance_held, whose INCLUDE holds
// id). Statistics gathered while every request was settled and no
// instance held any (a quiet store before a burst of held calls) make
// live and marked requests look rare, and the planner read every one of
// them for each list of ids (psql EXPLAIN on 2e5a812). The store holds
// 20,000 settled requests, analysed, then 1,000 pending ones marked for
// instance-a and 600 held by it on a concrete lease; the plans, custom
// and generic, of lists of one and of a renewal's 500 ids must look the
// rows up by id (assertFindsByID).
func TestIDListsFindTheirRowsByID(t *testing.T) {
	db := openTest(t, backends[1].fresh(t)) // Postgres
	ctx := t.Context()
	for _, q := range []string{
		requestsSQL(1, 20000, "consumed", "ok", "instance-old", "i"),
		`INSERT INTO instance_leases (instance, lease_until) VALUES ('instance-a', 9999999999999)`,
		`ANALYZE requests`,
		requestsSQL(20001, 21000, "pending", "", "instance-a", "253402300799999"),
		requestsSQL(21001, 21600, "pending", "", "instance-a", "5000"),
	} {
		if _, err := db.sql.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ids := func(from, n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("r-%05d", from+i)
		}
		return out
	}
	for _, n := range []int{1, renewBatch} {
		marks, args := inList(ids(21001, n), "instance-a")
		assertFindsByID(t, db, "requests", fmt.Sprintf("renew: mark %d", n), dollarPlaceholders(renewMarkQuery(marks)), args...)
		marks, args = inList(ids(20001, n), "instance-a", "instance-a")
		assertFindsByID(t, db, "requests", fmt.Sprintf("renew: unmark %d", n), dollarPlaceholders(renewUnmarkQuery(marks)), args...)
		marks, args = inList(ids(20801, n))
		assertFindsByID(t, db, "requests", fmt.Sprintf("prune: openAmong %d", n), dollarPlaceholders(openAmongQuery(marks)), args...)
	}
	assertFindsByID(t, db, "requests", "pgLockLease", pgLockLease, "r-20500")
}

// requestsSQL inserts requests r-<from> to r-<to> (five digits) in state
// with dispatch outcome, held by heldBy with lease_until lease (an SQL
// expression of i, the number).
func requestsSQL(from, to int, state, outcome, heldBy, lease string) string {
	return fmt.Sprintf(`INSERT INTO requests (id, state, server, tool, arguments, arguments_hash,
			display_warnings, tool_digest, rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at,
			required_approvals, approvers, valid_for_ms, reviews, decided_by, decided_at, reason, consumed_at,
			dispatch_outcome, held_by, lease_until)
		SELECT 'r-' || lpad(i::text, 5, '0'), '%s', 's', 't', '{}', 'sha256:' || i, '[]', '', 'r', 'hold', 'agent', '', '',
			i, i + 300000, 1, '[]', 0, '[]', '', NULL, '', NULL, '%s', '%s', %s
		FROM generate_series(%d, %d) AS i`, state, outcome, heldBy, lease, from, to)
}
