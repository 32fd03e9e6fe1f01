package memory

import (
	"context"
	"errors"
	"sync"
	"time"

	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"
)

// Re-embedding: judgments whose vectors come from another embedder than the configured one
// (after a change of --embedder or of the remote model) are re-embedded in the background, a
// batch at a time, by every process that runs the service (SetVectors checks the revision,
// so two processes or a concurrent update never store stale vectors). Until then searches
// leave them out; GetEmbeddingStatus counts them.
const (
	reembedBatch   = 32
	reembedIdle    = 30 * time.Second // between looks when nothing was pending
	reembedBackoff = 5 * time.Second  // first wait after a failure, doubling to reembedMaxWait
	reembedMaxWait = 5 * time.Minute
)

// reembedState is the job's status.
type reembedState struct {
	mu        sync.Mutex
	state     string // idle, running, failing
	done      int64
	lastError string
	// skipped are judgments the embedder refused alone, left out of the job until the process
	// restarts (at most maxRefused, the oldest forgotten first).
	skipped []JudgmentRef
}

const maxRefused = 1000

func (r *reembedState) refuse(ref JudgmentRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.skipped) == maxRefused {
		r.skipped = r.skipped[1:]
	}
	r.skipped = append(r.skipped, ref)
}

func (r *reembedState) refused() []JudgmentRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]JudgmentRef(nil), r.skipped...)
}

func (r *reembedState) add(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done += int64(n)
}

func (r *reembedState) set(state string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = state
	if err != nil {
		r.lastError = err.Error()
	} else if state != "failing" {
		r.lastError = ""
	}
}

// ReembedBatch re-embeds up to one batch of stale judgments and returns how many it stored
// and whether more may be pending.
func (s *Server) ReembedBatch(ctx context.Context) (int, bool, error) {
	name := s.embedder.Name()
	stale, err := s.store.StaleJudgments(ctx, name, s.embedder.Dim(), reembedBatch, s.reembed.refused())
	if err != nil || len(stale) == 0 {
		return 0, false, err
	}
	if err := s.vectorize(ctx, stale, msgUnavailable); err != nil {
		// One text the model refuses (too long for a remote model's context, say) must not
		// hold the rest back: one at a time. When some pass alone, the model is up and those
		// still refused alone are set aside (counted in the status) until the process
		// restarts; when none pass, the model is down and nothing is set aside.
		if len(stale) == 1 {
			return 0, true, err
		}
		var ok []*Judgment
		var refused []JudgmentRef
		for _, j := range stale {
			if s.vectorize(ctx, []*Judgment{j}, msgUnavailable) == nil {
				ok = append(ok, j)
			} else {
				refused = append(refused, RefOf(j))
			}
		}
		if len(ok) == 0 || ctx.Err() != nil {
			return 0, true, err
		}
		for _, r := range refused {
			s.reembed.refuse(r)
		}
		stale = ok
	}
	n := 0
	defer func() { s.reembed.add(n) }()
	for _, j := range stale {
		err := s.store.SetVectors(ctx, j, name, j.ReviewVector, j.ContentVector)
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrChanged):
			// Rewritten (with this embedder's vectors) or deleted meanwhile.
		default:
			return n, true, err
		}
	}
	return n, len(stale) == reembedBatch || n < len(stale), nil
}

// RunReembedding re-embeds stale judgments until ctx ends: the service's Instance.Run.
func (s *Server) RunReembedding(ctx context.Context) {
	wait := time.Duration(0)
	backoff := reembedBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		_, more, err := s.ReembedBatch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.WarnContext(ctx, "re-embedding failed; retrying", "embedder", s.embedder.Name(), "error", err, "retry_in", backoff)
			s.reembed.set("failing", err)
			wait, backoff = backoff, min(2*backoff, reembedMaxWait)
		case more:
			s.reembed.set("running", nil)
			wait, backoff = 0, reembedBackoff
		default:
			s.reembed.set("idle", nil)
			wait, backoff = reembedIdle, reembedBackoff
		}
	}
}

func (s *Server) GetEmbeddingStatus(ctx context.Context, _ *memoryv1.GetEmbeddingStatusRequest) (*memoryv1.GetEmbeddingStatusResponse, error) {
	pending, err := s.store.CountStale(ctx, s.embedder.Name(), s.embedder.Dim())
	if err != nil {
		return nil, err
	}
	s.reembed.mu.Lock()
	defer s.reembed.mu.Unlock()
	state := s.reembed.state
	switch {
	case state == "failing":
	case pending > 0:
		state = "running"
	default:
		state = "idle"
	}
	return &memoryv1.GetEmbeddingStatusResponse{
		Embedder: s.embedder.Name(), Dim: int32(s.embedder.Dim()), Pending: float64(pending), //nolint:gosec // G115: an embedding size (512, or a remote answer's, whose size is limited), far below 2^31
		Reembedded: float64(s.reembed.done), State: state, LastError: s.reembed.lastError,
		Refused: float64(len(s.reembed.skipped)),
	}, nil
}
