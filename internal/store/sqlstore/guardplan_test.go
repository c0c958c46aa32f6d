package sqlstore

import (
	"database/sql"
	"testing"
)

// TestGuardedWritesFindTheirRowByID: every write that names its row by
// primary key and guards it on an indexed column (a request's state, a
// delivery's state) reads that row by its key on Postgres, whatever the
// statistics say of the guarded value. Gathered while every request was
// pending (an approve-all of held calls) or every delivery delivered,
// they make "approved", "consumed" or a pending delivery look rare, and
// the planner took requests_state_expires or deliveries_due on the guard
// and filtered every entry in that state on id (psql EXPLAIN on d2e426e).
// The tables hold 2,000 rows, analysed, then 300 of them moved to each
// guarded state; the plans, custom and generic, must look the row up by
// id (assertFindsByID).
func TestGuardedWritesFindTheirRowByID(t *testing.T) {
	db := openTest(t, backends[1].fresh(t)) // Postgres
	ctx := t.Context()
	for _, q := range []string{pendingRequestsSQL,
		`INSERT INTO deliveries (event_id, event_seq, channel, request_id, event_type, event_state, actor, event_at,
			state, attempts, next_at, lease_owner, lease_until, done_at, last_error)
		SELECT 'e-' || i, i, 'slack', 'r-' || lpad(i::text, 5, '0'), 'created', 'pending', 'agent', i,
			'delivered', 1, i, '', NULL, i, ''
		FROM generate_series(1, 2000) AS i`,
		`ANALYZE requests`,
		`ANALYZE deliveries`,
		`UPDATE requests SET state = 'approved', decided_by = 'alice', decided_at = 1 WHERE id <= 'r-00300'`,
		`UPDATE requests SET state = 'consumed', decided_by = 'alice', decided_at = 1, consumed_at = 2
			WHERE id > 'r-00300' AND id <= 'r-00600'`,
		`UPDATE deliveries SET state = 'pending', done_at = NULL, lease_owner = 'instance-a', lease_until = 5
			WHERE event_seq <= 300`,
	} {
		if _, err := db.sql.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// The general write (planStore, pgGuardedWrite): the consume of an
	// approved request, and an outcome recorded on a consumed one (the
	// sweeper's "unknown" when the pipelined outcome does not apply).
	enc, err := encodeRequest(pendingRequest(testID(1)))
	if err != nil {
		t.Fatal(err)
	}
	approved := enc
	approved.id, approved.state = "r-00150", "approved"
	consumed := approved
	consumed.state, consumed.consumedAt = "consumed", sql.NullInt64{Int64: 2, Valid: true}
	outcome := consumed
	outcome.id = "r-00450"
	unknown := outcome
	unknown.dispatchOutcome = "unknown"
	for _, w := range []struct {
		name     string
		old, cur requestRow
	}{{"consume (approved)", approved, consumed}, {"outcome (consumed)", outcome, unknown}} {
		q, args := changedColumns(&w.old, &w.cur)
		assertFindsByID(t, db, "requests", "guarded write: "+w.name, pgGuardedUpdate(dollarPlaceholders(q)),
			append(args, w.old.id, w.old.state)...)
	}

	// The deliveries' claim, renewal and finish (ClaimDeliveries,
	// RenewDelivery, FinishDelivery).
	assertFindsByID(t, db, "deliveries", "claim delivery", dollarPlaceholders(claimDelivery),
		"instance-b", int64(10), int64(150), int64(6))
	assertFindsByID(t, db, "deliveries", "renew delivery", dollarPlaceholders(renewDelivery),
		int64(20), int64(150), "instance-a")
	assertFindsByID(t, db, "deliveries", "finish delivery", dollarPlaceholders(finishDelivery+" FOR UPDATE"),
		int64(150), "instance-a")
}
