package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"toolgate/internal/approval"
)

// A Cursor is a position in the change feed (Store.Feed): the position of
// the last event a reader has seen. The zero Cursor is the start of the
// log. Feed order is (Tx, Seq): Tx orders the writing transactions
// (Postgres: the transaction id, pg_current_xact_id(), of the transaction
// that wrote the event; SQLite, where one transaction writes at a time and
// Seq follows commit order: always 0), and Seq orders the events of one
// transaction. Store a cursor as its String and read it back with
// ParseCursor.
type Cursor struct {
	Tx  uint64
	Seq int64
}

// String returns c as "<tx>.<seq>", the form ParseCursor reads.
func (c Cursor) String() string {
	return strconv.FormatUint(c.Tx, 10) + "." + strconv.FormatInt(c.Seq, 10)
}

// Before reports whether c comes before d in feed order.
func (c Cursor) Before(d Cursor) bool {
	return c.Tx < d.Tx || (c.Tx == d.Tx && c.Seq < d.Seq)
}

// ParseCursor reads the String form of a Cursor; "" is the zero Cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	txs, seqs, ok := strings.Cut(s, ".")
	tx, err1 := strconv.ParseUint(txs, 10, 64)
	seq, err2 := strconv.ParseInt(seqs, 10, 64)
	if !ok || err1 != nil || err2 != nil || seq < 0 {
		return Cursor{}, fmt.Errorf("store: bad cursor %q: want <tx>.<seq>", s)
	}
	return Cursor{Tx: tx, Seq: seq}, nil
}

// Durable consumers of the change feed: readers that turn events into
// rows of their own keep their position in the store (one row each,
// created by the migration that introduced them) and move it only in the
// transaction that writes those rows, so a crash or a second instance
// never skips or repeats an event (sqlstore's consumeFeed; read a
// position with sqlstore.DB.FeedPosition). Retention keeps every event a
// live consumer has not passed. Readers that keep their place in memory
// (the gate's wake-ups, a live event stream) use Store.Feed and
// Store.FeedEnd, or FollowFeed.
const (
	// FeedConsumerNotify is the notification outbox's fan-out
	// (sqlstore.DB.FanOut).
	FeedConsumerNotify = "notify"
)

// A FeedReader reads the change feed; every Store is one.
type FeedReader interface {
	Feed(ctx context.Context, after Cursor, limit int) ([]approval.Event, Cursor, error)
}

// FollowFeed reads r's change feed after from, page events at a time (0
// means 100), passing each non-empty page to fn in feed order, until it
// reaches what can be read now; it returns the position after the last
// page fn accepted. When fn or a read fails it stops and returns that
// position with the error, so the caller resumes there and misses
// nothing.
func FollowFeed(ctx context.Context, r FeedReader, from Cursor, page int, fn func([]approval.Event) error) (Cursor, error) {
	if page <= 0 {
		page = 100
	}
	for {
		evs, next, err := r.Feed(ctx, from, page)
		if err != nil {
			return from, err
		}
		if len(evs) == 0 {
			return from, nil
		}
		if err := fn(evs); err != nil {
			return from, err
		}
		from = next
		if len(evs) < page {
			return from, nil
		}
	}
}
