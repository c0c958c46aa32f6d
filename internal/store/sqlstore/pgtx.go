package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"toolgate/internal/store"
)

// A write transaction of inTx on Postgres whose COMMIT was sent and whose
// answer was lost (the connection ended first, or the context ended while
// waiting for it) may have committed or not. Postgres knows which:
// txid_status(txid) (PG ≥ 10) answers "committed", "aborted" or "in
// progress" for a transaction id taken inside the transaction
// (txid_current()). pgTxOnce takes it in the round trip of BEGIN, and asks
// a fresh connection of the pool after such a loss (pgSettle)
// (docs/architecture.md, "A commit whose answer was lost").

// pgBegin begins a transaction of pgTxOnce, READ COMMITTED (see
// dialect.txOptions), and reads its transaction id, which it assigns: one
// simple-protocol message, one round trip, as BEGIN alone was.
const pgBegin = `BEGIN ISOLATION LEVEL READ COMMITTED; SELECT txid_current()`

// settleTimeout bounds pgSettle's questions after a lost COMMIT answer,
// whatever is left of the write's context (which may have ended: that can
// be why the answer was lost).
const settleTimeout = 2 * time.Second

// pgTxOnce is txOnce on Postgres: the transaction runs on one connection of
// on (a *sql.Conn), begun by pgBegin, its statements sent through
// database/sql as a *sql.Tx sends them, and ended by COMMIT or ROLLBACK
// sent by pgEnd. When COMMIT was sent and its answer lost (pgLostAnswer),
// the outcome is settled by pgSettle: nil when the transaction committed,
// the commit's error when it did not, an error wrapping store.ErrInDoubt
// (and store.ErrUnavailable) when Postgres cannot say.
func (db *DB) pgTxOnce(ctx context.Context, on *sql.DB, fn func(*tx) error) error {
	conn, err := on.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	closed := false
	release := func() {
		if !closed {
			closed = true
			_ = conn.Close()
		}
	}
	defer release()
	var xid int64
	if err := pgRaw(conn, func(pc *pgconn.PgConn) error {
		var err error
		xid, err = pgBeginXid(ctx, pc)
		return err
	}); err != nil {
		_ = pgEnd(ctx, conn, `ROLLBACK`) // a failed ROLLBACK closes the connection
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// A panicking fn must not keep its connection, and the row locks
		// its statements took, until ctx ends (which may be never).
		if p := recover(); p != nil {
			_ = pgEnd(ctx, conn, `ROLLBACK`) // a failed ROLLBACK closes the connection
			panic(p)
		}
	}()
	t := &tx{sql: conn, d: db.d, db: db}
	if err := fn(t); err != nil {
		_ = pgEnd(ctx, conn, `ROLLBACK`) // a failed ROLLBACK closes the connection
		return err
	}
	err = pgEnd(ctx, conn, `COMMIT`)
	if err == nil {
		db.pgNotify(t.notes)
		return nil
	}
	if !pgLostAnswer(err) {
		return fmt.Errorf("commit: %w", err)
	}
	// The connection was closed by pgEnd; give it back before asking the
	// pool for another (the lease pool has one).
	release()
	if err := db.pgSettle(ctx, on, xid, err); err != nil {
		return err
	}
	db.pgNotify(t.notes)
	return nil
}

// pgNotify hands ns, the notifications of a transaction that committed,
// to the store's notifier (pgNotifier), which sends them after the
// commit, never in it. Nothing on SQLite.
func (db *DB) pgNotify(ns []notice) {
	if pg, ok := db.d.(*postgresDialect); ok && len(ns) > 0 {
		pg.notes.notify(ns)
	}
}

// pgRaw runs f on the pgx connection under conn.
func pgRaw(conn *sql.Conn, f func(*pgconn.PgConn) error) error {
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres connection is a %T, not pgx's", dc)
		}
		return f(c.Conn().PgConn())
	})
}

// pgBeginXid sends pgBegin on pc and returns the transaction's id.
func pgBeginXid(ctx context.Context, pc *pgconn.PgConn) (int64, error) {
	res, err := pc.Exec(ctx, pgBegin).ReadAll()
	if err != nil {
		return 0, err
	}
	if len(res) != 2 || len(res[1].Rows) != 1 || len(res[1].Rows[0]) != 1 {
		return 0, fmt.Errorf("begin: %d results, want BEGIN's and one txid", len(res))
	}
	return strconv.ParseInt(string(res[1].Rows[0][0]), 10, 64)
}

// pgEnd sends end (COMMIT or ROLLBACK) on conn's connection and reads its
// answer: a COMMIT answered ROLLBACK (an earlier statement failed) is
// pgx.ErrTxCommitRollback. A ROLLBACK is not sent when ctx has ended or
// the connection is closed or outside a transaction. When end fails, or
// the connection is left inside a transaction, it is closed, so the pool
// destroys it instead of handing out a connection in an unknown state.
func pgEnd(ctx context.Context, conn *sql.Conn, end string) error {
	var err error
	rerr := pgRaw(conn, func(pc *pgconn.PgConn) error {
		if end == `COMMIT` || (ctx.Err() == nil && !pc.IsClosed() && pc.TxStatus() != 'I') {
			var res []*pgconn.Result
			res, err = pc.Exec(ctx, end).ReadAll()
			if err == nil && end == `COMMIT` && (len(res) != 1 || res[0].CommandTag.String() != `COMMIT`) {
				err = pgx.ErrTxCommitRollback
			}
		}
		if !pc.IsClosed() && (pc.TxStatus() != 'I' || (err != nil && !errors.Is(err, pgx.ErrTxCommitRollback))) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = pc.Close(cctx)
			cancel()
		}
		return nil
	})
	if err == nil {
		err = rerr
	}
	return err
}

// pgLostAnswer says whether err, the error of a COMMIT, leaves its outcome
// unknown: false when the server answered with an error (the transaction
// did not commit) or COMMIT answered ROLLBACK; true otherwise (the
// connection ended, a FATAL came in place of the answer, the context
// ended while waiting). pgconn.SafeToRetry does not tell a COMMIT that was
// never sent: a connection that broke while its answer was awaited is
// reported "conn closed", which it counts safe to retry (pgx v5.12).
func pgLostAnswer(err error) bool {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return false
	case errors.As(err, &pe):
		sev := pe.SeverityUnlocalized
		if sev == "" {
			sev = pe.Severity
		}
		return sev != "ERROR"
	}
	return true
}

// pgSettle learns the outcome of transaction xid, whose COMMIT's answer
// was lost with error lost, on a fresh connection of on: nil when it
// committed, lost (wrapped) when it aborted, and an error wrapping
// store.ErrInDoubt and store.ErrUnavailable when Postgres cannot be asked
// or still runs it (the server has not yet ended the old session's
// transaction) after settleTimeout. It asks again, from 1 ms doubling to
// 100 ms, while the transaction is in progress.
func (db *DB) pgSettle(ctx context.Context, on *sql.DB, xid int64, lost error) error {
	return db.settle(ctx, lost, "transaction is still running", func(sctx context.Context) (bool, error) {
		var status sql.NullString
		err := on.QueryRowContext(sctx, `SELECT txid_status($1)`, xid).Scan(&status)
		switch {
		case err != nil:
			return true, db.unreadable(ctx, lost, err)
		case status.String == "committed":
			db.log.InfoContext(ctx, "a commit's answer was lost; the transaction committed", "err", lost)
			return true, nil
		case status.String == "aborted":
			return true, fmt.Errorf("commit: %w", lost)
		case status.String != "in progress":
			return true, inDoubt(lost, fmt.Sprintf("transaction status %q", status.String))
		}
		return false, nil
	})
}

// settle asks ask, from 1 ms doubling to 100 ms, about a write whose
// COMMIT's answer was lost with error lost, until ask says it is settled
// (done, with the write's result) or settleTimeout has passed: then the
// result wraps store.ErrInDoubt and store.ErrUnavailable, saying that its
// still (what keeps the outcome unknown). ask's context is bounded by
// settleTimeout, whatever is left of ctx (which may have ended: that can
// be why the answer was lost). pgSettle and pgSettleWritten ask this way.
func (db *DB) settle(ctx context.Context, lost error, still string, ask func(context.Context) (done bool, err error)) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if done, err := ask(sctx); done {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-sctx.Done():
			t.Stop()
			db.log.WarnContext(ctx, "a commit's answer was lost and its "+still, "err", lost)
			return inDoubt(lost, "its "+still)
		case <-t.C:
		}
	}
}

// unreadable is the result of a settling whose question failed with err.
func (db *DB) unreadable(ctx context.Context, lost, err error) error {
	db.log.WarnContext(ctx, "a commit's answer was lost and its outcome cannot be read", "err", lost, "read_err", err)
	return inDoubt(lost, fmt.Sprintf("its outcome cannot be read: %v", err))
}

// inDoubt is the error of a commit whose answer was lost with error lost
// and whose outcome is unknown, why: it wraps store.ErrInDoubt,
// store.ErrUnavailable and lost.
func inDoubt(lost error, why string) error {
	return fmt.Errorf("commit: %w: %w: %w (%s)", store.ErrInDoubt, store.ErrUnavailable, lost, why)
}
