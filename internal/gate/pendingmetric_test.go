package gate

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/store/sqlstore/sqlitetest"
	"toolgate/internal/telemetry"
)

// TestPendingGaugeNotStaleWhileStoreDown (ops20): the sweep sets
// toolgate_approvals_pending from the store's count; when the store could
// not be read the gauge kept the last count, so a dashboard or alert on it
// saw a steady value through an outage. Now the series is absent while the
// count is unknown, and back with the next count that succeeds.
func TestPendingGaugeNotStaleWhileStoreDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := sqlitetest.Open(t)
	pol := &swappable{}
	pol.p.Store(retryPolicy(time.Hour))
	g := New(db, pol, &Options{RetryWait: time.Nanosecond, Metrics: telemetry.NewMetrics(reg)})
	if a := g.Admit(t.Context(), writeCall("/pending-gauge")); a.Allowed || a.ApprovalID == "" {
		t.Fatalf("%+v, want a pending approval", a)
	}
	pending := func() (float64, bool) { t.Helper(); return pendingGauge(t, reg) }
	g.sweep(t.Context())
	if n, ok := pending(); !ok || n != 1 {
		t.Fatalf("after a sweep: pending %v (present %v), want 1", n, ok)
	}
	if err := db.Close(); err != nil { // the store is gone
		t.Fatal(err)
	}
	g.sweep(t.Context())
	if n, ok := pending(); ok {
		t.Fatalf("after a sweep that could not count: pending %v, want the series absent (the count is unknown)", n)
	}
}

// pendingGauge reads toolgate_approvals_pending from reg: its value, and
// whether the series is present at all (absent while the count is
// unknown).
func pendingGauge(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toolgate_approvals_pending" && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}
