package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// pruneBatch is how many rows one pruning transaction deletes at most, so
// that pruning a large backlog never holds the write lock for long.
const pruneBatch = 500

// instanceLeaseRetention is how long after its end Prune keeps an
// instance's lease row (migration 14).
const instanceLeaseRetention = 24 * time.Hour

// openRequest is the condition selecting requests that are not terminal:
// they may still change, so neither they nor their events are pruned.
const openRequest = `(state IN ('pending', 'approved') OR (state = 'consumed' AND dispatch_outcome = ''))`

// Prune deletes what r lets go as of now, events first (a prefix of the
// change feed), then requests, then sessions; see store.Retention. Each
// step runs in transactions of at most pruneBatch rows. It returns what it
// deleted and where the pruned prefix of the event log now ends. It also
// deletes the instance lease rows that ended instanceLeaseRetention ago,
// whatever r says.
func (db *DB) Prune(ctx context.Context, r store.Retention, now time.Time) (store.Pruned, error) {
	var out store.Pruned
	var err error
	if r.Events > 0 {
		if out.Events, err = db.pruneEvents(ctx, now.Add(-r.Events), now); err != nil {
			return out, db.wrap("prune events", err)
		}
	}
	if out.Through, _, err = db.prunedThrough(ctx); err != nil {
		return out, db.wrap("prune events", err)
	}
	if r.Requests > 0 {
		const q = `DELETE FROM requests WHERE id IN (SELECT id FROM requests r
			WHERE created_at < ? AND NOT ` + openRequest + `
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.request_id = r.id)
			AND NOT EXISTS (SELECT 1 FROM policy_revisions p WHERE p.approval_id = r.id)
			LIMIT ?)`
		if out.Requests, err = db.deleteInBatches(ctx, q, now.Add(-r.Requests).UnixMilli()); err != nil {
			return out, db.wrap("prune requests", err)
		}
	}
	// Instance leases (migration 14) that ended a day ago: an instance
	// id is new with every process start by default, so their rows would
	// pile up. A missing row and an ended one both mean a lapsed lease
	// to every reader (requestSelect, effectiveLease), so this changes
	// no request's meaning; an instance that renews late writes its row
	// again.
	if err := db.inTx(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `DELETE FROM instance_leases WHERE lease_until < ?`, now.Add(-instanceLeaseRetention).UnixMilli())
		return err
	}); err != nil {
		return out, db.wrap("prune instance leases", err)
	}
	if r.Sessions > 0 {
		// Children go first; their parents become prunable in the next
		// round, so loop until a round deletes nothing.
		const q = `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions s
			WHERE revoked_at IS NOT NULL AND revoked_at < ?
			AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_id = s.id)
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = s.id)
			LIMIT ?)`
		if out.Sessions, err = db.deleteInBatches(ctx, q, now.Add(-r.Sessions).UnixMilli()); err != nil {
			return out, db.wrap("prune sessions", err)
		}
	}
	return out, nil
}

// deleteInBatches runs q (a DELETE whose last argument is the batch size)
// with arg until a run deletes nothing, and returns how many rows it
// deleted.
func (db *DB) deleteInBatches(ctx context.Context, q string, arg any) (int, error) {
	total := 0
	for {
		var n int64
		err := db.inTx(ctx, func(t *tx) error {
			res, err := t.exec(ctx, q, arg, pruneBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		if n == 0 {
			return total, nil
		}
	}
}

// pruneEvents deletes the prefix of the change feed that ends before the
// first event that is at or after cutoff, belongs to a request that is not
// terminal, or is past the position of a durable feed consumer that moved
// since cutoff (pruneStop), pruneBatch events per transaction, recording
// after each transaction (in it) the position of the last event deleted.
func (db *DB) pruneEvents(ctx context.Context, cutoff, now time.Time) (int, error) {
	stop, stopping, err := db.pruneStop(ctx, cutoff)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		from, _, err := db.prunedThrough(ctx)
		if err != nil {
			return total, err
		}
		q, args := db.d.feedQuery(eventColumns, from, pruneBatch)
		rows, err := db.query(ctx, q, args...)
		fevs, err := collectFeed(rows, err)
		if err != nil || len(fevs) == 0 {
			return total, err
		}
		open, err := db.openAmong(ctx, feedEvents(fevs))
		if err != nil {
			return total, err
		}
		// Keep the prefix: stop at the first event that must stay.
		n := 0
		for n < len(fevs) && fevs[n].At.Before(cutoff) && !open[fevs[n].RequestID] && (!stopping || !stop.Before(fevs[n].pos)) {
			n++
		}
		if n == 0 {
			return total, nil
		}
		last := fevs[n-1]
		err = db.inTx(ctx, func(t *tx) error {
			seqs := make([]any, n)
			for i, ev := range fevs[:n] {
				seqs[i] = ev.Seq
			}
			marks, args := inList(seqs)
			if _, err := t.exec(ctx, `DELETE FROM events WHERE seq IN (`+marks+`)`, args...); err != nil {
				return err
			}
			_, err := t.exec(ctx, `INSERT INTO events_pruned (id, through, through_at, pruned_at, events) VALUES (1, ?, ?, ?, ?)
				ON CONFLICT (id) DO UPDATE SET through = excluded.through, through_at = excluded.through_at,
				pruned_at = excluded.pruned_at, events = events_pruned.events + excluded.events`,
				last.pos.String(), last.At.UnixMilli(), now.UnixMilli(), n)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < len(fevs) {
			return total, nil
		}
	}
}

// openAmong returns which requests of evs are not terminal.
func (db *DB) openAmong(ctx context.Context, evs []approval.Event) (map[approval.ID]bool, error) {
	var ids []any
	seen := map[approval.ID]bool{}
	for _, ev := range evs {
		if ev.RequestID != "" && !seen[ev.RequestID] {
			seen[ev.RequestID] = true
			ids = append(ids, string(ev.RequestID))
		}
	}
	open := map[approval.ID]bool{}
	if len(ids) == 0 {
		return open, nil
	}
	marks, args := inList(ids)
	rows, err := db.query(ctx, openAmongQuery(marks), args...)
	got, err := collect(rows, err, func(rows *sql.Rows) (approval.ID, error) {
		var id approval.ID
		return id, rows.Scan(&id)
	})
	for _, id := range got {
		open[id] = true
	}
	return open, err
}

// openAmongQuery selects the requests of an IN list (marks) that are not
// terminal (openRequest), found by primary key (unindexedLive).
func openAmongQuery(marks string) string {
	return `SELECT id FROM requests WHERE id IN (` + marks + `) AND ` + unindexedLive
}

// prunedThrough returns where the pruned prefix of the event log ends
// (the zero cursor when nothing was pruned) and how many events were
// pruned in all.
func (db *DB) prunedThrough(ctx context.Context) (store.Cursor, int64, error) {
	var (
		s string
		n int64
	)
	err := db.queryRow(ctx, `SELECT through, events FROM events_pruned WHERE id = 1`).Scan(&s, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Cursor{}, 0, nil
	}
	if err != nil {
		return store.Cursor{}, 0, err
	}
	c, err := store.ParseCursor(s)
	if err != nil {
		return store.Cursor{}, 0, fmt.Errorf("events_pruned: %w", err)
	}
	return c, n, nil
}
