package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"toolgate/internal/store"
)

// nextDueQuery reads when the sweeper next has work (store.DueTimes), one
// row, each column from an index: requests_state_expires for the pending
// and approved requests (the live ones), requests_undispatched for the
// consumed ones without an outcome, the ledger tables' expiry indexes.
const nextDueQuery = `SELECT
	(SELECT MIN(expires_at) FROM requests WHERE state = 'pending'),
	(SELECT MIN(decided_at + valid_for_ms) FROM requests WHERE state = 'approved' AND valid_for_ms > 0),
	(SELECT COUNT(*) FROM (SELECT 1 FROM requests
		WHERE state = 'consumed' AND dispatch_outcome = '' AND held_by <> '' LIMIT 1) AS c),
	(SELECT MIN(expires_at) FROM approval_results),
	(SELECT MIN(expires_at) FROM approval_tasks),
	(SELECT MIN(expires_at) FROM request_states)`

// NextDue tells when a sweeper next has work: see store.DueTimer.
func (db *DB) NextDue(ctx context.Context) (store.DueTimes, error) {
	var pending, approved, results, tasks, states sql.NullInt64
	var dispatching int
	if err := db.queryRow(ctx, nextDueQuery).Scan(&pending, &approved, &dispatching, &results, &tasks, &states); err != nil {
		return store.DueTimes{}, db.wrap("read the next due time", err)
	}
	return store.DueTimes{
		Requests:    earliest(pending, approved),
		Dispatching: dispatching > 0,
		Ledger:      earliest(results, tasks, states),
	}, nil
}

// earliest is the earliest of the non-NULL unix ms times, zero when all
// are NULL.
func earliest(ms ...sql.NullInt64) time.Time {
	var t time.Time
	for _, m := range ms {
		if m.Valid && (t.IsZero() || m.Int64 < t.UnixMilli()) {
			t = time.UnixMilli(m.Int64).UTC()
		}
	}
	return t
}
