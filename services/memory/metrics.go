package memory

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// embedMetrics times the embedding model's calls (requests' texts, search queries and
// re-embedding batches alike).
type embedMetrics struct {
	seconds *prometheus.HistogramVec
	texts   prometheus.Counter
}

func newEmbedMetrics() *embedMetrics {
	return &embedMetrics{
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collab_memory_embed_seconds",
			Help:    "Time of one call to the embedding model (one batch of texts), by outcome (ok, error).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
		texts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "collab_memory_embedded_texts_total",
			Help: "Texts the embedding model embedded successfully.",
		}),
	}
}

func (m *embedMetrics) observe(d time.Duration, texts int, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	} else {
		m.texts.Add(float64(texts))
	}
	m.seconds.WithLabelValues(outcome).Observe(d.Seconds())
}

// Collectors are the service's metrics, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.seconds, s.metrics.texts}
}
