package telemetry

import "github.com/prometheus/client_golang/prometheus"

// AuditMetrics are the audit trail's instruments (issue 14). A nil
// *AuditMetrics records nothing; every method is safe on nil.
type AuditMetrics struct {
	dropped  prometheus.Counter
	appended prometheus.Counter
	failures prometheus.Counter
}

// NewAuditMetrics creates the audit metrics and registers them on reg.
func NewAuditMetrics(reg prometheus.Registerer) *AuditMetrics {
	m := &AuditMetrics{
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_audit_dropped_total",
			Help: "Audit events of calls decided without an approval (allowed, denied) dropped because the audit queue was full; the calls themselves were not affected.",
		}),
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_audit_appended_total",
			Help: "Links this instance appended to the audit chain.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_audit_chain_failures_total",
			Help: "Failed attempts to append to the audit chain (retried; queued events are kept while the queue has room).",
		}),
	}
	reg.MustRegister(m.dropped, m.appended, m.failures)
	return m
}

// Dropped counts one audit event dropped at a full queue.
func (m *AuditMetrics) Dropped() {
	if m != nil {
		m.dropped.Inc()
	}
}

// Appended counts n links appended.
func (m *AuditMetrics) Appended(n int) {
	if m != nil {
		m.appended.Add(float64(n))
	}
}

// ChainFailed counts one failed append.
func (m *AuditMetrics) ChainFailed() {
	if m != nil {
		m.failures.Inc()
	}
}
