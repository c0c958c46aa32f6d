package sqlstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestWatchPostgresReportsARelease (fixes25): a lease's release writes
// no event, so the watch did not report it, and an identical re-send in
// another instance waiting on that lease (gate.takeOver) waited until it
// would have ended. The release now sends a notification of its own:
// changed(id) on the other instance, without appended() (the log did
// not grow). A renewal (a lease that ends later) still sends nothing.
func TestWatchPostgresReportsARelease(t *testing.T) {
	dsn := pgtest.Fresh(t)
	a, b := openTest(t, noPoll(dsn)), openTest(t, noPoll(dsn))
	released, decided := testID(1), testID(2)
	for _, id := range []approval.ID{released, decided} {
		r := pendingRequest(id)
		r.Renew("gw-b", time.Now().Add(time.Hour))
		if err := b.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	notesSent(b) // the creations' notifications come before the watch listens
	// The connection's catch-up past its horizon (catchUpPast) reads the
	// feed once, at a time of its own: under load (load 8.7, 2026-12-07)
	// it read after the decision below committed, and reported that
	// decision's event with a second appended(). It also reports the
	// creations' events with an appended() when an older transaction
	// elsewhere on the server hid them from the connection's first read.
	// The steps start once it read (branch flake51).
	caughtUp := make(chan struct{})
	a.d.(*postgresDialect).caughtUpPast = sync.OnceFunc(func() { close(caughtUp) })
	ctx, cancel := context.WithCancel(t.Context())
	calls, appended := make(chan approval.ID, 64), make(chan struct{}, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.WatchLog(ctx, func(id approval.ID) { calls <- id }, func() { appended <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	w := &watcher{calls: calls, done: done}
	w.expect(t, "after connecting", "")
	select {
	case <-caughtUp:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the watch's catch-up past its horizon did not read the feed")
	}
	for len(appended) > 0 { // the creations', if hidden from the first read
		<-appended
	}

	// A renewal sends nothing: the next call is the release's.
	if _, err := b.UpdateRequest(t.Context(), released, "toolgate", func(r *approval.Request) error {
		r.Renew("gw-b", r.LeaseUntil.Add(time.Minute))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateRequest(t.Context(), released, "toolgate", func(r *approval.Request) error {
		r.Release("gw-b", time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "after a renewal and then a release", released)
	// The release was reported once: the next call is a later decision's,
	// and the only appended() is the decision's (the watch calls them in
	// order, one at a time: a release's would have come first).
	if _, err := b.UpdateRequest(t.Context(), decided, "bob", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "after the release and then another request's decision", decided)
	select {
	case <-appended:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("no appended() call for the decision")
	}
	select {
	case <-appended:
		t.Fatal("two appended() calls for a release and a decision: a release does not grow the event log")
	default:
	}
}
