package sqlstore

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// BenchmarkDecisionAnswer is what the REST API's approve costs the store
// on SQLite: the decision's write with a store.TaskProbe in its context
// and, when the write left the probe unread, the task's read that
// Gate.HeldAsTask then makes (GetTask). Per op: one pending request
// approved (created before the timer). Run with -benchmem and a fixed
// count, e.g. -benchtime 2000x.
func BenchmarkDecisionAnswer(b *testing.B) {
	db := openTest(b, sqliteConfig(filepath.Join(b.TempDir(), "t.db")))
	ctx := b.Context()
	for i := range b.N {
		if err := db.CreateRequest(ctx, pendingRequest(testID(i+1))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		id := testID(i + 1)
		probe := &store.TaskProbe{ID: id}
		if _, err := db.UpdateRequest(store.WithTaskProbe(ctx, probe), id, "bob", func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
		}); err != nil {
			b.Fatal(err)
		}
		if !probe.Read {
			if _, err := db.GetTask(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
				b.Fatal(err)
			}
		}
	}
}
