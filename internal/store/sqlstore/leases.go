package sqlstore

import (
	"context"
	"database/sql"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// leaseChunk is how many ids one statement of EachLease reads.
const leaseChunk = 512

// EachLease reads the leases of ids (store.Store.EachLease), leaseChunk
// ids per statement, on the calls' read pool, and hands each to fn. The
// lease is the effective one, as GetRequest decodes it: the holder
// instance's lease when the row carries leaseMarker.
func (db *DB) EachLease(ctx context.Context, ids []approval.ID, fn func(store.Lease)) error {
	vals := make([]any, 0, min(len(ids), leaseChunk))
	for len(ids) > 0 {
		n := min(len(ids), leaseChunk)
		vals = vals[:0]
		for _, id := range ids[:n] {
			vals = append(vals, string(id))
		}
		ids = ids[n:]
		if err := db.leaseChunk(ctx, vals, fn); err != nil {
			return db.wrap("read leases", err)
		}
	}
	return nil
}

// leaseChunk is one statement of EachLease, for the ids in vals.
func (db *DB) leaseChunk(ctx context.Context, vals []any, fn func(store.Lease)) error {
	marks, args := inList(vals)
	rows, err := db.query(ctx, `SELECT id, state, held_by, lease_until,
	CASE WHEN lease_until = 253402300799999 THEN
		(SELECT l.lease_until FROM instance_leases l WHERE l.instance = requests.held_by) END
	FROM requests WHERE id IN (`+marks+`)`, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			id, state, heldBy string
			until, holder     sql.NullInt64
		)
		if err := rows.Scan(&id, &state, &heldBy, &until, &holder); err != nil {
			return err
		}
		l := store.Lease{ID: approval.ID(id), State: approval.State(state), HeldBy: heldBy, LeaseUntil: fromNullMillis(until)}
		if until.Valid && until.Int64 == leaseMarker {
			l.LeaseUntil = fromNullMillis(holder)
		}
		fn(l)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}
