package sqlstore

import (
	"context"

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
		evs, next, err := f.db.Feed(ctx, f.cur, watchPage)
		if err != nil {
			return err
		}
		f.cur = next
		if len(evs) > 0 {
			w.appended()
		}
		seen := make(map[approval.ID]bool, len(evs))
		policy := false
		for _, ev := range evs {
			policy = policy || ev.Type == store.EventPolicyChanged
			// A request's creation changes nothing anyone waits on: a
			// waiter starts from the created request.
			if ev.RequestID != "" && ev.Type != approval.EventRequested && !seen[ev.RequestID] {
				seen[ev.RequestID] = true
				w.changed(ev.RequestID)
			}
		}
		if policy && w.policy != nil {
			w.policy()
		}
		if len(evs) < watchPage {
			return nil
		}
	}
}
