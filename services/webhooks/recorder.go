package webhooks

import (
	"context"
	"sync"
	"time"
)

// recordTimeout bounds one batch of outcomes written to the store.
const recordTimeout = 10 * time.Second

// recorder writes the outcomes of attempts in batches (group commit): a worker adds its
// outcome and waits until it is written; one writer, started when there is something to write
// and gone when there is nothing, writes everything added meanwhile with one RecordOutcomes
// call. However many workers finish at once, the store is called once per batch, and a worker
// returns only once its outcome is in the store (or the store failed).
type recorder struct {
	s       *Server
	mu      sync.Mutex
	pending []*pendingOutcome
	writing bool
}

type pendingOutcome struct {
	o    Outcome
	done chan struct{}
	err  error
}

func newRecorder(s *Server) *recorder { return &recorder{s: s} }

// record writes o with the others added meanwhile and returns the batch's error.
func (r *recorder) record(o Outcome) error {
	p := &pendingOutcome{o: o, done: make(chan struct{})}
	r.mu.Lock()
	r.pending = append(r.pending, p)
	start := !r.writing
	r.writing = true
	r.mu.Unlock()
	if start {
		go r.write()
	}
	<-p.done
	return p.err
}

// write writes batches until none is pending.
func (r *recorder) write() {
	for {
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		if len(batch) == 0 {
			r.writing = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		outs := make([]Outcome, len(batch))
		for i, p := range batch {
			outs[i] = p.o
		}
		// Not the attempts' context: an outcome is written even while the process stops.
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		lost, err := r.s.store.RecordOutcomes(ctx, outs, r.s.now())
		cancel()
		switch {
		case err != nil:
			r.s.log.ErrorContext(ctx, "webhooks: recording attempts", "outcomes", len(outs), "error", err)
		case lost > 0:
			r.s.log.InfoContext(ctx, "webhooks: deliveries' leases were lost before their outcomes were recorded", "deliveries", lost)
		}
		for _, p := range batch {
			p.err = err
			close(p.done)
		}
	}
}
