package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The audit chain (issue 14, migration 0010, docs/audit.md). Links live in
// audit_log; audit_chain is the head row. ChainAudit reads the events past
// the chain's cursor (eventsAfter: the one place the chain follows the
// log) and builds the links outside any transaction, then appends them in
// a short transaction holding the head row (Postgres: FOR UPDATE; SQLite:
// the IMMEDIATE transaction) if the head and cursor are still those it
// built on (else it builds again). So one chainer appends at a time
// whatever the number of instances, and SQLite's write lock is held only
// for the inserts, never while records are encoded and hashed.

// errAuditMoved: another chainer appended between the read and the write.
var errAuditMoved = errors.New("the audit chain moved")

// auditAttempts bounds how often ChainAudit builds again after losing a
// race with another chainer.
const auditAttempts = 10

// ChainAudit appends links to the audit chain: it reads up to limit (0
// means 100) events past the chain's cursor in the event log, with the
// request or session each names, and calls build with the head and those
// events; build returns the links to append (Seq head.Seq+1, +2, …, the
// first's PrevHash head.Hash, each next's PrevHash the previous Hash),
// which may include links that are not events (calls decided without an
// approval). They are inserted, and the head and the cursor moved past
// them, in one transaction holding the head that first checks that the
// head and cursor have not moved (else build runs again on the new head;
// so build may run more than once and must have no side effects). When no
// event is waiting and calls is 0, nothing is written. It returns how many
// links it appended and whether more events may be waiting (the batch was
// full).
func (db *DB) ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (appended int, more bool, err error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	for attempt := 1; ; attempt++ {
		var (
			head   store.AuditHead
			cursor string
		)
		if err := db.queryRow(ctx, `SELECT cursor, seq, hash, anchor_seq, anchor_hash, anchor_at FROM audit_chain WHERE id = 1`).
			Scan(&cursor, &head.Seq, &head.Hash, &head.AnchorSeq, &head.AnchorHash, &anchorAt{&head.AnchorAt}); err != nil {
			return 0, false, db.wrap("chain audit events", fmt.Errorf("read the audit chain head: %w", err))
		}
		evs, next, err := eventsAfter(ctx, db, cursor, limit)
		if err != nil {
			return 0, false, db.wrap("chain audit events", err)
		}
		if len(evs) == 0 && calls == 0 {
			return 0, false, nil
		}
		src, err := auditSources(ctx, db, evs)
		if err != nil {
			return 0, false, db.wrap("chain audit events", err)
		}
		links, err := build(head, src)
		if err != nil {
			return 0, false, fmt.Errorf("chain audit events: %w", err)
		}
		err = db.inTx(ctx, func(t *tx) error {
			var (
				seq int64
				cur string
			)
			if err := t.queryRow(ctx, `SELECT seq, cursor FROM audit_chain WHERE id = 1`+t.forUpdate()).Scan(&seq, &cur); err != nil {
				return fmt.Errorf("read the audit chain head: %w", err)
			}
			if seq != head.Seq || cur != cursor {
				return errAuditMoved
			}
			return t.appendAudit(ctx, head, links, next)
		})
		if errors.Is(err, errAuditMoved) && attempt < auditAttempts {
			continue
		}
		if err != nil {
			return 0, false, db.wrap("chain audit events", err)
		}
		return len(links), len(evs) == limit, nil
	}
}

// appendAudit inserts links, which must follow head, and moves the head to
// the last and the cursor to next.
func (t *tx) appendAudit(ctx context.Context, head store.AuditHead, links []store.AuditEntry, next string) error {
	prev, seq := head.Hash, head.Seq
	for _, l := range links {
		if l.Seq != seq+1 || l.PrevHash != prev {
			return fmt.Errorf("audit link %d (previous %q) does not follow %d (%q)", l.Seq, l.PrevHash, seq, prev)
		}
		if _, err := t.exec(ctx, `INSERT INTO audit_log (seq, at, tenant, record, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)`,
			l.Seq, millis(l.At), l.Tenant, string(l.Record), l.PrevHash, l.Hash); err != nil {
			return fmt.Errorf("insert audit link %d: %w", l.Seq, err)
		}
		prev, seq = l.Hash, l.Seq
	}
	if _, err := t.exec(ctx, `UPDATE audit_chain SET cursor = ?, seq = ?, hash = ? WHERE id = 1`, next, seq, prev); err != nil {
		return fmt.Errorf("move the audit chain head: %w", err)
	}
	return nil
}

// anchorAt scans unix milliseconds, 0 meaning the zero time.
type anchorAt struct{ t *time.Time }

func (a *anchorAt) Scan(v any) error {
	var n sql.NullInt64
	if err := n.Scan(v); err != nil {
		return err
	}
	*a.t = time.Time{}
	if n.Int64 != 0 {
		*a.t = fromMillis(n.Int64)
	}
	return nil
}

// eventsAfter is how the audit chain follows the event log: up to limit
// events after cursor (the position ChainAudit keeps, as text) in log
// order, and the position after the last one (cursor itself when there is
// none). Today the position is the event seq: seqs follow commit order
// because every transaction writing events holds the events lock until it
// commits (writeEvents), so no event commits later behind the cursor. This
// is the one function to switch when the log gets a change feed of its
// own.
func eventsAfter(ctx context.Context, q querier, cursor string, limit int) ([]store.AuditSource, string, error) {
	after, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil {
		return nil, cursor, fmt.Errorf("audit chain cursor %q: %w", cursor, err)
	}
	rows, err := q.query(ctx, `SELECT seq, COALESCE(request_id, ''), COALESCE(session_id, ''), COALESCE(policy_revision, 0), type, state, actor, at
		FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	evs, err := collect(rows, err, func(rows *sql.Rows) (store.AuditSource, error) {
		var (
			s  store.AuditSource
			at int64
		)
		err := rows.Scan(&s.Event.Seq, &s.Event.RequestID, &s.Event.SessionID, &s.PolicyRevision, &s.Event.Type, &s.Event.State, &s.Event.Actor, &at)
		s.Event.At = fromMillis(at)
		return s, err
	})
	if err != nil {
		return nil, cursor, fmt.Errorf("read events: %w", err)
	}
	if len(evs) == 0 {
		return nil, cursor, nil
	}
	return evs, strconv.FormatInt(evs[len(evs)-1].Event.Seq, 10), nil
}

// auditSources fills in, through q, the request of each request event and
// the tenant of each session event.
func auditSources(ctx context.Context, q querier, src []store.AuditSource) ([]store.AuditSource, error) {
	if len(src) == 0 {
		return src, nil
	}
	evs := make([]approval.Event, len(src))
	var sessions []any
	seen := map[string]bool{}
	for i, s := range src {
		evs[i] = s.Event
		if id := s.Event.SessionID; id != "" && !seen[id] {
			seen[id] = true
			sessions = append(sessions, id)
		}
	}
	reqs, err := requestsByID(ctx, q, evs)
	if err != nil {
		return nil, err
	}
	tenants := map[string]string{}
	if len(sessions) > 0 {
		rows, err := q.query(ctx, `SELECT id, tenant FROM sessions WHERE id IN (`+placeholders(len(sessions))+`)`, sessions...)
		pairs, err := collect(rows, err, func(rows *sql.Rows) ([2]string, error) {
			var p [2]string
			return p, rows.Scan(&p[0], &p[1])
		})
		if err != nil {
			return nil, fmt.Errorf("read the sessions of events: %w", err)
		}
		for _, p := range pairs {
			tenants[p[0]] = p[1]
		}
	}
	for i := range src {
		if r, ok := reqs[src[i].Event.RequestID]; ok {
			src[i].Request = &r
		}
		src[i].SessionTenant = tenants[src[i].Event.SessionID]
	}
	return src, nil
}

// AuditChain returns the chain's head.
func (db *DB) AuditChain(ctx context.Context) (store.AuditHead, error) {
	var h store.AuditHead
	err := db.queryRow(ctx, `SELECT seq, hash, anchor_seq, anchor_hash, anchor_at FROM audit_chain WHERE id = 1`).
		Scan(&h.Seq, &h.Hash, &h.AnchorSeq, &h.AnchorHash, &anchorAt{&h.AnchorAt})
	if err != nil {
		return store.AuditHead{}, db.wrap("read the audit chain head", err)
	}
	return h, nil
}

// AuditLog returns the links f selects, in Seq order.
func (db *DB) AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	q := `SELECT seq, at, tenant, record, prev_hash, hash FROM audit_log WHERE seq > ?`
	args := []any{f.AfterSeq}
	if !f.Since.IsZero() {
		q += ` AND at >= ?`
		args = append(args, millis(f.Since))
	}
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := db.query(ctx, q, args...)
	out, err := collect(rows, err, func(rows *sql.Rows) (store.AuditEntry, error) {
		var (
			e      store.AuditEntry
			at     int64
			record string
		)
		err := rows.Scan(&e.Seq, &at, &e.Tenant, &record, &e.PrevHash, &e.Hash)
		e.At, e.Record = fromMillis(at), []byte(record)
		return e, err
	})
	if err != nil {
		return nil, db.wrap("read the audit log", err)
	}
	return out, nil
}

// PruneAudit deletes the links at the start of the chain whose At is
// before cutoff, up to (not including) the head link, pruneAuditBatch per
// transaction, and records the last one deleted as the anchor in the same
// transaction, so the rest still verifies (store.AuditHead). It returns
// how many links it deleted.
func (db *DB) PruneAudit(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for {
		var n int
		err := db.inTx(ctx, func(t *tx) error {
			n = 0
			var head, anchor int64
			if err := t.queryRow(ctx, `SELECT seq, anchor_seq FROM audit_chain WHERE id = 1`+t.forUpdate()).Scan(&head, &anchor); err != nil {
				return fmt.Errorf("read the audit chain head: %w", err)
			}
			rows, err := t.query(ctx, `SELECT seq, at, hash FROM audit_log WHERE seq > ? AND seq < ? ORDER BY seq LIMIT ?`, anchor, head, pruneAuditBatch)
			type link struct {
				seq, at int64
				hash    string
			}
			links, err := collect(rows, err, func(rows *sql.Rows) (link, error) {
				var l link
				return l, rows.Scan(&l.seq, &l.at, &l.hash)
			})
			if err != nil {
				return fmt.Errorf("read the audit log: %w", err)
			}
			for n < len(links) && links[n].at < millis(cutoff) {
				n++
			}
			if n == 0 {
				return nil
			}
			last := links[n-1]
			if _, err := t.exec(ctx, `DELETE FROM audit_log WHERE seq <= ?`, last.seq); err != nil {
				return fmt.Errorf("delete audit links: %w", err)
			}
			_, err = t.exec(ctx, `UPDATE audit_chain SET anchor_seq = ?, anchor_hash = ?, anchor_at = ? WHERE id = 1`, last.seq, last.hash, last.at)
			return err
		})
		if err != nil {
			return total, db.wrap("prune the audit log", err)
		}
		total += n
		if n < pruneAuditBatch {
			return total, nil
		}
	}
}

// pruneAuditBatch is how many links one pruning transaction deletes at most.
const pruneAuditBatch = 500
