package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// The notification outbox (issue 14, migrations 0006 and 0007): deliveries
// are made from the event log behind a cursor, so the transactions that
// change requests carry no notification code at all, and an event is
// announced exactly once per channel however many instances fan out:
//
//   - FanOut is a durable consumer of the change feed
//     (store.FeedConsumerNotify, see consumeFeed): it moves its position
//     past a batch of events and inserts their delivery rows in the same
//     transaction, holding the position's row (Postgres: FOR UPDATE;
//     SQLite: the IMMEDIATE transaction). The feed never returns an event
//     while one before it can still commit (on Postgres event seqs do not
//     follow commit order), so none is ever skipped. UNIQUE (event_seq,
//     channel) holds it twice-safe besides.
//   - ClaimDeliveries leases due rows with a compare-and-set; Postgres
//     READ COMMITTED re-checks the WHERE of a row another transaction
//     updated first, so two instances never hold one lease.
//   - FinishDelivery records an attempt's outcome only while the lease is
//     still the caller's.

// deliveryColumns lists the deliveries columns in scanDelivery's order.
const deliveryColumns = `id, event_id, event_seq, channel, request_id, event_type, event_state, actor, event_at,
	state, attempts, next_at, lease_owner, lease_until, done_at, last_error`

func scanDelivery(rows *sql.Rows) (store.Delivery, error) {
	var (
		d                        store.Delivery
		eventAt, nextAt          int64
		leaseUntil, doneAt       sql.NullInt64
		requestID, typ, evtState string
		state                    string
	)
	err := rows.Scan(&d.ID, &d.EventID, &d.Event.Seq, &d.Channel, &requestID, &typ, &evtState, &d.Event.Actor, &eventAt,
		&state, &d.Attempts, &nextAt, &d.LeaseOwner, &leaseUntil, &doneAt, &d.LastError)
	d.Event.RequestID = approval.ID(requestID)
	d.Event.Type = approval.EventType(typ)
	d.Event.State = approval.State(evtState)
	d.Event.At = fromMillis(eventAt)
	d.State = store.DeliveryState(state)
	d.NextAt = fromMillis(nextAt)
	d.LeaseUntil = fromNullMillis(leaseUntil)
	d.DoneAt = fromNullMillis(doneAt)
	return d, err
}

// FanOut reads up to limit (0 means 100) events past the outbox's position
// in the change feed, in feed order, and for each request event whose request still exists calls
// match with the event and the request as stored now; it inserts one
// pending delivery, due at now, for each channel name match returns, all
// sharing one event id from newID, and moves the position past the last event
// read, in one transaction. Events of sessions and policy revisions are
// passed over. match and newID may run more than once (the transaction may
// be retried) and must have no side effects. A channel name match returns
// twice for one event makes one row.
func (db *DB) FanOut(ctx context.Context, limit int, now time.Time, match func(approval.Event, approval.Request) []string, newID func() (string, error)) (store.FanOutResult, error) {
	// A read first, so an idle outbox never takes the write lock.
	if waiting, err := db.feedWaiting(ctx, store.FeedConsumerNotify); err != nil {
		return store.FanOutResult{}, db.wrap("fan out events", err)
	} else if !waiting {
		return store.FanOutResult{}, nil
	}
	var res store.FanOutResult
	err := db.inTx(ctx, func(t *tx) error {
		res = store.FanOutResult{}
		var err error
		res.Events, res.More, err = t.consumeFeed(ctx, store.FeedConsumerNotify, limit, now, func(evs []approval.Event) error {
			n, err := t.insertDeliveries(ctx, evs, now, match, newID)
			res.Deliveries = n
			return err
		})
		return err
	})
	if err != nil {
		return store.FanOutResult{}, db.wrap("fan out events", err)
	}
	return res, nil
}

// insertDeliveries inserts, inside t, the delivery rows of evs (see
// FanOut) and returns how many it made.
func (t *tx) insertDeliveries(ctx context.Context, evs []approval.Event, now time.Time, match func(approval.Event, approval.Request) []string, newID func() (string, error)) (int, error) {
	reqs, err := t.requestsByID(ctx, evs)
	if err != nil {
		return 0, err
	}
	made := 0
	for _, ev := range evs {
		r, ok := reqs[ev.RequestID]
		if !ok {
			continue // not a request event, or the request was removed
		}
		channels := match(ev, r)
		if len(channels) == 0 {
			continue
		}
		id, err := newID()
		if err != nil {
			return made, err
		}
		for _, ch := range channels {
			n, err := t.exec(ctx, `INSERT INTO deliveries (event_id, event_seq, channel, request_id, event_type, event_state, actor, event_at,
					state, attempts, next_at, lease_owner, last_error)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, '', '')
				ON CONFLICT (event_seq, channel) DO NOTHING`,
				id, ev.Seq, ch, string(ev.RequestID), string(ev.Type), string(ev.State), ev.Actor, millis(ev.At), now.UnixMilli())
			if err != nil {
				return made, fmt.Errorf("insert delivery of event %d on %s: %w", ev.Seq, ch, err)
			}
			if k, err := n.RowsAffected(); err == nil {
				made += int(k)
			}
		}
	}
	return made, nil
}

// requestsByID reads the requests the request events of evs name.
func (t *tx) requestsByID(ctx context.Context, evs []approval.Event) (map[approval.ID]approval.Request, error) {
	return requestsByID(ctx, t, evs)
}

// requestsByID reads, through q, the requests the request events of evs
// name.
func requestsByID(ctx context.Context, q querier, evs []approval.Event) (map[approval.ID]approval.Request, error) {
	var ids []any
	seen := map[approval.ID]bool{}
	for _, ev := range evs {
		if ev.RequestID != "" && !seen[ev.RequestID] {
			seen[ev.RequestID] = true
			ids = append(ids, string(ev.RequestID))
		}
	}
	out := make(map[approval.ID]approval.Request, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	marks, args := inList(ids)
	rows, err := q.query(ctx, `SELECT `+requestSelect+` FROM requests WHERE id IN (`+marks+`)`, args...)
	rs, err := collect(rows, err, scanRequest)
	if err != nil {
		return nil, fmt.Errorf("read the requests of events: %w", err)
	}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out, nil
}

// claimable is the condition on deliveries d that may be attempted at ?
// (the same time twice): pending, due, not leased (or the lease lapsed),
// and no earlier event of the same request still pending on the same
// channel, so each request's events reach a channel in order (a Slack
// message is posted before it is updated).
const claimable = `d.state = 'pending' AND d.next_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
	AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.request_id = d.request_id AND e.channel = d.channel
		AND e.state = 'pending' AND e.event_seq < d.event_seq)`

// claimDelivery leases one claimable delivery (owner, lease end, id, now
// in unix ms): a compare-and-set on its state (unindexedState: the row is
// found by its id) and lease.
const claimDelivery = `UPDATE deliveries SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
	WHERE id = ? AND ` + unindexedState + ` = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`

// finishDelivery reads the request and channel of delivery id while owner
// (the second argument) holds its lease, the state compared through
// unindexedState as in claimDelivery; FinishDelivery locks it.
const finishDelivery = `SELECT request_id, channel FROM deliveries WHERE id = ? AND ` + unindexedState + ` = 'pending' AND lease_owner = ?`

// ClaimDeliveries leases to owner, until leaseUntil, up to limit (0 means
// 100) deliveries that can be attempted at now, most overdue first, counting
// one more attempt on each, and returns them as leased. A row another
// instance claims first is left to it (a compare-and-set on the lease).
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil time.Time, limit int) ([]store.Delivery, error) {
	if owner == "" {
		return nil, errors.New("claim deliveries: empty owner")
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	ms := now.UnixMilli()
	// A read first, so an idle outbox never takes the write lock.
	var due int
	err := db.queryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM deliveries d WHERE `+claimable+` LIMIT 1) AS w`, ms, ms).Scan(&due)
	if err != nil {
		return nil, db.wrap("claim deliveries", err)
	}
	if due == 0 {
		return nil, nil
	}
	var out []store.Delivery
	err = db.inTx(ctx, func(t *tx) error {
		out = nil
		rows, err := t.query(ctx, `SELECT `+prefixed("d.", deliveryColumns)+` FROM deliveries d
			WHERE `+claimable+` ORDER BY d.next_at, d.id LIMIT ?`, ms, ms, limit)
		ds, err := collect(rows, err, scanDelivery)
		if err != nil {
			return err
		}
		for _, d := range ds {
			res, err := t.exec(ctx, claimDelivery, owner, leaseUntil.UnixMilli(), d.ID, ms)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				d.LeaseOwner, d.LeaseUntil, d.Attempts = owner, store.Millis(leaseUntil), d.Attempts+1
				out = append(out, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, db.wrap("claim deliveries", err)
	}
	return out, nil
}

// renewDelivery extends the lease of delivery id (the second argument)
// while owner (the third) holds it, the state compared through
// unindexedState as in claimDelivery.
const renewDelivery = `UPDATE deliveries SET lease_until = ? WHERE id = ? AND ` + unindexedState + ` = 'pending' AND lease_owner = ?`

// RenewDelivery extends owner's lease on delivery id until leaseUntil
// (unix milliseconds stored, like ClaimDeliveries'): the outbox renews a
// short lease while its attempt is under way, so a lease whose holder died
// lapses soon (branch revise38). The lease may have lapsed already, as
// long as nobody claimed it meanwhile. If owner no longer holds it (another
// instance claimed the delivery, or it was finished) nothing is written
// and the error wraps store.ErrConflict.
func (db *DB) RenewDelivery(ctx context.Context, id int64, owner string, leaseUntil time.Time) error {
	var n int64
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, renewDelivery, leaseUntil.UnixMilli(), id, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return db.wrap(fmt.Sprintf("renew delivery %d", id), err)
	}
	if n == 0 {
		return fmt.Errorf("renew delivery %d: not leased to %s: %w", id, owner, store.ErrConflict)
	}
	return nil
}

// NextDelivery returns when the earliest pending delivery could next be
// claimed (its NextAt, or the end of a lease held on it), ignoring those
// waiting behind an earlier event of their request; ok is false when there
// is none.
func (db *DB) NextDelivery(ctx context.Context) (at time.Time, ok bool, err error) {
	var next sql.NullInt64
	err = db.queryRow(ctx, `SELECT MIN(CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > d.next_at THEN d.lease_until ELSE d.next_at END)
		FROM deliveries d WHERE d.state = 'pending'
		AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.request_id = d.request_id AND e.channel = d.channel
			AND e.state = 'pending' AND e.event_seq < d.event_seq)`).Scan(&next)
	if err != nil {
		return time.Time{}, false, db.wrap("next delivery", err)
	}
	return fromNullMillis(next), next.Valid, nil
}

// FinishDelivery records the outcome of an attempt on delivery id by owner
// and releases the lease: final (delivered or failed, at res.At) or pending
// again until res.NextAt. With res.Ref set it also keeps the channel's
// message for the request, in the same transaction. If owner no longer
// holds the lease (it lapsed and another instance claimed the delivery, or
// it is final) nothing is written and the error wraps store.ErrConflict.
func (db *DB) FinishDelivery(ctx context.Context, id int64, owner string, res store.DeliveryResult) error {
	switch res.State {
	case store.DeliveryDelivered, store.DeliveryFailed, store.DeliveryPending:
	default:
		return fmt.Errorf("finish delivery %d: state %q", id, res.State)
	}
	var done sql.NullInt64
	if res.State != store.DeliveryPending {
		done = nullMillis(res.At)
		if !done.Valid {
			return fmt.Errorf("finish delivery %d: a final result needs its time", id)
		}
	}
	err := db.inTx(ctx, func(t *tx) error {
		var requestID, channel string
		err := t.queryRow(ctx, finishDelivery+t.forUpdate(), id, owner).Scan(&requestID, &channel)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delivery %d is not leased to %s: %w", id, owner, store.ErrConflict)
		} else if err != nil {
			return err
		}
		if _, err := t.exec(ctx, `UPDATE deliveries SET state = ?, next_at = ?, done_at = ?, last_error = ?, lease_owner = '', lease_until = NULL
			WHERE id = ?`, string(res.State), max(millis(res.NextAt), 0), done, res.Error, id); err != nil {
			return err
		}
		if res.Ref == "" {
			return nil
		}
		_, err = t.exec(ctx, `INSERT INTO notify_messages (request_id, channel, ref, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (request_id, channel) DO UPDATE SET ref = excluded.ref`, requestID, channel, res.Ref, millis(res.At))
		return err
	})
	if err != nil {
		return db.wrap(fmt.Sprintf("finish delivery %d", id), err)
	}
	return nil
}

// MessageRef returns the message kept for request id on channel (see
// FinishDelivery), or an error wrapping store.ErrNotFound.
func (db *DB) MessageRef(ctx context.Context, id approval.ID, channel string) (string, error) {
	var ref string
	err := db.queryRow(ctx, `SELECT ref FROM notify_messages WHERE request_id = ? AND channel = ?`, string(id), channel).Scan(&ref)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return "", db.wrap("message of "+string(id)+" on "+channel, err)
	}
	return ref, nil
}

// Deliveries returns the deliveries with ID > after, on channel when it is
// not empty, in ID order, at most limit (0 means 100).
func (db *DB) Deliveries(ctx context.Context, channel string, after int64, limit int) ([]store.Delivery, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	q, args := `SELECT `+deliveryColumns+` FROM deliveries WHERE id > ?`, []any{after}
	if channel != "" {
		q += ` AND channel = ?`
		args = append(args, channel)
	}
	rows, err := db.query(ctx, q+` ORDER BY id LIMIT ?`, append(args, limit)...)
	ds, err := collect(rows, err, scanDelivery)
	if err != nil {
		return nil, db.wrap("list deliveries", err)
	}
	return ds, nil
}

// prefixed returns the comma-separated column list cols with each name
// prefixed by p (a table alias and a dot).
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
