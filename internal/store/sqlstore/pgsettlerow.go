package sqlstore

import (
	"context"
	"fmt"
)

// Two writes on Postgres send their commit in their only round trip:
// pgCreate's pipeline (BEGIN … COMMIT) and RecordOutcome's one statement
// (committed at its Sync). A transaction id read in that round trip is lost
// with its answer, so pgSettle cannot ask txid_status. pgSettleWritten
// settles them by what they wrote instead (docs/architecture.md, "A commit
// whose answer was lost").

// pgSettleWritten learns whether a write whose only round trip carried its
// commit committed, after that round trip's answer was lost with error lost
// on the connection of server process pid (serverPID; 0: unknown). written asks
// a fresh connection of the main pool whether the write's rows stand as it
// wrote them. It returns nil when they do, lost (wrapped) when they do not
// and the writer's server process has ended, and an error wrapping
// store.ErrInDoubt and store.ErrUnavailable when Postgres cannot be asked,
// or the writer's process still runs after settleTimeout (it asks again
// from 1 ms doubling to 100 ms).
//
// It cannot report a commit that did not happen: a row written by a
// transaction is visible to another session only once that transaction
// committed, and written matches only values this write chose (its
// request id and creation, or its own event's actor and millisecond). It
// cannot report as failed a write that commits later: a transaction still
// running, or not yet begun (its messages still unread by the server),
// belongs to a live server process, and "absent" counts only when the
// process was gone before the read that did not find the rows (the read's
// snapshot is taken after the process check, so it sees whatever that
// process committed). pid is the id the server answered when the
// connection was made (serverPID), not the startup's key, which a pooler
// makes up and which would read as gone; an unknown pid (0) reads as
// running, so such a write ends in doubt, never reported failed while it
// may stand.
func (db *DB) pgSettleWritten(ctx context.Context, pid uint32, lost error, written func(context.Context) (bool, error)) error {
	return db.settle(ctx, lost, "server process still runs", func(sctx context.Context) (bool, error) {
		alive := true
		err := db.sql.QueryRowContext(sctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int64(pid)).Scan(&alive)
		alive = alive || pid == 0 // no pid: the writer's end cannot be seen
		var found bool
		if err == nil {
			found, err = written(sctx)
		}
		switch {
		case err != nil:
			return true, db.unreadable(ctx, lost, err)
		case found:
			db.log.InfoContext(ctx, "a commit's answer was lost; its rows stand", "err", lost)
			return true, nil
		case !alive:
			return true, fmt.Errorf("commit: %w", lost)
		}
		return false, nil
	})
}
