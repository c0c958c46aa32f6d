package storetest

import (
	"context"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// A FeedLog is the part of a store FeedShowsAll reads: the event log and
// its change feed.
type FeedLog interface {
	Events(ctx context.Context, after int64, limit int) ([]approval.Event, error)
	store.FeedReader
}

// FeedShowsAll waits until s's change feed shows every event of its log
// (up to 10000), failing tb after feedSettles (30s: a hang guard, not a
// timing assertion). On Postgres an event enters the feed only once every
// transaction that was running anywhere on the server when it committed
// has ended (docs/deploy.md), and other tests' databases share the server,
// so a test that reads the feed, prunes, fans out or chains right after
// writing waits here first.
func FeedShowsAll(tb testing.TB, s FeedLog) {
	tb.Helper()
	deadline := time.Now().Add(feedSettles)
	for {
		evs, err := s.Events(tb.Context(), 0, 10000)
		if err != nil {
			tb.Fatal(err)
		}
		n := 0
		if _, err := store.FollowFeed(tb.Context(), s, store.Cursor{}, 1000, func(page []approval.Event) error {
			n += len(page)
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
		if n >= len(evs) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the change feed shows %d of the log's %d events after %v", n, len(evs), feedSettles)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
