package notifications

import (
	"github.com/prometheus/client_golang/prometheus"
)

// sendMetrics counts this process's delivery attempts by channel and outcome: both from fixed
// sets, so the series stay few.
type sendMetrics struct {
	sends *prometheus.CounterVec
}

func newSendMetrics() *sendMetrics {
	return &sendMetrics{sends: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "collab_notification_sends_total",
		Help: "Notification delivery attempts this process made, by channel (email, slack) and outcome: sent, retry (failed, another attempt scheduled), failed (given up).",
	}, []string{"channel", "outcome"})}
}

func (m *sendMetrics) observe(channel, state string) {
	if channel != ChannelEmail && channel != ChannelSlack {
		channel = "other"
	}
	outcome := state
	if state == StatePending {
		outcome = "retry"
	}
	m.sends.WithLabelValues(channel, outcome).Inc()
}

// Collectors are the service's metrics, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector { return []prometheus.Collector{s.metrics.sends} }
