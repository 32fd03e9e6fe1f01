package outbox

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Backlogger is a store that can say how many events wait for a subscriber (MemoryStore,
// MongoStore). The observed store (store_observed.go) implements it when the store it wraps
// does.
//
//storeobserve:optional
type Backlogger interface {
	// Backlog counts the events pending for subscriber (due now or waiting for a retry, or
	// behind the gate) and returns the creation time of the oldest, zero when none.
	Backlog(ctx context.Context, subscriber string) (int, time.Time, error)
}

var (
	pendingDesc = prometheus.NewDesc("collab_outbox_pending_events",
		"Events stored by producer and not yet delivered to (nor refused by) subscriber: the lane's backlog, read from the outbox store at scrape time.",
		[]string{"producer", "subscriber"}, nil)
	oldestDesc = prometheus.NewDesc("collab_outbox_oldest_pending_age_seconds",
		"Age of the oldest event producer stored that subscriber has not yet handled (0 when none).",
		[]string{"producer", "subscriber"}, nil)
	backlogErrDesc = prometheus.NewDesc("collab_outbox_backlog_read_errors",
		"1 when the outbox store could not be read for the backlog of a lane at this scrape.",
		[]string{"producer", "subscriber"}, nil)
)

// backlogTimeout bounds the store reads of one scrape.
const backlogTimeout = 3 * time.Second

// NewCollector reports the backlog of each lane of the outboxes (pending events and the age of
// the oldest), read from their stores at scrape time: one count and one indexed read per lane,
// nothing on the delivery path. A producer's store is shared by its replicas, so every replica
// reports the same values (aggregate with max, not sum). Outboxes whose store cannot tell
// (not a Backlogger) are left out.
func NewCollector(outboxes ...*Outbox) prometheus.Collector {
	c := backlogCollector{}
	for _, o := range outboxes {
		if _, ok := o.store.(Backlogger); ok {
			c = append(c, o)
		}
	}
	return c
}

type backlogCollector []*Outbox

func (c backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- backlogErrDesc
}

func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogTimeout)
	defer cancel()
	for _, o := range c {
		o.collect(ctx, ch)
	}
}

func (o *Outbox) collect(ctx context.Context, ch chan<- prometheus.Metric) {
	b := o.store.(Backlogger)
	now := o.clock.Now()
	for _, sub := range o.routes.All {
		n, oldest, err := b.Backlog(ctx, sub)
		failed := 0.0
		if err != nil {
			o.log.Warn("outbox: reading the backlog for metrics", "subscriber", sub, "error", err)
			failed = 1
		} else {
			age := 0.0
			if n > 0 && !oldest.IsZero() {
				age = max(now.Sub(oldest).Seconds(), 0)
			}
			ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), o.producer, sub)
			ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, o.producer, sub)
		}
		ch <- prometheus.MustNewConstMetric(backlogErrDesc, prometheus.GaugeValue, failed, o.producer, sub)
	}
}
