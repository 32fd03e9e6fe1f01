package notifications

import (
	"github.com/prometheus/client_golang/prometheus"
)

// sendMetrics counts this process's delivery attempts by channel and outcome, and the
// notifications its quotas refused by quota: all from fixed sets, so the series stay few.
type sendMetrics struct {
	sends    *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

// The quotas, as refusals name them.
const (
	quotaRecipients = "recipients"
	quotaInbox      = "inbox"
)

func newSendMetrics() *sendMetrics {
	m := &sendMetrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collab_notification_sends_total",
			Help: "Notification delivery attempts this process made, by channel (email, slack) and outcome: sent, retry (failed, another attempt scheduled), failed (given up).",
		}, []string{"channel", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collab_notification_quota_refusals_total",
			Help: "Notifications this process refused as past a fan-out quota: recipients (of a workspace in a minute) or inbox (a user's inbox size).",
		}, []string{"quota"}),
	}
	for _, q := range []string{quotaRecipients, quotaInbox} {
		m.refusals.WithLabelValues(q) // the series exist from the start, at 0
	}
	return m
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
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.sends, s.metrics.refusals}
}
