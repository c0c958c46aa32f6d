package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
)

// TestTrailLingersForMoreCalls: a decided call is chained Linger after it
// was queued, together with the calls decided meanwhile (one append, not
// one per call: an allowed call's path costs no write transaction of its
// own), and a full Batch is chained at once.
func TestTrailLingersForMoreCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
		tr := audit.New(db, &audit.Options{Linger: 100 * time.Millisecond, Batch: 4, Poll: time.Hour})
		pol := testPolicy()
		g := gate.New(db, pol, &gate.Options{Recorder: tr})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tr.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		admit := func(n int) {
			t.Helper()
			for i := range n {
				if adm := g.Admit(ctx, call(fmt.Sprintf("read_%d", i))); !adm.Allowed {
					t.Fatalf("read_%d refused: %s", i, adm.Message)
				}
			}
		}

		admit(2)
		synctest.Wait()
		if n := len(records(t, db, "")); n != 0 {
			t.Fatalf("%d calls chained before the linger passed, want 0", n)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := len(records(t, db, "")); n != 2 {
			t.Fatalf("%d calls chained after the linger, want 2", n)
		}

		admit(4) // a full batch: at once
		synctest.Wait()
		if n := len(records(t, db, "")); n != 6 {
			t.Fatalf("%d calls chained after a full batch was queued, want 6", n)
		}

		// After an append the next call starts a new linger (it wakes
		// the trail again).
		admit(1)
		synctest.Wait()
		if n := len(records(t, db, "")); n != 6 {
			t.Fatalf("%d calls chained before the second linger passed, want 6", n)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if n := len(records(t, db, "")); n != 7 {
			t.Fatalf("%d calls chained after the second linger, want 7", n)
		}
	})
}
