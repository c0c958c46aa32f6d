package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The audit chain (issue 14, migration 0010, docs/audit.md). Links live in
// audit_log; audit_chain is the head row. The chain follows the event log
// as the durable feed consumer store.FeedConsumerAudit (feed_cursors).
// ChainAudit reads the events past that position (Feed: the change feed,
// which never passes an event that commits later) and builds the links
// outside any transaction, then appends them in a short transaction
// holding the head row (Postgres: FOR UPDATE; SQLite: the IMMEDIATE
// transaction) and the consumer's row, if both head and position are still
// those it built on (else it builds again), moving both. So one chainer
// appends at a time whatever the number of instances, every event is
// chained exactly once, and SQLite's write lock is held only for the
// inserts, never while records are encoded and hashed.

// errAuditMoved: another chainer appended between the read and the write.
var errAuditMoved = errors.New("the audit chain moved")

// auditAttempts bounds how often ChainAudit builds again after losing a
// race with another chainer.
const auditAttempts = 10

// ChainAudit appends links to the audit chain: it reads up to limit (0
// means 100) events past the chain's position in the change feed, with the
// request, session or grant each names, and calls build with the head and
// those events; build returns the links to append (Seq head.Seq+1, +2, …,
// the first's PrevHash head.Hash, each next's PrevHash the previous Hash),
// which may include links that are not events (calls decided without an
// approval). They are inserted, the head moved to the last and the feed
// position past the events, in one transaction holding the head and the
// position that first checks that neither moved (else build runs again on
// the new head; so build may run more than once and must have no side
// effects). When no event is waiting and calls is 0, nothing is written.
// It returns how many links it appended and whether more events may be
// waiting (the batch was full).
func (db *DB) ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (appended int, more bool, err error) {
	limit = feedLimit(limit)
	for attempt := 1; ; attempt++ {
		head, err := db.AuditChain(ctx)
		if err != nil {
			return 0, false, err
		}
		pos, _, err := db.FeedPosition(ctx, store.FeedConsumerAudit)
		if err != nil {
			return 0, false, db.wrap("chain audit events", err)
		}
		evs, next, err := db.Feed(ctx, pos, limit)
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
		now := db.now()
		err = db.inTx(ctx, func(t *tx) error {
			var seq int64
			if err := t.queryRow(ctx, `SELECT seq FROM audit_chain WHERE id = 1`+t.forUpdate()).Scan(&seq); err != nil {
				return fmt.Errorf("read the audit chain head: %w", err)
			}
			if seq != head.Seq {
				return errAuditMoved
			}
			if err := t.moveFeed(ctx, store.FeedConsumerAudit, pos, next, now); err != nil {
				return err
			}
			return t.appendAudit(ctx, head, links)
		})
		if (errors.Is(err, errAuditMoved) || errors.Is(err, errFeedMoved)) && attempt < auditAttempts {
			continue
		}
		if err != nil {
			return 0, false, db.wrap("chain audit events", err)
		}
		return len(links), len(evs) == limit, nil
	}
}

// auditRowsPerInsert is the most links one INSERT of insertAudit carries
// (SQLite; Postgres takes them by COPY, pgCopyAudit) (six parameters each: far below SQLite's 32,766 and Postgres's 65,535).
// One statement per link made chaining a burst of 10,000 admissions cost
// a round trip and a statement execution per link on both sides
// (docs/performance.md, "Idle CPU while holding"). An INSERT carries a
// power of two of links, so that at most eight statement shapes exist
// (SQLite's write connection keeps a bounded cache of prepared statements).
const auditRowsPerInsert = 128

// appendAudit inserts links, which must follow head, and moves the head to
// the last: on Postgres with one COPY (pgCopyAudit), on SQLite with one
// INSERT per auditRowsPerInsert links (insertAudit).
func (t *tx) appendAudit(ctx context.Context, head store.AuditHead, links []store.AuditEntry) error {
	prev, seq := head.Hash, head.Seq
	for _, l := range links {
		if l.Seq != seq+1 || l.PrevHash != prev {
			return fmt.Errorf("audit link %d (previous %q) does not follow %d (%q)", l.Seq, l.PrevHash, seq, prev)
		}
		prev, seq = l.Hash, l.Seq
	}
	if len(links) > 0 {
		var err error
		if conn, ok := t.sql.(*sql.Conn); ok && t.d.name() == DriverPostgres {
			err = pgCopyAudit(t.context(ctx), conn, links)
		} else {
			err = t.insertAudit(ctx, links)
		}
		if err != nil {
			return fmt.Errorf("insert audit links %d to %d: %w", links[0].Seq, links[len(links)-1].Seq, err)
		}
	}
	if seq == head.Seq {
		return nil
	}
	if _, err := t.exec(ctx, `UPDATE audit_chain SET seq = ?, hash = ? WHERE id = 1`, seq, prev); err != nil {
		return fmt.Errorf("move the audit chain head: %w", err)
	}
	return nil
}

// insertAudit inserts links with one INSERT per auditRowsPerInsert links.
func (t *tx) insertAudit(ctx context.Context, links []store.AuditEntry) error {
	for rest := links; len(rest) > 0; {
		n := 1 << (bits.Len(uint(min(len(rest), auditRowsPerInsert))) - 1) // a power of two ≤ len(rest)
		chunk := rest[:n]
		rest = rest[n:]
		args := make([]any, 0, 6*len(chunk))
		for _, l := range chunk {
			args = append(args, l.Seq, millis(l.At), l.Tenant, string(l.Record), l.PrevHash, l.Hash)
		}
		q := `INSERT INTO audit_log (seq, at, tenant, record, prev_hash, hash) VALUES ` +
			strings.TrimSuffix(strings.Repeat(`(?, ?, ?, ?, ?, ?), `, len(chunk)), `, `)
		if _, err := t.exec(ctx, q, args...); err != nil {
			return fmt.Errorf("links %d to %d: %w", chunk[0].Seq, chunk[len(chunk)-1].Seq, err)
		}
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

// auditSources describes evs for the chain, reading through q: the request
// of each request event, the tenant of each session or grant event, and
// the revision of each policy event (the feed's events do not carry it).
func auditSources(ctx context.Context, q querier, evs []approval.Event) ([]store.AuditSource, error) {
	src := make([]store.AuditSource, len(evs))
	if len(evs) == 0 {
		return src, nil
	}
	var sessions, grants, policySeqs []any
	seen := map[string]bool{}
	for i, ev := range evs {
		src[i].Event = ev
		switch {
		case ev.RequestID != "":
		case ev.SessionID != "":
			if !seen["s"+ev.SessionID] {
				seen["s"+ev.SessionID] = true
				sessions = append(sessions, ev.SessionID)
			}
		case ev.GrantID != "":
			if !seen["g"+ev.GrantID] {
				seen["g"+ev.GrantID] = true
				grants = append(grants, ev.GrantID)
			}
		default:
			policySeqs = append(policySeqs, ev.Seq)
		}
	}
	reqs, err := auditRequests(ctx, q, evs)
	if err != nil {
		return nil, err
	}
	pairs := func(what, query string, args []any) (map[string]string, error) {
		out := map[string]string{}
		if len(args) == 0 {
			return out, nil
		}
		marks, args := inList(args)
		rows, err := q.query(ctx, query+` IN (`+marks+`)`, args...)
		ps, err := collect(rows, err, func(rows *sql.Rows) ([2]string, error) {
			var p [2]string
			return p, rows.Scan(&p[0], &p[1])
		})
		if err != nil {
			return nil, fmt.Errorf("read the %s of events: %w", what, err)
		}
		for _, p := range ps {
			out[p[0]] = p[1]
		}
		return out, nil
	}
	sessionTenants, err := pairs("sessions", `SELECT id, tenant FROM sessions WHERE id`, sessions)
	if err != nil {
		return nil, err
	}
	grantTenants, err := pairs("grants", `SELECT id, tenant FROM grants WHERE id`, grants)
	if err != nil {
		return nil, err
	}
	revisions, err := pairs("policy revisions", `SELECT CAST(seq AS TEXT), CAST(policy_revision AS TEXT) FROM events WHERE policy_revision IS NOT NULL AND seq`, policySeqs)
	if err != nil {
		return nil, err
	}
	for i := range src {
		ev := src[i].Event
		if r, ok := reqs[ev.RequestID]; ok {
			src[i].Request = r // shared by the request's events, which only read it
		}
		switch {
		case ev.SessionID != "":
			src[i].Tenant = sessionTenants[ev.SessionID]
		case ev.GrantID != "":
			src[i].Tenant = grantTenants[ev.GrantID]
		}
		if rev, ok := revisions[strconv.FormatInt(ev.Seq, 10)]; ok {
			if src[i].PolicyRevision, err = strconv.ParseInt(rev, 10, 64); err != nil {
				return nil, fmt.Errorf("event %d: policy revision %q: %w", ev.Seq, rev, err)
			}
		}
	}
	return src, nil
}

// auditRequestColumns are the columns of requests an audit record uses
// (audit.fromEvent), in the order auditRequestScanner reads them; the last
// two, the arguments and their display warnings, are read only for a
// batch with a requested event (the one record that carries them).
const auditRequestColumns = `id, requested_by, on_behalf_of, tenant, kind, server, tool, rule,
	arguments_hash, reviews, reason, dispatch_outcome, `

// auditRequests reads, through q, the requests the request events of evs
// name, keyed by id, with the fields an audit record uses (see
// store.AuditSource.Request), decoded as every read decodes them
// (requestRow.decode); the others are zero. Reading the whole row (34
// columns, the holder's lease, the approvers' list) for each event's
// request was ≈ 13 % of what approve-all allocated on SQLite (branch
// sqlapprove33). Each request is allocated once, for all its events.
func auditRequests(ctx context.Context, q querier, evs []approval.Event) (map[approval.ID]*approval.Request, error) {
	var ids []any
	seen := map[approval.ID]bool{}
	withArgs := false
	for _, ev := range evs {
		if ev.RequestID == "" {
			continue
		}
		withArgs = withArgs || ev.Type == approval.EventRequested
		if !seen[ev.RequestID] {
			seen[ev.RequestID] = true
			ids = append(ids, string(ev.RequestID))
		}
	}
	out := make(map[approval.ID]*approval.Request, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := `NULL, 'null'` // arguments and display_warnings as a row without them stores them
	if withArgs {
		args = `arguments, display_warnings`
	}
	marks, vals := inList(ids)
	rows, err := q.query(ctx, `SELECT `+auditRequestColumns+args+` FROM requests WHERE id IN (`+marks+`)`, vals...)
	rs, err := collect(rows, err, newAuditRequestScanner().scan)
	if err != nil {
		return nil, fmt.Errorf("read the requests of events: %w", err)
	}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out, nil
}

// An auditRequestScanner scans the rows of auditRequests' select list into
// one row it keeps, through destinations made once for all the rows of a
// read (a row and its destinations made for each were ≈ 0.8 KB per
// approval on Postgres: pgalloc43).
type auditRequestScanner struct {
	w    requestRow
	dest []any
}

func newAuditRequestScanner() *auditRequestScanner {
	s := new(auditRequestScanner)
	w := &s.w
	s.dest = []any{&w.id, &w.requestedBy, &w.onBehalfOf, &w.tenant, &w.kind, &w.server, &w.tool, &w.rule,
		&w.argumentsHash, &w.reviews, &w.reason, &w.dispatchOutcome, &w.arguments, &w.displayWarnings}
	return s
}

// scan reads the current row of rows and returns its request, decoded as
// every read decodes one; the columns not read are zero.
func (s *auditRequestScanner) scan(rows *sql.Rows) (*approval.Request, error) {
	s.w = requestRow{approvers: "null"} // approvers is not read: decode gives nil
	if err := rows.Scan(s.dest...); err != nil {
		return nil, err
	}
	r, err := s.w.decode()
	if err != nil {
		return nil, err
	}
	return &r, nil
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
