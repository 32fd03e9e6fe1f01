package webhooks

import (
	"context"
	"sync"
	"time"
)

// recordTimeout bounds one batch of outcomes written to the store.
const recordTimeout = 10 * time.Second

// recorder writes the outcomes of attempts in batches (group commit): a worker adds its
// outcome to the batch being gathered and waits until that batch is written; one writer,
// started when there is something to write and gone when there is nothing, writes each batch
// with one RecordOutcomes call. However many workers finish at once, the store is called once
// per batch, and a worker returns only once its outcome is in the store (or the store failed).
type recorder struct {
	s       *Server
	mu      sync.Mutex
	next    *outcomeBatch // the batch being gathered; nil when none is
	writing bool
}

// outcomeBatch is outcomes written together; done closes when they are, err says how.
type outcomeBatch struct {
	outs []Outcome
	done chan struct{}
	err  error
}

func newRecorder(s *Server) *recorder { return &recorder{s: s} }

// record writes o with the others added meanwhile and returns the batch's error.
func (r *recorder) record(o Outcome) error {
	r.mu.Lock()
	b := r.next
	if b == nil {
		b = &outcomeBatch{done: make(chan struct{})}
		r.next = b
	}
	b.outs = append(b.outs, o)
	start := !r.writing
	r.writing = true
	r.mu.Unlock()
	if start {
		go r.write()
	}
	<-b.done
	return b.err
}

// write writes batches until none is being gathered.
func (r *recorder) write() {
	for {
		r.mu.Lock()
		b := r.next
		r.next = nil
		if b == nil {
			r.writing = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		// Not the attempts' context: an outcome is written even while the process stops.
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		lost, err := r.s.store.RecordOutcomes(ctx, b.outs, r.s.now())
		cancel()
		switch {
		case err != nil:
			r.s.log.ErrorContext(ctx, "webhooks: recording attempts", "outcomes", len(b.outs), "error", err)
		case lost > 0:
			r.s.log.InfoContext(ctx, "webhooks: deliveries' leases were lost before their outcomes were recorded", "deliveries", lost)
		}
		b.err = err
		close(b.done)
	}
}
