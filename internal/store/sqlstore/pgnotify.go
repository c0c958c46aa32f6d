package sqlstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifications after the commit on Postgres (docs/architecture.md,
// "Change notifications"). A transaction that runs pg_notify takes, at its
// commit, a lock of the whole cluster (PreCommit_Notify) held until the
// commit is done: every notifying commit of every instance waits for the
// one before it, fsync included. With approve-all at 10,000 held calls
// most decisions and outcomes waited over a millisecond for it (approve44).
// So the writes no longer notify in their own transaction: once a commit
// returned, its notices go to the store's pgNotifier, which sends them on
// a connection of its own, all those gathered while a send was in flight
// in one statement (one commit, one wait for that lock).

// NotifyApplicationName is the application_name of the notifier's
// connection (NotifyConns), as pg_stat_activity shows it.
const NotifyApplicationName = "toolgate-notify"

// NotifyConns is the size of the pool of the notifier's sends, opened next
// to the main pool from the same DSN: one send at a time.
const NotifyConns = 1

// notifyBatch is the most notices one statement sends (two text arrays of
// that many elements, each payload under 100 bytes: well within a
// statement's limits and a notification's 8000 bytes).
const notifyBatch = 1000

// notifyTimeout bounds one statement of the notifier. A send that fails or
// times out is logged and dropped: the watch's safety poll and its read
// after each reconnection read what it did not announce from the change
// feed (DB.Watch).
const notifyTimeout = 5 * time.Second

// pgNotifyStatement sends the notices in its two arrays, channels and
// payloads, in one implicit transaction.
const pgNotifyStatement = `SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS n(c, p)`

// A notice is one notification: its channel and payload.
type notice struct{ channel, payload string }

// A pgNotifier sends the notices of committed writes, group-commit style:
// the first notice when no send is in flight starts one at once on a
// goroutine of the notifier's (no added delay when idle); notices arriving
// while it runs are gathered and sent together by the same goroutine after
// it, which ends when nothing is left. close waits for it.
type pgNotifier struct {
	pool *pgxpool.Pool // NotifyConns connections; closed by close
	log  *slog.Logger
	mu   sync.Mutex
	// send sends one batch; pgNotifier.exec unless a test replaces it
	// (under mu).
	send    func(ctx context.Context, batch []notice) error
	pending []notice
	busy    bool // the sending goroutine runs
	closed  bool
	wg      sync.WaitGroup
}

func newPGNotifier(pool *pgxpool.Pool) *pgNotifier {
	n := &pgNotifier{pool: pool, log: slog.New(slog.DiscardHandler)}
	n.send = n.exec
	return n
}

// notify queues ns for sending, after the commit that wrote their events
// returned. Never blocks on the database; nothing is sent after close.
func (n *pgNotifier) notify(ns []notice) {
	if n == nil || len(ns) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.pending = append(n.pending, ns...)
	if n.busy {
		return
	}
	n.busy = true
	n.wg.Go(n.run)
}

// run sends what is pending until nothing is.
func (n *pgNotifier) run() {
	for {
		n.mu.Lock()
		batch, send := n.pending, n.send
		n.pending = nil
		if len(batch) == 0 {
			n.busy = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), notifyBatch)
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			if err := send(ctx, batch[:k]); err != nil {
				// The payloads are request ids and states, no arguments.
				n.log.WarnContext(ctx, "postgres notify failed; other instances read the change at their next safety poll", "notices", k, "err", err)
			}
			cancel()
			batch = batch[k:]
		}
	}
}

// exec sends batch in one statement (pgNotifyStatement).
func (n *pgNotifier) exec(ctx context.Context, batch []notice) error {
	chans := make([]string, len(batch))
	payloads := make([]string, len(batch))
	for i, b := range batch {
		chans[i], payloads[i] = b.channel, b.payload
	}
	if _, err := n.pool.Exec(ctx, pgNotifyStatement, chans, payloads); err != nil {
		return fmt.Errorf("notify %d: %w", len(batch), err)
	}
	return nil
}

// close sends what is pending, then closes the pool.
func (n *pgNotifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.wg.Wait()
	n.pool.Close()
}
