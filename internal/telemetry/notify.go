package telemetry

import "github.com/prometheus/client_golang/prometheus"

// DeliveryMetrics are the notification outbox's instruments (issue 14). A
// nil *DeliveryMetrics records nothing; every method is safe on nil.
type DeliveryMetrics struct {
	deliveries   *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	interactions *prometheus.CounterVec
}

// NewDeliveryMetrics creates the notification metrics and registers them on
// reg.
func NewDeliveryMetrics(reg prometheus.Registerer) *DeliveryMetrics {
	m := &DeliveryMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_deliveries_total",
			Help: "Notification deliveries by channel and outcome: delivered and failed (given up after max_age) count deliveries, retried counts failed attempts that will be tried again, skipped counts events already older than max_age when first seen.",
		}, []string{"channel", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_delivery_latency_seconds",
			Help:    "Seconds from an event to its delivery on a channel, retries included.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"channel"}),
		interactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_slack_interactions_total",
			Help: "Slack button clicks by outcome: decided, refused (signed, nothing decided), bad_signature, stale (outside the 5-minute window).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.deliveries, m.latency, m.interactions)
	return m
}

// Delivery counts one outcome on channel.
func (m *DeliveryMetrics) Delivery(channel, outcome string) {
	if m != nil {
		m.deliveries.WithLabelValues(channel, outcome).Inc()
	}
}

// deliveryOutcomes are the outcome label values of toolgate_deliveries_total
// (notify.Outcome…).
var deliveryOutcomes = []string{"delivered", "retried", "failed", "skipped"}

// ZeroChannels exports every outcome of each channel named at 0, before
// anything is delivered: an alert on the increase of failed deliveries
// then fires on the first one (a series that first appears at 1 shows no
// increase). The notification outbox calls it with its channels.
func (m *DeliveryMetrics) ZeroChannels(names ...string) {
	if m == nil {
		return
	}
	for _, ch := range names {
		for _, o := range deliveryOutcomes {
			m.deliveries.WithLabelValues(ch, o)
		}
	}
}

// Delivered observes the latency of one delivery on channel, in seconds.
func (m *DeliveryMetrics) Delivered(channel string, seconds float64) {
	if m != nil {
		m.latency.WithLabelValues(channel).Observe(seconds)
	}
}

// Interaction counts one Slack interaction by outcome.
func (m *DeliveryMetrics) Interaction(outcome string) {
	if m != nil {
		m.interactions.WithLabelValues(outcome).Inc()
	}
}
