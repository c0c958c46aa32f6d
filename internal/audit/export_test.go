package audit_test

import (
	"github.com/prometheus/client_golang/prometheus"

	"toolgate/internal/telemetry"
)

func newAuditMetrics(reg *prometheus.Registry) *telemetry.AuditMetrics {
	return telemetry.NewAuditMetrics(reg)
}
