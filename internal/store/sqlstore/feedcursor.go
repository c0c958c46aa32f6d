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

// Durable consumers of the change feed (migration 0007, table
// feed_cursors): a consumer that turns events into rows of its own (the
// notification outbox's deliveries; the audit chain) keeps its position in
// the store and moves it only in the transaction that writes those rows, so
// what it wrote and where it stands commit together. There are two ways to
// do that: consumeFeed reads and applies inside one transaction; a consumer
// with costly work per event (the audit chain encodes and hashes) reads
// with Feed outside a transaction, builds, and then writes in a short one
// with moveFeed, which refuses when the position moved meanwhile (another
// instance consumed those events), so it reads again. Either way the rows
// come from Feed's query, so a consumer never passes an event that commits
// later (see store.Store.Feed). To add a consumer: insert its feed_cursors
// row in a migration (at the end of the feed, '<tx>.<seq>' of the newest
// event, or at the start, '0.0', to read the whole log) and call
// consumeFeed or moveFeed from the store method that applies its events.
// Prune keeps every event a live consumer has not passed (see pruneStop).

// FeedPosition returns where durable consumer (store.FeedConsumerNotify,
// …) stands in the change feed and when it last moved; an error wrapping
// store.ErrNotFound for an unknown consumer.
func (db *DB) FeedPosition(ctx context.Context, consumer string) (store.Cursor, time.Time, error) {
	var (
		pos   string
		moved int64
	)
	err := db.queryRow(ctx, `SELECT position, moved_at FROM feed_cursors WHERE consumer = ?`, consumer).Scan(&pos, &moved)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Cursor{}, time.Time{}, db.wrap("feed position of "+consumer, err)
	}
	c, err := store.ParseCursor(pos)
	if err != nil {
		return store.Cursor{}, time.Time{}, fmt.Errorf("feed position of %s: %w", consumer, err)
	}
	return c, fromMillis(moved), nil
}

// feedWaiting reports, without a transaction, whether the feed has an
// event past consumer's position: so an idle consumer never takes the write
// lock.
func (db *DB) feedWaiting(ctx context.Context, consumer string) (bool, error) {
	pos, _, err := db.FeedPosition(ctx, consumer)
	if err != nil {
		return false, err
	}
	evs, _, err := db.Feed(ctx, pos, 1)
	return len(evs) > 0, err
}

// consumeFeed reads, inside t, at most limit (0 means 100) events after
// consumer's position in feed order, holding its feed_cursors row until t
// ends (Postgres: FOR UPDATE; SQLite: the IMMEDIATE transaction), so two
// instances never consume the same events; calls apply with them (not
// when there are none); and when apply returns nil moves the position past
// the last one, stamped now. apply writes its rows through t: they commit
// with the move or not at all. more is true when the batch was full.
func (t *tx) consumeFeed(ctx context.Context, consumer string, limit int, now time.Time, apply func([]approval.Event) error) (n int, more bool, err error) {
	var pos string
	err = t.queryRow(ctx, `SELECT position FROM feed_cursors WHERE consumer = ?`+t.forUpdate(), consumer).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("feed consumer %s: %w", consumer, store.ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the feed position of %s: %w", consumer, err)
	}
	after, err := store.ParseCursor(pos)
	if err != nil {
		return 0, false, fmt.Errorf("feed position of %s: %w", consumer, err)
	}
	limit = feedLimit(limit)
	q, args := t.d.feedQuery(eventColumns, after, limit)
	rows, err := t.query(ctx, q, args...)
	fevs, err := collectFeed(rows, err)
	if err != nil {
		return 0, false, fmt.Errorf("read the change feed for %s: %w", consumer, err)
	}
	if len(fevs) == 0 {
		return 0, false, nil
	}
	if err := apply(feedEvents(fevs)); err != nil {
		return 0, false, err
	}
	if _, err := t.exec(ctx, `UPDATE feed_cursors SET position = ?, moved_at = ? WHERE consumer = ?`,
		feedEnd(fevs, after).String(), now.UnixMilli(), consumer); err != nil {
		return 0, false, fmt.Errorf("move the feed position of %s: %w", consumer, err)
	}
	return len(fevs), len(fevs) == limit, nil
}

// errFeedMoved: a durable consumer's position is not where moveFeed was
// told it is (another instance consumed meanwhile).
var errFeedMoved = errors.New("the feed position moved")

// moveFeed moves consumer's position from from to to, stamped now, inside
// t, holding its feed_cursors row until t ends (Postgres: FOR UPDATE;
// SQLite: the IMMEDIATE transaction). It returns an error wrapping
// errFeedMoved, and moves nothing, when the position is not from: the
// caller read the events from from with Feed and must not apply them. When
// to equals from it only checks.
func (t *tx) moveFeed(ctx context.Context, consumer string, from, to store.Cursor, now time.Time) error {
	var pos string
	err := t.queryRow(ctx, `SELECT position FROM feed_cursors WHERE consumer = ?`+t.forUpdate(), consumer).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("feed consumer %s: %w", consumer, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read the feed position of %s: %w", consumer, err)
	}
	cur, err := store.ParseCursor(pos)
	if err != nil {
		return fmt.Errorf("feed position of %s: %w", consumer, err)
	}
	if cur != from {
		return fmt.Errorf("feed consumer %s at %v, not %v: %w", consumer, cur, from, errFeedMoved)
	}
	if to == from {
		return nil
	}
	if _, err := t.exec(ctx, `UPDATE feed_cursors SET position = ?, moved_at = ? WHERE consumer = ?`,
		to.String(), now.UnixMilli(), consumer); err != nil {
		return fmt.Errorf("move the feed position of %s: %w", consumer, err)
	}
	return nil
}

// pruneStop returns the position of the durable consumer furthest behind
// among those that moved at or after since (a consumer that has not moved
// since then is taken as gone: notifications turned off, say), and whether
// there is one: Prune deletes no event after it.
func (db *DB) pruneStop(ctx context.Context, since time.Time) (store.Cursor, bool, error) {
	rows, err := db.query(ctx, `SELECT position FROM feed_cursors WHERE moved_at >= ?`, since.UnixMilli())
	ps, err := collect(rows, err, func(rows *sql.Rows) (string, error) {
		var s string
		return s, rows.Scan(&s)
	})
	if err != nil {
		return store.Cursor{}, false, fmt.Errorf("read feed positions: %w", err)
	}
	var (
		stop  store.Cursor
		found bool
	)
	for _, s := range ps {
		c, err := store.ParseCursor(s)
		if err != nil {
			return store.Cursor{}, false, fmt.Errorf("feed position: %w", err)
		}
		if !found || c.Before(stop) {
			stop, found = c, true
		}
	}
	return stop, found, nil
}
