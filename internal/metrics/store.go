package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/event"
)

// storeCommands times every MongoDB command the process sends, by database (each service has
// its own: <prefix>_<service>), command name (find, insert, update, aggregate, ...) and
// outcome: the stores' latency per service without code in any store method. The memory
// stores do no I/O and are not measured.
type storeCommands struct{ seconds *prometheus.HistogramVec }

func newStoreCommands() *storeCommands {
	return &storeCommands{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "collab_store_command_seconds",
		Help:    "Time of MongoDB commands, by database (one per service), command and outcome (ok, error).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"database", "command", "outcome"})}
}

// MongoMonitor is the command monitor to give the MongoDB client (mongodb.WithCommandMonitor).
func (r *Registry) MongoMonitor() *event.CommandMonitor {
	s := r.store
	return &event.CommandMonitor{
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			s.seconds.WithLabelValues(e.DatabaseName, e.CommandName, "ok").Observe(e.Duration.Seconds())
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			s.seconds.WithLabelValues(e.DatabaseName, e.CommandName, "error").Observe(e.Duration.Seconds())
		},
	}
}
