package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// TestWatchReportsPolicyRevisions: a policy revision committed through
// another *DB (another instance) calls WatchFuncs.Policy on the watching
// one: on Postgres from its NOTIFY alone (the safety poll is an hour; one
// call comes when the LISTEN is established), on SQLite from the change
// feed's policy_changed event. A request's change does not. Before, only the policy store's own 2 s poll noticed it, and
// an instance went on deciding by the old revision until then.
func TestWatchReportsPolicyRevisions(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) (watching, other *DB)
	}{
		{"postgres", func(t *testing.T) (*DB, *DB) {
			t.Helper()
			dsn := pgtest.Fresh(t)
			return openTest(t, noPoll(dsn)), openTest(t, noPoll(dsn))
		}},
		{"sqlite", func(t *testing.T) (*DB, *DB) {
			t.Helper()
			path := filepath.Join(t.TempDir(), "toolgate.db")
			return openTest(t, Config{Driver: DriverSQLite, Path: path, WatchInterval: 5 * time.Millisecond}), openTest(t, sqliteConfig(path))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := c.open(t)
			policy, changed := make(chan struct{}, 16), make(chan approval.ID, 16)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				a.WatchEvents(ctx, WatchFuncs{
					Changed:  func(id approval.ID) { changed <- id },
					Appended: func() {},
					Policy:   func() { policy <- struct{}{} },
				})
			}()
			defer func() { cancel(); <-done }()
			wait := func(what string) {
				t.Helper()
				select {
				case <-policy:
				case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
					t.Fatalf("no Policy() call %s", what)
				}
			}
			if id := nextChanged(t, changed); id != "" { // the watch has its place in the feed
				t.Fatalf("first changed(%q), want changed(\"\")", id)
			}
			if c.name == "postgres" {
				wait("once listening") // a revision committed before the LISTEN is read then
			}

			// A request's creation and decision: no Policy() call.
			id := testID(1)
			if err := b.CreateRequest(t.Context(), pendingRequest(id)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.UpdateRequest(t.Context(), id, "bob", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
			}); err != nil {
				t.Fatal(err)
			}
			for got := nextChanged(t, changed); got != id; got = nextChanged(t, changed) {
			}
			select {
			case <-policy:
				t.Fatal("Policy() called for a request's change")
			default:
			}

			for base := range int64(2) {
				rev := store.PolicyRevision{Policy: "default: deny\n", Digest: fmt.Sprintf("sha256:%02d", base+1), CreatedAt: t0}
				if _, err := b.AppendPolicy(t.Context(), base, rev, "ops-admin"); err != nil {
					t.Fatal(err)
				}
				wait(fmt.Sprintf("after revision %d", base+1))
			}
		})
	}
}

// nextChanged returns the next changed() argument sent on ch.
func nextChanged(t *testing.T, ch <-chan approval.ID) approval.ID {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("no changed() call")
		return ""
	}
}
