package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// CreateRequest inserts r, which must be pending and have an id, CreatedAt
// and ExpiresAt, and writes its "requested" event in the same transaction
// (on Postgres also notifying Channel). Times are stored truncated to the
// millisecond. It returns an error wrapping store.ErrAlreadyExists if the
// id is taken. Before inserting, in the same transaction, it checks caps
// and the requesting session (see store.Store.CreateRequest): on Postgres
// under transaction-scoped advisory locks per cap scope and session tree,
// taken in one order; on SQLite the IMMEDIATE transaction already excludes
// every other writer. On Postgres a request of a principal that is no
// session's, under its own cap and the total, is created in one pipeline
// (pgCreate), and only a refusal runs the transaction below.
func (db *DB) CreateRequest(ctx context.Context, r approval.Request, caps ...store.Cap) error {
	switch {
	case r.ID == "":
		return errors.New("create request: empty id")
	case r.State != approval.StatePending:
		return fmt.Errorf("create request %s: state %q, want pending", r.ID, r.State)
	case r.CreatedAt.IsZero() || r.ExpiresAt.IsZero():
		return fmt.Errorf("create request %s: created_at and expires_at are required", r.ID)
	}
	w, err := encodeRequest(r)
	if err != nil {
		return fmt.Errorf("create request %s: %w", r.ID, err)
	}
	if pg, ok := db.d.(*postgresDialect); ok {
		if own, total, ok := pgCreatable(r, caps); ok {
			err = db.pgCreate(ctx, pg, r, w, own, total)
			if !errors.Is(err, errPGCreateRefused) {
				if err != nil {
					return db.wrap("create request "+string(r.ID), err)
				}
				return nil
			}
			// Refused (a cap, a session, the id): the transaction below
			// checks again and says which.
		}
	}
	err = db.inTx(ctx, func(t *tx) error {
		if err := t.checkCreate(ctx, r, caps); err != nil {
			return err
		}
		res, err := t.exec(ctx, createInsert(t.d), w.args()...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrAlreadyExists
		}
		return t.writeEvents(ctx, eventRows(store.RequestedEvent(r)))
	})
	if err != nil {
		return db.wrap("create request "+string(r.ID), err)
	}
	return nil
}

// GetRequest returns the request with id, or an error wrapping
// store.ErrNotFound.
func (db *DB) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	w, err := getRequestRow(ctx, db, id, "")
	if err != nil {
		return approval.Request{}, db.wrap("get request "+string(id), err)
	}
	r, err := w.decode()
	if err != nil {
		return approval.Request{}, fmt.Errorf("get request %s: %w", id, err)
	}
	return r, nil
}

// ViewRequest is GetRequest for the admin API and the inbox (a person
// looking at an approval): it reads on the pool reserved for them
// (AdminConns), so it answers while the pools of the calls are busy.
func (db *DB) ViewRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	w, err := getRequestRow(ctx, db.adminReads(), id, "")
	if err != nil {
		return approval.Request{}, db.wrap("view request "+string(id), err)
	}
	r, err := w.decode()
	if err != nil {
		return approval.Request{}, fmt.Errorf("view request %s: %w", id, err)
	}
	return r, nil
}

// getRequestRow reads the row of id, or store.ErrNotFound; lock is appended
// to the query (tx.forUpdate, or "").
// A transaction with its own row to scan into (tx.rows) reads into it and
// returns a copy.
func getRequestRow(ctx context.Context, q querier, id approval.ID, lock string) (requestRow, error) {
	var s *requestScanner
	if t, ok := q.(*tx); ok && t.rows != nil {
		s = t.rows
	} else {
		s = new(requestScanner)
	}
	if s.dest == nil {
		s.dest = s.w.dest()
	}
	err := q.queryRow(ctx, `SELECT `+requestSelect+` FROM requests WHERE id = ?`+lock, string(id)).Scan(s.dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return requestRow{}, store.ErrNotFound
	}
	if err != nil {
		return requestRow{}, err
	}
	return s.w, nil
}

func scanRequestRow(rows *sql.Rows) (requestRow, error) {
	var w requestRow
	return w, rows.Scan(w.dest()...)
}

// A requestScanner is one requestRow and its Scan destinations, kept from
// read to read: a batched write transaction's request reads (tx.rows,
// getRequestRow) then allocate them once instead of once per read (≈ 1 KB:
// the row and 34 pointers as interfaces). A read returns a copy of the row,
// so reusing it is safe.
type requestScanner struct {
	w    requestRow
	dest []any
}

func scanRequest(rows *sql.Rows) (approval.Request, error) {
	w, err := scanRequestRow(rows)
	if err != nil {
		return approval.Request{}, err
	}
	return w.decode()
}

// lockedRequest reads the row of id inside t and locks it until t ends,
// or returns store.ErrNotFound. When the row takes its lease from its
// holder's instance (leaseMarker), on Postgres it then reads that
// instance's lease again under a share lock, held until t ends: a renewal
// of the instance's lease in flight (RenewLeases) has either committed
// before this read, and its lease is seen, or waits until t ended, and
// then sees whatever t wrote (a take-over). A decision on whether the
// lease lapsed is therefore never made on a lease being renewed. SQLite's
// IMMEDIATE transaction already excludes the renewal.
func (t *tx) lockedRequest(ctx context.Context, id approval.ID) (requestRow, error) {
	w, err := getRequestRow(ctx, t, id, t.forUpdate())
	if err != nil || t.forUpdate() == "" || !w.leaseUntil.Valid || w.leaseUntil.Int64 != leaseMarker {
		return w, err
	}
	// Scanned into its own variable: Scan(&w.holderLease) put every
	// locked read's row on the heap (≈ 1 KB per approval: alloc41).
	var lease sql.NullInt64
	err = t.queryRow(ctx, `SELECT lease_until FROM instance_leases WHERE instance = ? FOR SHARE`, w.heldBy).Scan(&lease)
	if errors.Is(err, sql.ErrNoRows) {
		lease, err = sql.NullInt64{}, nil
	}
	w.holderLease = lease
	return w, err
}

// storeRequest stores cur over old, a row t read and locked, and writes the
// events of the change (store.ChangeEvents, by actor at now). It returns
// cur as stored (store.Normalize); when nothing changed it writes nothing.
// The UPDATE is also a compare-and-set on old's state.
func (t *tx) storeRequest(ctx context.Context, old requestRow, cur approval.Request, actor string, now time.Time) (approval.Request, error) {
	p, err := planStore(old, cur, actor, now)
	if err != nil || !p.changed {
		return p.out, err
	}
	res, err := t.exec(ctx, p.update, p.updateArgs...)
	if err != nil {
		return approval.Request{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return approval.Request{}, err
	} else if n != 1 {
		return approval.Request{}, errChangedUnderLock(old.id, n)
	}
	t.notes = append(t.notes, releaseNotice(t.d, p)...)
	return p.out, t.writeEvents(ctx, p.events)
}

// rowLive is liveLease of a row: it still needs a holder (pending,
// approved, or consumed without a dispatch outcome).
func rowLive(w *requestRow) bool {
	switch approval.State(w.state) {
	case approval.StatePending, approval.StateApproved:
		return true
	case approval.StateConsumed:
		return w.dispatchOutcome == ""
	}
	return false
}

// errChangedUnderLock is the error of a request's UPDATE that did not
// update exactly its one row although the row was locked: it cannot
// happen while the locks hold, and nothing is committed when it does.
func errChangedUnderLock(id string, n int64) error {
	return fmt.Errorf("request %s changed under its lock (%d rows updated)", id, n)
}

// A storePlan is what storing a request over its locked row writes: the
// UPDATE of the changed columns (a compare-and-set on the old row's id and
// state, both bound last in updateArgs) and the events of the change.
type storePlan struct {
	out        approval.Request // the request as stored
	changed    bool             // false: nothing to write
	update     string           // with ? placeholders
	updateArgs []any
	events     []event
	// released: the change ends its holder's lease early and writes no
	// event (approval.Request.Release), which the watch would not
	// report: on Postgres it is notified all the same (releaseNotice).
	released bool
}

// planStore plans storing cur over old, a row read and locked, with the
// events of the change (store.ChangeEvents, by actor at now); see
// storeRequest, and pgUpdateRequest, which sends the plan in one pipeline.
func planStore(old requestRow, cur approval.Request, actor string, now time.Time) (storePlan, error) {
	before, err := old.decode()
	if err != nil {
		return storePlan{}, err
	}
	w, err := encodeRequest(cur)
	if err != nil {
		return storePlan{}, err
	}
	// A request that takes its lease from its holder's instance keeps
	// doing so while neither its holder nor its effective lease changed
	// and it still needs a holder; any other lease written is a concrete
	// time (a take-over, a release, a consume's renewal), which the
	// holder's next renewal marks again. A write that settles a marked
	// request (it no longer needs a holder: rowLive) gives it its
	// effective lease as a concrete one, in the same UPDATE, as the
	// renewal's step 2 would have (renew.go): the renewal then writes no
	// row of the requests settled since the last one (docs/performance.md,
	// "pglease45").
	if old.leaseUntil.Valid && old.leaseUntil.Int64 == leaseMarker && w.heldBy == old.heldBy && w.leaseUntil == old.holderLease && rowLive(&w) {
		w.leaseUntil = old.leaseUntil
	}
	w.holderLease = old.holderLease
	out, err := w.decode()
	if err != nil || w == old {
		return storePlan{out: out}, err
	}
	q, args := changedColumns(&old, &w)
	evs := eventRows(store.ChangeEvents(before, out, actor, now)...)
	return storePlan{
		out:        out,
		changed:    true,
		update:     q,
		updateArgs: append(args, old.id, old.state),
		events:     evs,
		released:   len(evs) == 0 && isRelease(before, out),
	}, nil
}

// requestColumnNames are the names of requestColumns, in its order.
var requestColumnNames = func() []string {
	names := strings.Split(requestColumns, ",")
	for i, n := range names {
		names[i] = strings.TrimSpace(n)
	}
	return names
}()

// guardedWhere is the WHERE clause of changedColumns' UPDATE, its
// compare-and-set on the row's id and old state; the state through
// unindexedState, so the row is found by its key whatever the statistics say
// of the old state.
const guardedWhere = ` WHERE id = ? AND ` + unindexedState + ` = ?`

// changedColumns returns the UPDATE of the requests row from old to cur
// that sets only the columns whose values differ, its WHERE clause
// (guardedWhere: id and old state) still to be bound, and the values it sets. An
// UPDATE that names a column makes SQLite rewrite every index on it and
// fire the triggers on it; a decision or an outcome changes a few of the
// 32 columns, and none of the arguments, so most of the six indexes on
// requests and the pending-count trigger are left alone. It compares the
// columns in place (columnDiff) and boxes only the values it
// sets: building both rows' args to compare them boxed 66 values per
// write (≈ 4.7 KB per approval during approve-all, branch sqlapprove33).
// The rows are read through pointers by direct calls: comparing them
// through a table of func values made both escape, two copies of a
// 33-column row on the heap per write (≈ 2.7 KB per approval, alloc41).
func changedColumns(old, cur *requestRow) (string, []any) {
	var q strings.Builder
	q.Grow(96)
	q.WriteString(`UPDATE requests SET `)
	args := make([]any, 0, 8)
	for i := range numRequestColumns {
		v, changed := columnDiff(i, old, cur)
		if !changed {
			continue
		}
		if len(args) > 0 {
			q.WriteString(`, `)
		}
		q.WriteString(requestColumnNames[i])
		q.WriteString(` = ?`)
		args = append(args, v)
	}
	q.WriteString(guardedWhere)
	return q.String(), args
}

// columnDiff compares column i (of requestColumns, in requestRow.args'
// order; TestColumnDiffsFollowArgs checks each) of two rows and returns
// cur's value, boxed, when it differs from old's.
func columnDiff(i int, old, cur *requestRow) (v any, changed bool) {
	switch i {
	case 0:
		return diff(old.id, cur.id)
	case 1:
		return diff(old.state, cur.state)
	case 2:
		return diff(old.server, cur.server)
	case 3:
		return diff(old.tool, cur.tool)
	case 4:
		return diff(old.arguments, cur.arguments)
	case 5:
		return diff(old.argumentsHash, cur.argumentsHash)
	case 6:
		return diff(old.displayWarnings, cur.displayWarnings)
	case 7:
		return diff(old.toolDigest, cur.toolDigest)
	case 8:
		return diff(old.rule, cur.rule)
	case 9:
		return diff(old.mode, cur.mode)
	case 10:
		return diff(old.requestedBy, cur.requestedBy)
	case 11:
		return diff(old.onBehalfOf, cur.onBehalfOf)
	case 12:
		return diff(old.tenant, cur.tenant)
	case 13:
		return diff(old.createdAt, cur.createdAt)
	case 14:
		return diff(old.expiresAt, cur.expiresAt)
	case 15:
		return diff(old.requiredApprovals, cur.requiredApprovals)
	case 16:
		return diff(old.approvers, cur.approvers)
	case 17:
		return diff(old.validForMS, cur.validForMS)
	case 18:
		return diff(old.reviews, cur.reviews)
	case 19:
		return diff(old.decidedBy, cur.decidedBy)
	case 20:
		return diff(old.decidedAt, cur.decidedAt)
	case 21:
		return diff(old.reason, cur.reason)
	case 22:
		return diff(old.consumedAt, cur.consumedAt)
	case 23:
		return diff(old.dispatchOutcome, cur.dispatchOutcome)
	case 24:
		return diff(old.heldBy, cur.heldBy)
	case 25:
		return diff(old.leaseUntil, cur.leaseUntil)
	case 26:
		return diff(old.answeredAt, cur.answeredAt)
	case 27:
		return diff(old.kind, cur.kind)
	case 28:
		return diff(old.target, cur.target)
	case 29:
		return diff(old.baseRevision, cur.baseRevision)
	case 30:
		return diff(old.policyRevision, cur.policyRevision)
	case 31:
		return diff(old.consumeToken, cur.consumeToken)
	case 32:
		return diff(old.timeoutRule, cur.timeoutRule)
	case 33:
		return diff(old.noGrants, cur.noGrants)
	}
	panic(fmt.Sprintf("sqlstore: no column %d", i))
}

// diff returns c, boxed, when it differs from o.
func diff[T comparable](o, c T) (any, bool) {
	if c != o {
		return c, true
	}
	return nil, false
}

// UpdateRequest runs fn on the stored request inside one transaction that
// holds its row (SQLite: IMMEDIATE; Postgres: SELECT … FOR UPDATE), stores
// the result with an UPDATE conditional on the state read and writes the
// events of store.ChangeEvents (on Postgres also notifying Channel), then
// commits. An unchanged request writes nothing. If fn returns an error,
// nothing is written and that error is returned as is. fn may run more
// than once (see inTx). An unknown id returns an error wrapping
// store.ErrNotFound without calling fn.
func (db *DB) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	return db.updateRequest(ctx, id, actor, store.TxReads{}, func(r *approval.Request, _ store.TxRead) error { return fn(r) }, nil)
}

// UpdateRequestWithChain is UpdateRequest that also passes fn the chain of
// the requesting session, read inside the transaction after the request's
// row is held: see store.Store.UpdateRequestWithChain.
func (db *DB) UpdateRequestWithChain(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request, session.Chain) error) (approval.Request, error) {
	return db.updateRequest(ctx, id, actor, store.TxReads{Chain: true}, func(r *approval.Request, read store.TxRead) error { return fn(r, read.Chain) }, nil)
}

// UpdateRequestReading is UpdateRequest that also passes fn what reads
// asks for, read inside the transaction after the request's row is held:
// see store.Store.UpdateRequestReading. The policy revision is read after
// the policy lock is taken shared (Postgres: pg_advisory_xact_lock_shared,
// then the read in a statement of its own, whose READ COMMITTED snapshot
// is taken after the lock was granted, so a revision whose writer held
// the lock has committed and is seen; SQLite: the IMMEDIATE transaction
// already holds the database's write lock, which every revision's writer
// needs too).
func (db *DB) UpdateRequestReading(ctx context.Context, id approval.ID, actor string, reads store.TxReads, fn func(*approval.Request, store.TxRead) error) (approval.Request, error) {
	return db.updateRequest(ctx, id, actor, reads, fn, nil)
}

// A statement is a query with ? placeholders and its arguments.
type statement struct {
	q    string
	args []any
}

// updateRequest is UpdateRequest (UpdateRequestReading with reads);
// also, when not nil, runs in the same transaction after the request
// was stored (RecordDispatch's ledger write). On Postgres a write that
// reads no chain is pipelined (pgUpdateRequest): two round trips instead
// of five or more, the same statements and locks.
func (db *DB) updateRequest(ctx context.Context, id approval.ID, actor string, reads store.TxReads, fn func(*approval.Request, store.TxRead) error, also *statement) (approval.Request, error) {
	if pg, ok := db.d.(*postgresDialect); ok && !reads.Chain {
		return db.pgUpdateRequest(ctx, pg, id, actor, reads.PolicyRevision, fn, also)
	}
	var (
		out   approval.Request
		fnErr error
		probe = store.TaskProbeFor(ctx, id)
		task  bool
	)
	if _, ok := db.d.(*sqliteDialect); !ok {
		probe = nil // Postgres reads it in pgLock's pipeline; its chain path leaves it to the caller
	}
	err := db.inTx(ctx, func(t *tx) error {
		fnErr = nil
		old, err := t.lockedRequest(ctx, id)
		if err != nil {
			return err
		}
		if probe != nil {
			// In the writer's transaction: one indexed probe instead of
			// the caller's GetTask on a reader connection afterwards.
			if err := t.queryRow(ctx, taskProbeSQL, string(id)).Scan(&task); err != nil {
				return err
			}
		}
		cur, err := old.decode()
		if err != nil {
			return err
		}
		var read store.TxRead
		if reads.Chain {
			// Read after the row is held: a revocation that holds the row
			// first has committed by now and is seen (READ COMMITTED takes
			// a new snapshot per statement).
			sid, err := t.sessionOfPrincipal(ctx, cur.RequestedBy)
			if err != nil {
				return err
			}
			if sid != "" {
				if read.Chain, err = readChain(ctx, t, sid); err != nil {
					return err
				}
			}
		}
		if reads.PolicyRevision {
			if read.PolicyRevision, err = t.sharedRevision(ctx); err != nil {
				return err
			}
		}
		if err := fn(&cur, read); err != nil {
			fnErr = err
			return err
		}
		if cur.ID != id {
			return fmt.Errorf("update changed the request id to %q", cur.ID)
		}
		if out, err = t.storeRequest(ctx, old, cur, actor, db.now()); err != nil || also == nil {
			return err
		}
		_, err = t.exec(ctx, also.q, also.args...)
		return err
	})
	switch {
	case fnErr != nil:
		return approval.Request{}, fnErr
	case err != nil:
		return approval.Request{}, db.wrap("update request "+string(id), err)
	}
	if probe != nil {
		probe.Read, probe.Task = true, task
	}
	return out, nil
}

// taskProbeSQL reads whether a request holds a task (store.TaskProbe), on
// SQLite inside the decision's transaction.
const taskProbeSQL = `SELECT EXISTS (SELECT 1 FROM approval_tasks WHERE request_id = ?)`

// dueQuery lists the requests due as of the bound time (three times, unix
// ms), most overdue first, at most the bound limit: pending ones past their
// expiry, approved ones past their validity, and consumed ones without a
// dispatch outcome whose holder's lease lapsed (the effective lease: its
// instance's when the request carries leaseMarker; migration 14). Each branch reads an index
// that holds only candidates: requests_state_expires for the first two
// (pending and approved requests are the live ones), requests_undispatched
// (migration 13) for the third, so the sweeper's query, every sweep
// interval, does not grow with the consumed requests the store keeps.
const dueQuery = `SELECT id FROM (
		SELECT id, expires_at AS due FROM requests
		WHERE state = 'pending' AND expires_at <= ?
		UNION ALL
		SELECT id, decided_at + valid_for_ms AS due FROM requests
		WHERE state = 'approved' AND valid_for_ms > 0 AND decided_at + valid_for_ms <= ?
		UNION ALL
		SELECT id, ` + effectiveLease + ` AS due FROM requests
		WHERE state = 'consumed' AND dispatch_outcome = '' AND held_by <> '' AND ` + effectiveLease + ` <= ?
	) AS d ORDER BY due, id LIMIT ?`

// Due returns the ids of requests a sweeper must look at as of now, most
// overdue first, at most limit (0 means 100): see store.Store.Due.
func (db *DB) Due(ctx context.Context, now time.Time, limit int) ([]approval.ID, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	ms := now.UnixMilli()
	rows, err := db.query(ctx, dueQuery, ms, ms, ms, limit)
	ids, err := collect(rows, err, func(rows *sql.Rows) (approval.ID, error) {
		var id approval.ID
		return id, rows.Scan(&id)
	})
	if err != nil {
		return nil, db.wrap("list due requests", err)
	}
	return ids, nil
}

// CountPending counts pending agent requests (tool calls, resource
// reads, prompt gets), only those of requestedBy
// when it is not empty. The total is read from the counts kept by triggers
// (no row scan: the sweeper reads it every interval).
func (db *DB) CountPending(ctx context.Context, requestedBy string) (int, error) {
	q, args := pendingTotal, []any{}
	if requestedBy != "" {
		q, args = `SELECT COUNT(*) FROM requests WHERE `+pendingToolCalls+` AND requested_by = ?`, []any{requestedBy}
	}
	var n int
	if err := db.queryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, db.wrap("count pending", err)
	}
	return n, nil
}

// OpenIdentical returns the pending, approved and unanswered denied requests
// of principal for (server, tool, argumentsHash), oldest first, at most 100.
func (db *DB) OpenIdentical(ctx context.Context, principal, server, tool, argumentsHash string) ([]approval.Request, error) {
	rows, err := db.query(ctx, `SELECT `+requestSelect+` FROM requests
		WHERE requested_by = ? AND arguments_hash = ? AND server = ? AND tool = ?
		AND (state IN ('pending', 'approved') OR (state = 'denied' AND answered_at IS NULL))
		ORDER BY id LIMIT 100`, principal, argumentsHash, server, tool)
	rs, err := collect(rows, err, scanRequest)
	if err != nil {
		return nil, db.wrap("find identical requests", err)
	}
	return rs, nil
}
