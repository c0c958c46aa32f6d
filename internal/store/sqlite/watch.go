package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// DefaultWatchInterval is the poll interval of Watch when it is given 0.
const DefaultWatchInterval = 250 * time.Millisecond

// Watch calls changed whenever another connection, in this process or
// another, may have committed to the database, until ctx is done. It polls
// PRAGMA data_version every interval (0 means DefaultWatchInterval) on one
// dedicated connection; that value changes when any other connection
// commits. changed is also called once after the first reading, and again
// after the connection had to be replaced, so a change made before Watch
// was watching is never missed; a spurious call must therefore be harmless
// (callers re-read the store). changed runs on Watch's goroutine and should
// return quickly. Poll errors are logged and the poll retried.
func (db *DB) Watch(ctx context.Context, interval time.Duration, changed func()) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var (
		conn    *sql.Conn
		last    int64
		seen    bool // last holds a reading from conn
		failing bool // the previous poll failed and was logged
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		v, err := db.dataVersion(ctx, &conn)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				db.log.WarnContext(ctx, "poll sqlite data_version", "err", err)
				failing = true
			}
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			seen = false
		default:
			if failing {
				db.log.InfoContext(ctx, "poll sqlite data_version recovered")
				failing = false
			}
			if !seen || v != last {
				last, seen = v, true
				changed()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dataVersion reads PRAGMA data_version on *conn, taking a connection from
// the pool first if *conn is nil.
func (db *DB) dataVersion(ctx context.Context, conn **sql.Conn) (int64, error) {
	if *conn == nil {
		c, err := db.sql.Conn(ctx)
		if err != nil {
			return 0, db.wrap("watch", err)
		}
		*conn = c
	}
	var v int64
	if err := (*conn).QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, db.wrap("watch", err)
	}
	return v, nil
}
