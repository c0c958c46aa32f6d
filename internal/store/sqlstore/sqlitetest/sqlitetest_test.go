package sqlitetest

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
)

// TestOpenInSynctest checks the promise gate tests rely on: a store opened
// inside a synctest bubble works, its watcher runs on fake time, and the
// bubble ends cleanly (no goroutine of the store outlives Close).
func TestOpenInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := Open(t)
		now := time.Now()
		r := approval.Request{
			ID: "01900000-0000-7000-8000-000000000001", State: approval.StatePending, Server: "pay", Tool: "transfer",
			RequestedBy: "desktop", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute), RequiredApprovals: 1,
		}
		if err := db.CreateRequest(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // fake time: passes at once, 20 polls
		defer cancel()
		calls := 0
		db.Watch(ctx, func(id approval.ID) { calls++ })
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || calls != 1 {
			t.Errorf("Watch returned with ctx %v after %d calls, want deadline exceeded after 1", ctx.Err(), calls)
		}
		got, err := db.GetRequest(t.Context(), r.ID)
		if err != nil || !got.ExpiresAt.Equal(r.ExpiresAt.Truncate(time.Millisecond)) {
			t.Errorf("GetRequest = %+v, %v", got, err)
		}
	})
}
