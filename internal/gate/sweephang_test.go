package gate

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/telemetry"
)

// hungCount is a store whose CountPending, once armed, answers only when
// its context ends: a connection to a store that stopped answering (a
// partitioned database server), not one that refuses.
type hungCount struct {
	store.Store
	armed atomic.Bool
}

func (h *hungCount) CountPending(ctx context.Context, requestedBy string) (int, error) {
	if h.armed.Load() {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return h.Store.CountPending(ctx, requestedBy)
}

// TestPendingGaugeNotStaleWhileStoreHangs (attack22): the sweep's count of
// pending requests had no bound of its own, so a store that stopped
// answering (rather than refusing) kept the sweep waiting and
// toolgate_approvals_pending at its last count, the steady value through
// an outage that ops20 made the series absent for. One attempt is now
// bounded (attemptTimeout, as the gate's other store writes are): after
// it the count is unknown and the series absent.
func TestPendingGaugeNotStaleWhileStoreHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		reg := prometheus.NewRegistry()
		hs := &hungCount{Store: db}
		pol := &swappable{}
		pol.p.Store(retryPolicy(time.Hour))
		g := New(hs, pol, &Options{RetryWait: time.Nanosecond, Metrics: telemetry.NewMetrics(reg)})
		if a := g.Admit(t.Context(), writeCall("/pending-gauge-hang")); a.Allowed || a.ApprovalID == "" {
			t.Fatalf("%+v, want a pending approval", a)
		}
		pending := func() (float64, bool) { t.Helper(); return pendingGauge(t, reg) }
		g.sweep(t.Context())
		if n, ok := pending(); !ok || n != 1 {
			t.Fatalf("after a sweep: pending %v (present %v), want 1", n, ok)
		}
		hs.armed.Store(true)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.sweep(ctx)
		}()
		time.Sleep(attemptTimeout + time.Second)
		synctest.Wait()
		if n, ok := pending(); ok {
			t.Errorf("%v after the store stopped answering the sweep's count: pending %v, want the series absent (the count is unknown)", attemptTimeout+time.Second, n)
		}
		cancel()
		<-done
	})
}
