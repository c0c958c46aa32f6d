package gate

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/telemetry"
)

// TestStoreErrorsCounted: an operator alerts on store failures from
// /metrics, not from the log. toolgate_store_errors_total has each op at 0
// from the start (an alert on its increase fires on the first failure),
// and counts a failed lease renewal, a failed sweep and a call refused
// with an error id.
func TestStoreErrorsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, time.Minute, &Options{Metrics: telemetry.NewMetrics(reg)})
	ops := []string{"lease_renewal", "sweep", "call"} // the op label values operators alert on
	series := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "toolgate_store_errors_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" {
						out[l.GetValue()] = m.GetCounter().GetValue()
					}
				}
			}
		}
		return out
	}
	before := series()
	for _, op := range ops {
		if v, ok := before[op]; !ok || v != 0 {
			t.Errorf("before any failure: toolgate_store_errors_total{op=%q} = %v (present %v), want 0 and present", op, v, ok)
		}
	}

	_ = f.db.Close()
	if a := f.gate.Admit(t.Context(), writeCall("/a")); a.Allowed {
		t.Fatalf("admitted with the store closed: %+v", a)
	}
	f.gate.renewOnce(t.Context())
	f.gate.sweep(t.Context())
	after := series()
	for _, op := range ops {
		if after[op] < 1 {
			t.Errorf("store closed: toolgate_store_errors_total{op=%q} = %v, want ≥ 1", op, after[op])
		}
	}
}
