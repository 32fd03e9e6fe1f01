// Package wakeup carries wake-up messages between the processes of a deployment: hints that
// something changed in the store ("room X has entries after cursor C"), so that a process
// holding X reads the store at once instead of at its next poll.
//
// A message is only a hint: receivers read the store as without it, and a lost message costs
// latency, never data, as each receiver keeps a slow safety poll (docs/architecture.md,
// "Wake-ups between replicas"). Publishing never blocks the caller: what cannot be sent is
// dropped and counted. Two buses: InProcess, for one process (no engine configured), and NATS,
// for replicas on a NATS server or cluster.
package wakeup

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Handler takes a message's payload. It runs on the bus's delivery goroutine: it must return
// quickly (signal a worker, never read the store itself).
type Handler func(payload []byte)

// Bus publishes wake-ups and delivers them to the subscribers of their subject.
type Bus interface {
	// Publish sends payload to the subject's subscribers, in every process on the bus (this
	// one too). It never blocks on the engine and never fails: a message that cannot be sent
	// is dropped and counted.
	Publish(subject string, payload []byte)
	// Subscribe delivers the subject's messages to h until unsubscribe is called. With the
	// engine down it still succeeds: the subscription starts when the engine is back.
	Subscribe(subject string, h Handler) (unsubscribe func(), err error)
	// Missed counts a wake-up that was lost: a safety poll found what no wake-up announced.
	Missed()
	// Connected reports whether messages reach the other processes now (always true in
	// process).
	Connected() bool
	// Close stops the bus; Publish drops afterwards.
	Close()
}

// Metrics are the bus's series (docs/operations.md, "Wake-ups").
type Metrics struct {
	Published, Received, Dropped, Missed prometheus.Counter
	Up                                   prometheus.Gauge
}

// NewMetrics makes the series and registers them on reg when it is not nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Published: prometheus.NewCounter(prometheus.CounterOpts{Name: "collab_wakeup_published_total",
			Help: "Wake-ups published by this process."}),
		Received: prometheus.NewCounter(prometheus.CounterOpts{Name: "collab_wakeup_received_total",
			Help: "Wake-ups delivered to this process's subscribers."}),
		Dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "collab_wakeup_dropped_total",
			Help: "Wake-ups not sent: the send queue or the reconnect buffer was full, or the bus closed."}),
		Missed: prometheus.NewCounter(prometheus.CounterOpts{Name: "collab_wakeup_safety_poll_finds_total",
			Help: "Safety polls that found entries no wake-up announced: each is a lost wake-up."}),
		Up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "collab_wakeup_engine_up",
			Help: "1 when the wake-up engine is reachable (or none is configured), 0 when it is down."}),
	}
	m.Up.Set(1)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.Published, m.Received, m.Dropped, m.Missed, m.Up} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// InProcess is the bus of a single process: a subscriber gets the messages published in its
// own process, delivered on the publisher's goroutine.
type InProcess struct {
	m    *Metrics
	mu   sync.RWMutex
	subs map[string]map[*Handler]struct{}
}

// NewInProcess returns an in-process bus counting on m (nil: series of its own, unregistered).
func NewInProcess(m *Metrics) *InProcess {
	if m == nil {
		m, _ = NewMetrics(nil)
	}
	return &InProcess{m: m, subs: map[string]map[*Handler]struct{}{}}
}

// Publish calls the subject's handlers.
func (b *InProcess) Publish(subject string, payload []byte) {
	b.m.Published.Inc()
	b.mu.RLock()
	hs := make([]Handler, 0, len(b.subs[subject]))
	for h := range b.subs[subject] {
		hs = append(hs, *h)
	}
	b.mu.RUnlock()
	for _, h := range hs {
		b.m.Received.Inc()
		h(payload)
	}
}

// Subscribe adds h to the subject's handlers.
func (b *InProcess) Subscribe(subject string, h Handler) (func(), error) {
	p := &h
	b.mu.Lock()
	if b.subs[subject] == nil {
		b.subs[subject] = map[*Handler]struct{}{}
	}
	b.subs[subject][p] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.subs[subject], p)
		if len(b.subs[subject]) == 0 {
			delete(b.subs, subject)
		}
		b.mu.Unlock()
	}, nil
}

// Missed counts a lost wake-up.
func (b *InProcess) Missed() { b.m.Missed.Inc() }

// Connected is always true: there is no engine to lose.
func (b *InProcess) Connected() bool { return true }

// Close does nothing: the subscribers' unsubscribes free what they hold.
func (b *InProcess) Close() {}
