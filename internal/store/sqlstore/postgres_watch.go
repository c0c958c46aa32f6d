package sqlstore

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/approval"
)

// WatchApplicationName is the application_name of Watch's dedicated
// connection, as pg_stat_activity shows it.
const WatchApplicationName = "toolgate-watch"

// Reconnect backoff of Watch: the first retry waits minBackoff, each failed
// one doubles the wait, up to maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// watch LISTENs on Channel (and on PolicyChannel, reported as policy(),
// as is each new LISTEN) on one dedicated connection of its own, opened
// with pgx.Connect outside the pool (application_name
// WatchApplicationName), reconnecting with a backoff from 100 ms doubling
// to 5 s and logging a warning; it calls changed(id) and appended() for
// each notification, and reads the change feed from its place after each
// (re)connection and every poll (the safety poll), one call at a time (see
// DB.Watch). A notification of a request's creation calls appended() only,
// as the feed's reading does (parseNotification).
func (d *postgresDialect) watch(ctx context.Context, db *DB, w watchFuncs) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex // serializes changed and guards feed
		wg   sync.WaitGroup
		feed = follower{db: db}
	)
	call := func(id approval.ID, created, released bool) {
		mu.Lock()
		defer mu.Unlock()
		if id == policyNotice || id == policyListening {
			if w.policy != nil {
				w.policy()
			}
			if id == policyNotice {
				w.appended() // the revision's policy_changed event
			}
			return
		}
		if !created {
			w.changed(id)
		}
		if !released { // a release's notification: the log did not grow (releaseNotice)
			w.appended()
		}
	}
	catchUp := func() error {
		mu.Lock()
		defer mu.Unlock()
		err := feed.sync(ctx, w)
		if err != nil && ctx.Err() == nil {
			db.log.WarnContext(ctx, "read postgres change feed; retrying", "err", err)
		}
		return err
	}
	wg.Go(func() {
		tick := time.NewTicker(d.poll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = catchUp() // logged; the next poll tries again
			}
		}
	})
	d.listenLoop(ctx, db, call, catchUp)
	cancel()
	wg.Wait()
}

// listenLoop runs listenOnce until ctx is done, waiting with backoff
// between attempts.
func (d *postgresDialect) listenLoop(ctx context.Context, db *DB, call func(id approval.ID, created, released bool), catchUp func() error) {
	backoff := minBackoff
	failing := false // the last connection attempt failed and was logged
	for {
		connected, err := d.listenOnce(ctx, db, call, catchUp)
		if ctx.Err() != nil {
			return
		}
		switch {
		case connected:
			backoff = minBackoff
			failing = false
			db.log.WarnContext(ctx, "postgres listen connection lost; reconnecting", "err", err)
		case !failing:
			failing = true
			db.log.WarnContext(ctx, "postgres listen connection failed; retrying", "err", err, "backoff", backoff)
		default:
			db.log.DebugContext(ctx, "postgres listen connection failed; retrying", "err", err, "backoff", backoff)
		}
		wait := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// listenOnce connects, LISTENs on Channel, catches up with the change feed
// (what changed while it was not listening) and then calls call(id,
// created, released) for each notification until the connection fails or ctx is done. It reports
// whether it got as far as listening.
func (d *postgresDialect) listenOnce(ctx context.Context, db *DB, call func(id approval.ID, created, released bool), catchUp func() error) (connected bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, d.listen.Copy())
	if err != nil {
		return false, db.wrap("watch: connect", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{Channel}.Sanitize()+`; LISTEN `+pgx.Identifier{PolicyChannel}.Sanitize()); err != nil {
		return false, db.wrap("watch: listen", err)
	}
	// Every transaction that committed before the LISTEN has an xid below
	// this xmax. The feed shows its events only once every older
	// transaction on the server has ended (feedSafe), so one still open
	// elsewhere can hide them from the catch-up below: catchUpPast reads
	// the feed again once none is.
	var horizon string
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&horizon); err != nil {
		return false, db.wrap("watch: read the snapshot", err)
	}
	// A revision committed before the LISTEN sent no notification this
	// connection saw: the policy's follower reads the current one now.
	call(policyListening, false, false)
	_ = catchUp() // logged; catchUpPast reads again until a read succeeds
	// catchUpPast ends with this connection: its query too, so that a
	// reconnection never waits for a pool connection or a hung server.
	pastCtx, stopPast := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { d.catchUpPast(pastCtx, db, horizon, catchUp) })
	defer func() { stopPast(); wg.Wait() }()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, db.wrap("watch: wait for notification", err)
		}
		if n.Channel == PolicyChannel {
			call(policyNotice, false, false)
			continue
		}
		if n.Channel != Channel {
			continue
		}
		if id, ok := parseRelease(n.Payload); ok {
			call(id, false, true)
			continue
		}
		id, created := parseNotification(n.Payload)
		call(id, created, false)
	}
}

// catchUpPast calls catchUp once every transaction older than horizon
// (an xid8) has ended on the server, checking after minBackoff, doubling
// up to the safety poll, until ctx ends (listenOnce ends it with its
// connection). Without it, a decision committed while the listening
// connection was down, and hidden from the reconnection's catch-up by an
// older transaction still open elsewhere, waited for the safety poll (an
// hour in the tests: never seen). A read that fails (the snapshot's or the
// catch-up's) is tried again on the same schedule until one succeeds: a
// pool connection that died with the listening one, or a failover, left
// the decision to the safety poll (attack17).
func (d *postgresDialect) catchUpPast(ctx context.Context, db *DB, horizon string, catchUp func() error) {
	wait := minBackoff
	for {
		var past bool
		err := db.sql.QueryRowContext(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8`, horizon).Scan(&past)
		if err == nil && past && catchUp() == nil {
			if d.caughtUpPast != nil {
				d.caughtUpPast()
			}
			return
		}
		if err != nil && ctx.Err() == nil {
			db.log.DebugContext(ctx, "watch: read the snapshot after a reconnection; retrying", "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, d.poll)
	}
}

// policyNotice is the id listenOnce passes to call for a notification on
// PolicyChannel: no request has it (ids are UUIDs), and call turns it into
// policy() and appended().
const policyNotice approval.ID = "policy revision"

// policyListening is the id listenOnce passes to call once it listens:
// call turns it into policy() alone.
const policyListening approval.ID = "policy listening"

// parseNotification reads a payload on Channel, "<id> <state> <type>"
// (postgresDialect.notices): the request's id, and whether the
// notification is of its creation alone (type "requested"). A creation
// changes nothing a waiter waits on: a held call subscribes and then reads
// its request after creating it, so waking it on its own creation only
// makes it read a row it has just read (at 10,000 held calls, 0.4–0.6
// short-lived goroutines per held call at the end of a burst:
// docs/performance.md, "heldpeak"). Any later event, a decision landing
// between the creation and that read included, comes in a notification
// of its own with its own type. A payload of another form (an older
// instance's "<id> <state>", the outcome's "<id> consumed") is a change.
func parseNotification(payload string) (id approval.ID, created bool) {
	head, typ, ok := strings.Cut(payload, " ")
	if ok {
		_, typ, ok = strings.Cut(typ, " ")
	}
	return approval.ID(head), ok && typ == string(approval.EventRequested)
}
