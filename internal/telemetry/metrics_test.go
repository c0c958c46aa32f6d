package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAlertSeriesExportedAtZero: the labelled counters an operator alerts
// on (docs/deploy.md, "What to alert on") exist at 0 before anything
// happened; a series that first appears at 1 shows no increase, so an
// alert on increase(…) would miss the first failure.
func TestAlertSeriesExportedAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				got[mf.GetName()+" "+l.GetName()+"="+l.GetValue()] = m.GetCounter().GetValue() == 0
			}
		}
	}
	for _, want := range []string{
		"toolgate_dispatch_refusals_total reason=invalidated",
		"toolgate_dispatch_refusals_total reason=not_approved",
		"toolgate_dispatch_refusals_total reason=store_error",
		"toolgate_dispatch_refusals_total reason=policy_moved",
		"toolgate_store_errors_total op=lease_renewal",
		"toolgate_store_errors_total op=sweep",
		"toolgate_store_errors_total op=call",
		"toolgate_approval_decisions_total decision=approved",
		"toolgate_approval_decisions_total decision=denied",
		"toolgate_approval_decisions_total decision=expired",
		"toolgate_approval_decisions_total decision=cancelled",
		"toolgate_http_connections_shed_total listener=mcp",
		"toolgate_http_connections_shed_total listener=admin",
		"toolgate_http_connections_shed_total how=evicted",
		"toolgate_http_connections_shed_total how=refused",
	} {
		if zero, ok := got[want]; !ok || !zero {
			t.Errorf("%s: present %v at 0 %v, want present at 0", want, ok, zero)
		}
	}
}

// TestPendingGaugeAbsentWhileUnknown: toolgate_approvals_pending is left
// out while the count is unknown (PendingUnknown) and back with the next
// count.
func TestPendingGaugeAbsentWhileUnknown(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	pending := func() (float64, bool) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "toolgate_approvals_pending" && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	for _, step := range []struct {
		set     func()
		n       float64
		present bool
	}{
		{func() {}, 0, true},
		{func() { m.PendingApprovals(4) }, 4, true},
		{m.PendingUnknown, 0, false},
		{func() { m.PendingApprovals(2) }, 2, true},
	} {
		step.set()
		if n, ok := pending(); n != step.n || ok != step.present {
			t.Fatalf("pending %v present %v, want %v present %v", n, ok, step.n, step.present)
		}
	}
}
