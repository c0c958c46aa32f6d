package audit_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// chainCounting is the SQLite store with its appends counted, and failing
// while down.
type chainCounting struct {
	*sqlstore.DB
	appends atomic.Int64
	down    atomic.Bool
}

func (c *chainCounting) ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (int, bool, error) {
	c.appends.Add(1)
	if c.down.Load() {
		return 0, false, errors.New("store down")
	}
	return c.DB.ChainAudit(ctx, limit, calls, build)
}

// TestTrailPollSkipsWhileSettled (idle27): with Options.Settled, a Poll's
// look asks the store nothing while the generation of its commits is
// current and unchanged since the last append that succeeded and no call
// is queued; it looks again at the next Poll when the generation moves, at
// every Poll while the generation is not current or the append failed, and
// a queued call is chained (after its linger) as before.
func TestTrailPollSkipsWhileSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &chainCounting{DB: openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))}
		var gen atomic.Uint64
		var current atomic.Bool
		current.Store(true)
		tr := audit.New(db, &audit.Options{Poll: time.Second, Linger: 100 * time.Millisecond,
			Settled: func() (uint64, bool) { return gen.Load(), current.Load() }})
		g := gate.New(db.DB, testPolicy(), &gate.Options{Recorder: tr})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tr.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		appends := func(wait time.Duration) int64 {
			t.Helper()
			before := db.appends.Load()
			time.Sleep(wait)
			synctest.Wait()
			return db.appends.Load() - before
		}

		appends(1500 * time.Millisecond) // the first Poll appends (nothing) and settles
		if n := appends(10 * time.Second); n != 0 {
			t.Fatalf("10 Polls with the generation settled: %d appends, want 0", n)
		}
		gen.Add(1)
		if n := appends(time.Second); n != 1 {
			t.Fatalf("the Poll after the generation moved: %d appends, want 1", n)
		}
		if n := appends(10 * time.Second); n != 0 {
			t.Fatalf("settled again: %d appends in 10 Polls, want 0", n)
		}
		if adm := g.Admit(ctx, call("read_1")); !adm.Allowed {
			t.Fatalf("read_1 refused: %s", adm.Message)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if n := len(records(t, db.DB, "")); n != 1 {
			t.Fatalf("%d calls chained after the linger with the generation settled, want 1", n)
		}
		current.Store(false)
		if n := appends(10 * time.Second); n < 9 {
			t.Fatalf("the generation not current: %d appends in 10 Polls, want one each", n)
		}
		current.Store(true)
		db.down.Store(true)
		gen.Add(1)
		if n := appends(10 * time.Second); n < 9 {
			t.Fatalf("the store down: %d appends in 10 Polls, want one each (retried)", n)
		}
		db.down.Store(false)
		appends(time.Second)
		if n := appends(10 * time.Second); n != 0 {
			t.Fatalf("the store back and settled: %d appends in 10 Polls, want 0", n)
		}
	})
}
