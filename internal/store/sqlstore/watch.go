package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// watchPage is how many events Watch reads from the feed per query.
const watchPage = 500

// watchFuncs are the callbacks of DB.WatchLog.
type watchFuncs struct {
	changed  func(approval.ID)
	appended func()
	// touched, when not nil, is called on SQLite after any commit of
	// another connection, once its events were reported, from a goroutine
	// of its own (touchWorker, DB.WatchLogTouched).
	touched func()
	// policy, when not nil, is called like changed when a deployment policy
	// revision may have been committed (WatchFuncs.Policy).
	policy func()
}

// A follower keeps Watch's place in the change feed and turns the events
// it reads into changed(id) calls, one per request per page.
type follower struct {
	db  *DB
	cur store.Cursor
	ok  bool // cur holds a position read from the database
}

// sync brings the follower up to date. The first successful call takes the
// end of the feed as its position and calls changed("") (whatever changed
// before is re-read by the caller); later calls read the feed from the
// position on and call changed(id) for each request with new events other
// than its creation, appended() after a page with any event, and policy()
// after a page with a policy_changed event. On an
// error the position stays where it was, so the next call catches up:
// nothing is missed across failures.
func (f *follower) sync(ctx context.Context, w watchFuncs) error {
	if !f.ok {
		c, err := f.db.FeedEnd(ctx)
		if err != nil {
			return err
		}
		f.cur, f.ok = c, true
		w.changed("")
		return nil
	}
	for {
		n, err := f.page(ctx, w)
		if err != nil {
			return err
		}
		if n < watchPage {
			return nil
		}
	}
}

// watchColumns are the columns of the feed the follower reads: an event's
// position, request and type, no more (Feed's eventColumns are decoded
// whole for every event; the watch uses these three).
const watchColumns = `seq, COALESCE(request_id, ''), type`

// page reads one page of at most watchPage events after f.cur and makes
// its calls (see sync); it returns how many events the page had. The
// position moves only once the whole page was read.
func (f *follower) page(ctx context.Context, w watchFuncs) (int, error) {
	q, args := f.db.d.feedQuery(watchColumns, f.cur, watchPage)
	rows, err := f.db.query(ctx, q, args...)
	if err != nil {
		return 0, f.db.wrap("read change feed", err)
	}
	defer func() { _ = rows.Close() }()
	var (
		n       int
		next    = f.cur
		changed []approval.ID // in feed order, each request once
		seen    = make(map[string]bool)
		policy  bool
		// the scan's buffers: valid until the next row, copied only for
		// a request not seen yet
		seq        int64
		id, typ, x sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &id, &typ, &x); err != nil {
			return 0, f.db.wrap("read change feed", err)
		}
		n++
		next.Seq = seq
		if next.Tx, err = strconv.ParseUint(string(x), 10, 64); err != nil {
			return 0, f.db.wrap("read change feed", fmt.Errorf("event %d: transaction id %q: %w", seq, x, err))
		}
		policy = policy || string(typ) == string(store.EventPolicyChanged)
		// A request's creation changes nothing anyone waits on: a waiter
		// starts from the created request.
		if len(id) > 0 && string(typ) != string(approval.EventRequested) && !seen[string(id)] {
			seen[string(id)] = true
			changed = append(changed, approval.ID(id))
		}
	}
	if err := rows.Err(); err != nil {
		return 0, f.db.wrap("read change feed", err)
	}
	if err := rows.Close(); err != nil {
		return 0, f.db.wrap("read change feed", err)
	}
	f.cur = next
	if n > 0 {
		w.appended()
	}
	for _, id := range changed {
		w.changed(id)
	}
	if policy && w.policy != nil {
		w.policy()
	}
	return n, nil
}
