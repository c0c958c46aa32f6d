package sqlstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"toolgate/internal/approval"
)

// A quiet renewal: RenewLeases of the same ids as the holder's last
// committed renewal, while nothing happened to them, counts the rows
// marked for the holder instead of reading them (twice on Postgres):
// 10,000 held calls idle had every renewal stream 20,000 rows from
// Postgres into toolgate, every Lease/3, the idle window's only
// statements that grew with N (docs/performance.md, "pgidle25").
//
// Why a count is enough (one renewer per holder, as the gate's instance
// is a random id per process):
//
//   - Only a renewal of holder marks a request for holder (leaseMarker
//     with held_by = holder): encodeRequest refuses the marker, and
//     planStore keeps it only while held_by stays (requests.go). Every
//     other write removes a row from the marked set (a take-over, a
//     release, a consume that renewed the lease, a settlement: a concrete
//     lease; Prune: the row) or, written by an older binary, settles it
//     (the marker kept, the row no longer live). The set marked for
//     holder only shrinks between its renewals.
//   - After a committed renewal of ids, the set marked for holder is a
//     subset of ids (RenewLeases unmarks every marked row it did not
//     renew: steps 1–3).
//   - So when ids equal that renewal's ids (renewMemo), the rows marked
//     for holder now are a subset of ids, and their count of live ones
//     equal to the number of distinct ids means they are ids, every one
//     marked and live: the full renewal would unmark nothing, mark
//     nothing and answer ids.
//
// The count follows the write of the instance row in the same
// transaction (the full renewal's second read follows its commit,
// renewedAfter, and sees no less): on Postgres a
// take-over that read the instance's old lease under its share lock
// (lockedRequest) committed before the write and is counted, one that
// comes later waits for this renewal and sees the new lease; SQLite's
// IMMEDIATE transaction lets nothing in between. When the count falls
// short the quiet transaction is rolled back (the instance row
// unwritten) and the full renewal runs: on Postgres it locks request rows
// before the instance row, and a quiet renewal holding the instance row
// must not then wait for a request row a take-over holds (a deadlock).

// quietCountQuery counts the live requests marked for a holder, from the
// index requests_instance_held (heldRowsQuery's rows, not sent).
const quietCountQuery = `SELECT COUNT(*) FROM requests
	WHERE held_by = ? AND lease_until = 253402300799999 AND ` + liveLease

// errNotQuiet rolls back a quiet renewal whose count fell short.
var errNotQuiet = errors.New("renew leases: marked requests changed")

// renewMemo remembers, per holder, the sorted ids of its last committed
// renewal (RenewLeases' argument, repeats included), for the quiet
// renewal. A renewal that fails forgets them: a commit whose answer was
// lost may have marked other ids. The ids' strings are shared with the
// caller's; the slice is a copy, made when the ids changed (one per
// renewal while calls come and go, none while they wait).
type renewMemo struct {
	mu  sync.Mutex
	ids map[string][]approval.ID // guarded by mu
}

// same reports whether sorted are holder's last committed renewal's ids.
func (m *renewMemo) same(holder string, sorted []approval.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.ids[holder]
	return ok && len(sorted) > 0 && slices.Equal(last, sorted)
}

// commit records sorted as holder's last committed renewal's ids, or
// forgets holder's when err is not nil or sorted is empty (nothing to
// keep: the next renewal naming ids marks them). Ids equal to the ones
// kept are not copied again.
func (m *renewMemo) commit(holder string, sorted []approval.ID, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || len(sorted) == 0 {
		delete(m.ids, holder)
		return
	}
	if last, ok := m.ids[holder]; ok && slices.Equal(last, sorted) {
		return
	}
	if m.ids == nil {
		m.ids = map[string][]approval.ID{}
	}
	m.ids[holder] = slices.Clone(sorted)
}

// distinct is the number of distinct ids in sorted.
func distinct(sorted []approval.ID) int {
	n := 0
	for i, id := range sorted {
		if i == 0 || sorted[i-1] != id {
			n++
		}
	}
	return n
}

// renewQuiet runs the quiet renewal of sorted (holder's last committed
// renewal's ids) to until, and reports whether it renewed them all; false
// with a nil error means it wrote nothing and the full renewal must run.
func (db *DB) renewQuiet(ctx context.Context, holder string, sorted []approval.ID, until time.Time) (bool, error) {
	want := int64(distinct(sorted))
	err := db.inLeaseTx(ctx, func(t *tx) error {
		if _, err := t.exec(ctx, upsertInstanceLease, holder, until.UnixMilli()); err != nil {
			return err
		}
		var n int64
		if err := t.queryRow(ctx, quietCountQuery, holder).Scan(&n); err != nil {
			return err
		}
		if n != want {
			return errNotQuiet
		}
		return nil
	})
	if errors.Is(err, errNotQuiet) {
		return false, nil
	}
	return err == nil, err
}
