package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"toolgate/internal/approval"
)

// renewBatch is how many ids one RenewLeases statement names.
const renewBatch = 500

// liveLease is the condition of a request that still needs a holder:
// pending, approved, or consumed without a dispatch outcome.
const liveLease = `(state IN ('pending', 'approved') OR (state = 'consumed' AND dispatch_outcome = ''))`

// heldRowsQuery is RenewLeases' first read: the requests marked for a
// holder, each with whether it still needs one. The index
// requests_instance_held covers it (migration 0018): no table look-up per
// held request.
const heldRowsQuery = `SELECT id, CASE WHEN ` + liveLease + ` THEN 1 ELSE 0 END FROM requests
	WHERE held_by = ? AND lease_until = 253402300799999`

// RenewLeases extends the leases holder holds on ids to until and returns
// the ids it renewed, in the order of ids (ids itself when it renewed
// every one): see store.Store.RenewLeases. It
// writes one row per renewal, holder's instance lease (instance_leases,
// migration 14), not one per request: a request holder holds takes its
// effective lease from that row while its lease_until is leaseMarker. In
// one transaction it
//
//  1. reads the requests marked for holder (index requests_instance_held,
//     which holds only marked rows);
//  2. gives those no longer needing a holder (in one UPDATE of them all,
//     when there is any: a settling write gives its row a concrete lease
//     itself, planStore and RecordOutcome, so these are rows an older
//     binary settled), and those not in ids, a concrete lease again:
//     the instance's lease before this renewal, so they lapse when they
//     would have lapsed had they been renewed per request (0, lapsed,
//     when the instance has no row);
//  3. marks the requests of ids holder holds with a concrete lease (newly
//     held, taken over, or consumed since the last renewal: each is
//     written once, not at every renewal), and those only;
//  4. sets the instance's lease to until; and
//  5. on Postgres, after the commit (renewedAfter), counts the live
//     requests still marked for holder, and reads again which of ids
//     they are only when the count falls short of those steps 1–3 found
//     held (a take-over or a settlement since step 1; the set only
//     shrinks, renewquiet.go). This follows the instance row's lock
//     (step 4) and the commit, so a take-over that read the old lease
//     under its share lock (lockedRequest) committed before it and is
//     seen here, and a take-over that comes later waits for this renewal
//     and sees the new lease: two instances never both believe they hold
//     a request. The instance row is held exclusively only from the
//     upsert to the commit. SQLite's IMMEDIATE transaction lets nothing
//     in between, so steps 2 and 3 already answer.
//
// When ids are those of holder's last committed renewal, a quiet renewal
// runs first (renewQuiet): it writes the instance row and counts the live
// rows marked for holder, and answers ids when they are all there;
// otherwise it writes nothing and the steps above run. Idle, a renewal of
// N held requests then reads no row.
//
// The reads stream: a row is looked up in the sorted ids and dropped, so
// a renewal of N held requests keeps one flag per id and the ids it
// renewed, not the N rows, an id set and the rows read again; the rows
// that no longer need a holder are not kept either, but unmarked by one
// UPDATE after the read (heldpeak3 found a renewal of 10,000 ids in
// flight at the burst's end; docs/performance.md, "heldpeak4").
//
// Steps 2 and 3 lock request rows before step 4 locks the instance row,
// the order lockedRequest takes them in, so they cannot deadlock. On
// Postgres it runs on the connection reserved for it (LeaseConns), not in
// the main pool.
func (db *DB) RenewLeases(ctx context.Context, holder string, ids []approval.ID, until time.Time) ([]approval.ID, error) {
	if holder == "" {
		return nil, errors.New("renew leases: empty holder")
	}
	sorted := ids
	if !slices.IsSorted(ids) {
		sorted = slices.Sorted(slices.Values(ids))
	}
	if db.renewed.same(holder, sorted) {
		// The same ids as the last renewal: count, do not read (renewquiet.go).
		ok, err := db.renewQuiet(ctx, holder, sorted, until)
		if err != nil {
			db.renewed.commit(holder, sorted, err)
			return nil, db.wrap("renew leases", err)
		}
		if ok {
			return ids, nil
		}
	}
	held := make([]bool, len(sorted)) // held[i]: holder holds sorted[i]
	var raw sql.RawBytes              // each row's id, in one buffer
	var live int64                    // heldRowsQuery's flag, scanned in place: one variable, not one per row
	hold := func(rows *sql.Rows) error {
		if err := rows.Scan(&raw); err != nil {
			return err
		}
		if i, ok := searchID(sorted, raw); ok {
			held[i] = true
		}
		return nil
	}
	recount := false // Postgres, ids named: step 5 runs after the commit
	err := db.inLeaseTx(ctx, func(t *tx) error {
		clear(held)
		recount = false
		var (
			settled bool  // a marked row no longer needs a holder
			unmark  []any // live, marked, not in ids: rare (a lease dropped while its request still needs one)
		)
		rows, err := t.query(ctx, heldRowsQuery, holder)
		err = eachRow(rows, err, func(rows *sql.Rows) error {
			if err := rows.Scan(&raw, &live); err != nil {
				return err
			}
			i, ok := searchID(sorted, raw)
			switch {
			case live != 1:
				settled = true
			case ok:
				held[i] = true
			default:
				unmark = append(unmark, string(raw))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if settled {
			if _, err := t.exec(ctx, `UPDATE requests
				SET lease_until = COALESCE((SELECT lease_until FROM instance_leases WHERE instance = ?), 0)
				WHERE held_by = ? AND lease_until = 253402300799999 AND NOT `+liveLease, holder, holder); err != nil {
				return err
			}
		}
		for chunk := range slices.Chunk(unmark, renewBatch) {
			marks, args := inList(chunk, holder)
			if _, err := t.exec(ctx, renewUnmarkQuery(marks), append([]any{holder}, args...)...); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		var mark []any // made when an id needs its mark: usually none does
		markChunk := func() error {
			marks, args := inList(mark, holder)
			rows, err := t.query(ctx, renewMarkQuery(marks), args...)
			mark = mark[:0]
			return eachRow(rows, err, hold)
		}
		for i, id := range sorted {
			if held[i] || (i > 0 && sorted[i-1] == id) {
				continue
			}
			if mark == nil {
				mark = make([]any, 0, min(len(sorted)-i, renewBatch))
			}
			if mark = append(mark, string(id)); len(mark) == renewBatch {
				if err := markChunk(); err != nil {
					return err
				}
			}
		}
		if len(mark) > 0 {
			if err := markChunk(); err != nil {
				return err
			}
		}
		if _, err := t.exec(ctx, upsertInstanceLease, holder, until.UnixMilli()); err != nil {
			return err
		}
		recount = t.forUpdate() != ""
		return nil
	})
	if err == nil && recount {
		err = db.renewedAfter(ctx, holder, sorted, held)
	}
	db.renewed.commit(holder, sorted, err)
	if err != nil {
		return nil, db.wrap("renew leases", err)
	}
	n := 0
	for _, id := range ids {
		if i, _ := slices.BinarySearch(sorted, id); held[i] {
			n++
		}
	}
	if n == len(ids) {
		return ids, nil // every one renewed (the usual renewal): no copy of thousands of ids
	}
	renewed := make([]approval.ID, 0, n)
	for _, id := range ids {
		if i, _ := slices.BinarySearch(sorted, id); held[i] {
			renewed = append(renewed, id)
		}
	}
	return renewed, nil
}

// renewUnmarkQuery gives the requests of an IN list (marks: the holder,
// then the ids) marked for the holder a concrete lease again: the
// instance's lease, 0 without one (RenewLeases' step 2). Its rows are
// found by primary key (unindexedMarked).
func renewUnmarkQuery(marks string) string {
	return `UPDATE requests
		SET lease_until = COALESCE((SELECT lease_until FROM instance_leases WHERE instance = ?), 0)
		WHERE held_by = ? AND ` + unindexedMarked + ` AND id IN (` + marks + `)`
}

// renewMarkQuery marks the live requests of an IN list (marks: the ids,
// after the holder) that the holder holds with a concrete lease, and
// returns their ids (RenewLeases' step 3). Its rows are found by primary
// key (unindexedLive).
func renewMarkQuery(marks string) string {
	return `UPDATE requests SET lease_until = 253402300799999
		WHERE held_by = ? AND id IN (` + marks + `) AND lease_until IS DISTINCT FROM 253402300799999
		AND ` + unindexedLive + ` RETURNING id`
}

// searchID finds raw in sorted ids without converting it to a string.
func searchID(sorted []approval.ID, raw []byte) (int, bool) {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := int(uint(lo+hi) >> 1) //nolint:gosec // lo+hi ≥ 0
		if string(sorted[m]) < string(raw) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(sorted) && string(sorted[lo]) == string(raw)
}

// upsertInstanceLease writes a holder's instance lease (RenewLeases).
const upsertInstanceLease = `INSERT INTO instance_leases (instance, lease_until) VALUES (?, ?)
	ON CONFLICT (instance) DO UPDATE SET lease_until = excluded.lease_until`

// countTrue is the number of true flags in held.
func countTrue(held []bool) int {
	n := 0
	for _, h := range held {
		if h {
			n++
		}
	}
	return n
}

// renewedAfter is RenewLeases' step 5 on Postgres, run after the
// renewal committed, outside its transaction (on the lease pool): it
// counts the live requests still marked for holder and, only when the
// count falls short of those held (steps 1–3 found; a take-over,
// settlement, release or renewing consume since), clears held and reads
// again which of sorted they are. The rows marked for holder are a subset
// of held (only a renewal of holder marks a row; renewquiet.go), so an
// equal count means the same rows.
//
// After the commit, not before it: the renewal then holds the instance
// row exclusively for the upsert's round trip only, not through a count
// and a read of every marked row while the decisions in flight wait for
// their FOR SHARE (approve-all's count always fell short; branch
// pglease45c, docs/performance.md). The read sees at least what a read
// under the lock saw: a take-over that read the instance's old lease
// under its share lock committed before the upsert took the row, so
// before the commit, and a statement begun after the commit sees it
// (each autocommit statement has its own snapshot, whatever the
// database's default isolation); a take-over that comes later sees the
// new lease and takes nothing over until it lapses. Rows that leave the
// marked set in between were settled, released or consumed by their
// holder: reporting them not renewed only wakes their waiters to re-read.
func (db *DB) renewedAfter(ctx context.Context, holder string, sorted []approval.ID, held []bool) error {
	pool := db.lsql
	if pool == nil {
		pool = db.sql
	}
	var marked int64
	if err := pool.QueryRowContext(ctx, db.d.rebind(quietCountQuery), holder).Scan(&marked); err != nil {
		return err
	}
	if marked == int64(countTrue(held)) {
		return nil
	}
	clear(held)
	var raw sql.RawBytes
	rows, err := pool.QueryContext(ctx, db.d.rebind(`SELECT id FROM requests
		WHERE held_by = ? AND lease_until = 253402300799999 AND `+liveLease), holder)
	return eachRow(rows, err, func(rows *sql.Rows) error {
		if err := rows.Scan(&raw); err != nil {
			return err
		}
		if i, ok := searchID(sorted, raw); ok {
			held[i] = true
		}
		return nil
	})
}

// eachRow calls fn on each row of rows (a query's result, or its error)
// and closes rows: a streaming collect that keeps no row.
func eachRow(rows *sql.Rows, err error, fn func(*sql.Rows) error) error {
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() // on early returns; the error of the last Close is returned below
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}
