package sqlstore

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"toolgate/internal/store/sqlstore/pgtest"
)

// feedFailures is a slog handler that signals each warning of a failed
// read of the change feed.
type feedFailures chan struct{}

func (f feedFailures) Enabled(context.Context, slog.Level) bool { return true }
func (f feedFailures) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "read postgres change feed") {
		select {
		case f <- struct{}{}:
		default:
		}
	}
	return nil
}
func (f feedFailures) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f feedFailures) WithGroup(string) slog.Handler      { return f }

// TestWatchCatchUpRetriesAFailedRead: a reconnection's reads of the change
// feed that fail (here the events table is renamed away while the
// listening connection is down, a stand-in for a pool connection that
// died with it, a failover, any error of the read) are tried again until
// one succeeds, so a decision committed while the listening connection
// was down wakes its waiter without the safety poll. Before, the
// reconnection's catch-up and catchUpPast's each logged the failure once
// and left the decision to the safety poll (an hour here: never seen).
func TestWatchCatchUpRetriesAFailedRead(t *testing.T) {
	dsn := pgtest.Fresh(t)
	fails := make(feedFailures, 2)
	cfg := noPoll(dsn)
	cfg.Logger = slog.New(fails)
	a, b := openTest(t, cfg), openTest(t, noPoll(dsn))
	w := startWatch(t, a)
	w.expect(t, "after connecting", "")
	var old int
	if err := b.sql.QueryRowContext(t.Context(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, WatchApplicationName).Scan(&old); err != nil {
		t.Fatal(err)
	}
	silent := testID(301)
	writeSilently(t, b, silent) // no NOTIFY: only a catch-up can report it
	if _, err := b.sql.ExecContext(t.Context(), `ALTER TABLE events RENAME TO events_away`); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := b.sql.QueryRowContext(t.Context(), `SELECT pg_terminate_backend($1)`, old).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", old, ok, err)
	}
	// The reconnection's catch-up fails, and so does catchUpPast's (no
	// older transaction: it reads at once).
	for range 2 {
		select {
		case <-fails:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatal("no failed read of the change feed after the reconnection")
		}
	}
	if _, err := b.sql.ExecContext(t.Context(), `ALTER TABLE events_away RENAME TO events`); err != nil {
		t.Fatal(err)
	}
	w.expectAmong(t, "once the change feed can be read again", silent)
}
