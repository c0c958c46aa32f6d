package sqlstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
	"toolgate/internal/store/storetest"
)

// TestPruneKeepsWhatAConsumerHasNotRead: events the notification outbox
// (a durable feed consumer) has not fanned out survive Prune while the
// outbox is alive; once it read them they go; a consumer that has not
// moved for the whole retention period no longer holds pruning back.
func TestPruneKeepsWhatAConsumerHasNotRead(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			start, _, err := db.FeedPosition(ctx, store.FeedConsumerNotify)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := db.FeedPosition(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("FeedPosition of an unknown consumer = %v, want ErrNotFound", err)
			}
			r := pendingRequest(testID(1))
			if err := db.CreateRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
			if _, err := db.UpdateRequest(ctx, r.ID, "bob", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictDeny, "no", "", t0.Add(time.Minute))
			}); err != nil {
				t.Fatal(err)
			}
			all, err := db.Events(ctx, 0, 0)
			if err != nil || len(all) < 2 {
				t.Fatalf("Events = %v, %v; want the creation and the decision", all, err)
			}
			now := time.Now()
			keep := store.Retention{Events: time.Hour}
			// The events are ancient (t0) but the outbox, which moved at
			// migration time (within the hour), has not read them.
			if p, err := db.Prune(ctx, keep, now); err != nil || p.Events != 0 {
				t.Fatalf("Prune before the outbox read = %+v, %v; want nothing deleted", p, err)
			}
			none := func(approval.Event, approval.Request) []string { return nil }
			storetest.FeedShowsAll(t, db)
			res, err := db.FanOut(ctx, 0, now, none, seqIDs())
			if err != nil || res.Events != len(all) {
				t.Fatalf("FanOut = %+v, %v; want %d events read", res, err, len(all))
			}
			pos, moved, err := db.FeedPosition(ctx, store.FeedConsumerNotify)
			if err != nil || !start.Before(pos) || !moved.Equal(now.Truncate(time.Millisecond)) {
				t.Errorf("FeedPosition = %v at %v, %v; want past %v, moved at %v", pos, moved, err, start, now)
			}
			if p, err := db.Prune(ctx, keep, now); err != nil || p.Events != 0 {
				t.Fatalf("Prune before the audit chain read = %+v, %v; want nothing deleted", p, err)
			}
			// The audit chain, the other live consumer, reads them too
			// (chaining nothing here).
			if _, _, err := db.ChainAudit(ctx, 0, 0, func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			if p, err := db.Prune(ctx, keep, now); err != nil || p.Events != len(all) || p.Through != pos {
				t.Fatalf("Prune after the outbox read = %+v, %v; want %d events deleted through %v", p, err, len(all), pos)
			}

			// A consumer that stopped moving: events after it go once it
			// has been still for the retention period.
			r2 := pendingRequest(testID(2))
			if err := db.CreateRequest(ctx, r2); err != nil {
				t.Fatal(err)
			}
			if _, err := db.UpdateRequest(ctx, r2.ID, "bob", func(r *approval.Request) error { return r.Cancel(t0) }); err != nil {
				t.Fatal(err)
			}
			// Prune deletes only what the change feed shows; on Postgres
			// that is once older transactions on the shared server ended
			// (else 0 deleted at 2 hours).
			storetest.FeedShowsAll(t, db)
			if p, err := db.Prune(ctx, store.Retention{Events: time.Hour}, now.Add(30*time.Minute)); err != nil || p.Events != 0 {
				t.Errorf("Prune with the outbox still for 30 minutes of an hour = %+v, %v; want nothing deleted", p, err)
			}
			if p, err := db.Prune(ctx, store.Retention{Events: time.Hour}, now.Add(2*time.Hour)); err != nil || p.Events != 2 {
				t.Errorf("Prune with the outbox still for 2 hours of an hour = %+v, %v; want its 2 unread events deleted", p, err)
			}
		})
	}
}

// TestFollowFeed pages through the feed and stops where a page failed.
func TestFollowFeed(t *testing.T) {
	db := openTest(t, backends[0].fresh(t))
	ctx := t.Context()
	for i := range 5 {
		if err := db.CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	end, err := store.FollowFeed(ctx, db, store.Cursor{}, 2, func(evs []approval.Event) error {
		got = append(got, seqs(evs)...)
		return nil
	})
	if err != nil || !slices.Equal(got, []int64{1, 2, 3, 4, 5}) || end.Seq != 5 {
		t.Fatalf("FollowFeed = %v, %v, read %v; want seqs 1..5", end, err, got)
	}
	boom := errors.New("boom")
	calls := 0
	at, err := store.FollowFeed(ctx, db, store.Cursor{}, 2, func([]approval.Event) error {
		if calls++; calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || at.Seq != 2 {
		t.Errorf("FollowFeed with a failing second page = %v, %v; want the position after the first page and the error", at, err)
	}
}

// TestFeedEntries gives each event of the feed its own cursor: resuming
// after any entry's cursor reads exactly the entries after it, and the last
// entry's cursor is the one Feed returns.
func TestFeedEntries(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			db := openTest(t, b.fresh(t))
			ctx := t.Context()
			for i := range 4 {
				if err := db.CreateRequest(ctx, pendingRequest(testID(i))); err != nil {
					t.Fatal(err)
				}
			}
			storetest.FeedShowsAll(t, db) // Postgres: once older transactions on the shared server ended
			all, err := db.FeedEntries(ctx, store.Cursor{}, 0)
			if err != nil || len(all) != 4 {
				t.Fatalf("FeedEntries = %d entries, %v; want 4", len(all), err)
			}
			_, end, err := db.Feed(ctx, store.Cursor{}, 0)
			if err != nil || end != all[3].Cursor {
				t.Errorf("Feed's end %v, %v; want the last entry's cursor %v", end, err, all[3].Cursor)
			}
			for i, e := range all {
				if e.Cursor.Seq != e.Event.Seq {
					t.Errorf("entry %d: cursor %v for event %d", i, e.Cursor, e.Event.Seq)
				}
				rest, err := db.FeedEntries(ctx, e.Cursor, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := entrySeqs(rest), entrySeqs(all[i+1:]); !slices.Equal(got, want) {
					t.Errorf("after entry %d (%v): seqs %v, want %v", i, e.Cursor, got, want)
				}
			}
		})
	}
}

func entrySeqs(es []store.FeedEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Event.Seq
	}
	return out
}
