package webhooks

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// deliveryMetrics counts this process's delivery attempts. No endpoint or tenant label: those
// are unbounded; the attempt log (per endpoint) has the detail.
type deliveryMetrics struct {
	attempts *prometheus.CounterVec
	duration prometheus.Histogram
}

func newDeliveryMetrics() *deliveryMetrics {
	return &deliveryMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collab_webhook_attempts_total",
			Help: "Webhook delivery attempts this process recorded, by outcome: success (2xx), retry (failed, another attempt scheduled), failed (given up: exhausted, 410 Gone, or not sendable: endpoint gone or disabled).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "collab_webhook_attempt_duration_seconds",
			Help:    "Time from sending a webhook request to its answer (or to giving up on one).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15},
		}),
	}
}

// observe records an attempt of the given delivery state; d is zero for an attempt that sent
// nothing.
func (m *deliveryMetrics) observe(state string, d time.Duration) {
	outcome := state
	if state == StatePending {
		outcome = "retry"
	}
	m.attempts.WithLabelValues(outcome).Inc()
	if d > 0 {
		m.duration.Observe(d.Seconds())
	}
}

// Collectors are the service's metrics, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.attempts, s.metrics.duration}
}
