package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"toolgate/internal/store/sqlstore/pgtest"
)

// holdTurn is how long each of holdForeignXids' transactions stays open:
// the cadence of the interference it makes, not a wait for an event.
const holdTurn = time.Second

// holdForeignXids keeps a transaction with an id open in a database of its
// own on the test server from when it returns until t ends: two
// connections take turns, each beginning a transaction and taking an id
// before the other commits its, so one is always open, each for holdTurn.
// Every event committed meanwhile has a running transaction below it and
// enters the change feed only once that one ends, as in CI, where the
// packages' tests share the server (feedSafe): a test that reads the feed
// right after writing, rather than waiting (storetest.FeedShowsAll), fails
// under it.
func holdForeignXids(t *testing.T) {
	t.Helper()
	dsn := pgtest.Fresh(t)
	ctx, cancel := context.WithCancel(context.Background())
	var conns [2]*pgx.Conn
	for i := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		conns[i] = c
	}
	begin := func(c *pgx.Conn) (pgx.Tx, error) {
		tx, err := c.Begin(ctx)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `SELECT pg_current_xact_id()`)
		return tx, err
	}
	first, err := begin(conns[0])
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// A turn every holdTurn: a transaction lives that long, so it spans
		// a test's write and its read of the feed, as a long one of another
		// package's test does (an id taken a millisecond apart would end
		// before most reads and interfere with almost none).
		tick := time.NewTicker(holdTurn)
		defer tick.Stop()
		open, i := first, 1
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-tick.C:
			}
			next, err := begin(conns[i])
			if err == nil {
				err = open.Commit(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					err = nil
				}
				done <- err
				return
			}
			open, i = next, 1-i
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("holding foreign transactions: %v", err)
		}
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	})
}

// TestFeedReadersUnderForeignTransactions runs tests that write and then
// read the change feed, prune, fan out or chain the audit trail while
// another database's transaction is always open (holdForeignXids). Such
// a test passes only if it waits until the feed shows what it wrote (or,
// for a page of the requests list, until older transactions ended);
// TestPagingCutsShortAboveTooManyOpen did not ("the first page = [2
// requests]"), nor did TestFeedAndAuditReadsScanThroughOneScanner, which
// is not run here: it counts the process's allocations, and the holder's
// count with them.
func TestFeedReadersUnderForeignTransactions(t *testing.T) {
	pgtest.DSN(t)
	holdForeignXids(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"FanOut", TestFanOut},
		{"EventsNameOnlyStoredRequests", TestEventsNameOnlyStoredRequests},
		{"ChainAuditAppendsLargeBatches", TestChainAuditAppendsLargeBatches},
		{"PagingCutsShort", TestPagingCutsShortAboveTooManyOpen},
	} {
		t.Run(tc.name, tc.run)
	}
}
