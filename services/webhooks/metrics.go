package webhooks

import (
	"context"
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

// Backlogger is a store that can tell the delivery queue's depth (MemoryStore, MongoStore).
// The observed store (store_observed.go) implements it when the store it wraps does.
//
//storeobserve:optional
type Backlogger interface {
	// Backlog counts the pending deliveries and returns the earliest next attempt among those
	// due at now (zero when none is due).
	Backlog(ctx context.Context, now time.Time) (int, time.Time, error)
	// BusiestEndpoints returns the endpoints with the most pending deliveries, most first
	// (ties by endpoint id), at most limit of them; endpoints with none are not listed.
	BusiestEndpoints(ctx context.Context, limit int) ([]EndpointBacklog, error)
}

// EndpointBacklog is one endpoint's count of pending deliveries.
type EndpointBacklog struct {
	EndpointID string
	Pending    int
}

// busiestEndpoints bounds the per-endpoint queue series: the queue depth of every endpoint would
// be a series per endpoint tenants create (unbounded), so only the deepest queues are shown, the
// ones an operator acts on. Endpoint ids are ours (ep_<time><random>), never a tenant's text.
const busiestEndpoints = 10

var (
	pendingDesc = prometheus.NewDesc("collab_webhook_pending_deliveries",
		"Webhook deliveries waiting to be sent (due now, or waiting for a retry), in the store every webhooks process shares.", nil, nil)
	lagDesc = prometheus.NewDesc("collab_webhook_due_lag_seconds",
		"How long the most overdue delivery has been due and not yet taken by a worker (0 when none is due).", nil, nil)
	endpointPendingDesc = prometheus.NewDesc("collab_webhook_endpoint_pending_deliveries",
		"Webhook deliveries waiting to be sent to one endpoint, for the endpoints with the deepest queues (at most 10, read at scrape time).", []string{"endpoint"}, nil)
)

// queueCollector reads the queue's depth from the store at scrape time.
type queueCollector struct{ s *Server }

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- lagDesc
	ch <- endpointPendingDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	b, ok := c.s.store.(Backlogger)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	now := c.s.clock.Now()
	n, oldest, err := b.Backlog(ctx, now)
	if err != nil {
		c.s.log.Warn("webhooks: reading the queue for metrics", "error", err)
		return
	}
	lag := 0.0
	if !oldest.IsZero() {
		lag = max(now.Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag)
	if n == 0 {
		return
	}
	busiest, err := b.BusiestEndpoints(ctx, busiestEndpoints)
	if err != nil {
		c.s.log.Warn("webhooks: reading the endpoints' queues for metrics", "error", err)
		return
	}
	for _, e := range busiest {
		ch <- prometheus.MustNewConstMetric(endpointPendingDesc, prometheus.GaugeValue, float64(e.Pending), e.EndpointID)
	}
}

// Collectors are the service's metrics, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.attempts, s.metrics.duration, queueCollector{s}}
}
