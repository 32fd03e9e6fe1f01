package collabproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// WatchEvery is how often a Watchdog samples the server's RSS.
const WatchEvery = 50 * time.Millisecond

// ErrOverLimit is the cause of a Watchdog's context when the server's memory passed the
// limit and the server was killed; ErrExited when the server exited on its own meanwhile.
var (
	ErrOverLimit = errors.New("the server's memory passed the watchdog's limit; the server was killed")
	ErrExited    = errors.New("the server exited while watched")
)

// Watchdog keeps a machine safe from a server whose memory runs away: it samples the server's
// RSS every WatchEvery and, once it passes the limit, reads the peak, kills the server and
// cancels its context, so the work driving the server stops at once.
type Watchdog struct {
	s      *Server
	limit  int64
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	report WatchReport
}

// WatchReport is what a Watchdog saw.
type WatchReport struct {
	// MaxRSS is the highest RSS sampled; PeakRSS the kernel's peak (VmHWM) at the last sample
	// or just before the kill, at least MaxRSS.
	MaxRSS, PeakRSS int64
	// CPU is the server's CPU time at the last sample.
	CPU time.Duration
	// Err is nil, ErrOverLimit (with the figures) or ErrExited.
	Err error
}

// Watch starts a watchdog with a limit in bytes of RSS, and returns it with a context derived
// from ctx that ends when it trips (context.Cause: an error wrapping ErrOverLimit or
// ErrExited). Stop it with Stop.
func (s *Server) Watch(ctx context.Context, limit int64) (*Watchdog, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{s: s, limit: limit, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w, ctx
}

func (w *Watchdog) run() {
	defer close(w.done)
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for {
		err := w.sample()
		if err == nil {
			select {
			case <-w.stop:
				err = w.sample() // the last one
				if err == nil {
					return
				}
			case <-w.s.done:
				err = ErrExited
			case <-t.C:
				continue
			}
		}
		w.mu.Lock()
		w.report.Err = err
		w.mu.Unlock()
		w.cancel(err)
		return
	}
}

// sample reads the figures once; past the limit it kills the server and says so.
func (w *Watchdog) sample() error {
	st, err := w.s.Stats()
	if err != nil {
		return nil //nolint:nilerr // the process is exiting: run sees it on s.done
	}
	w.mu.Lock()
	w.report.MaxRSS = max(w.report.MaxRSS, st.RSS)
	w.report.PeakRSS = max(w.report.PeakRSS, st.PeakRSS, st.RSS)
	w.report.CPU = st.CPU
	w.mu.Unlock()
	if st.RSS <= w.limit {
		return nil
	}
	_ = w.s.Kill()
	return fmt.Errorf("%w: RSS %d MiB, limit %d MiB", ErrOverLimit, st.RSS>>20, w.limit>>20)
}

// Stop ends the watching (a last sample first, unless it tripped) and reports.
func (w *Watchdog) Stop() WatchReport {
	select {
	case <-w.done:
	default:
		close(w.stop)
		<-w.done
	}
	w.cancel(nil)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.report
}

// Err is nil while the watchdog has not tripped.
func (w *Watchdog) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.report.Err
}
