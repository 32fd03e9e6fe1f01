package main

import (
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// receiver is the loopback webhook receiver every case sends to: it counts the signed
// deliveries, keeps the arrival times of the "/rate" path and one body, and lets the paths
// under "/dead" hang until they are released.
type receiver struct {
	addr  string
	srv   *http.Server
	total atomic.Int64
	mu    sync.Mutex
	times []time.Time              // arrivals on /rate
	body  []byte                   // the first signed body received
	hangs map[string]chan struct{} // by path under /dead: closed when released
}

func startReceiver() (*receiver, error) {
	r := &receiver{hangs: map[string]chan struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = "http://" + ln.Addr().String()
	// The "/dead" target hangs on purpose, so the server has no write timeout.
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(r.serve)}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if strings.HasPrefix(req.URL.Path, "/dead") {
		select {
		case <-r.hang(req.URL.Path):
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-req.Context().Done():
		}
		return
	}
	if req.Header.Get("webhook-signature") == "" || req.Header.Get("webhook-id") == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.total.Add(1)
	if req.URL.Path == "/rate" || r.body == nil {
		r.mu.Lock()
		if req.URL.Path == "/rate" {
			r.times = append(r.times, time.Now())
		}
		if r.body == nil {
			r.body = body
		}
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// hang returns the channel that releases a path under /dead.
func (r *receiver) hang(path string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.hangs[path]
	if c == nil {
		c = make(chan struct{})
		r.hangs[path] = c
	}
	return c
}

// release makes a path under /dead answer (503), now and from now on, so the attempts hanging
// there end.
func (r *receiver) release(path string) {
	c := r.hang(path)
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// firstBody is the first signed body received (nil before any).
func (r *receiver) firstBody() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body
}

func (r *receiver) rateTimes() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

func (r *receiver) close() {
	r.mu.Lock()
	paths := slices.Collect(maps.Keys(r.hangs))
	r.mu.Unlock()
	for _, p := range paths {
		r.release(p)
	}
	_ = r.srv.Close()
}

// waitFor waits until want more deliveries than base have arrived, or the timeout passes.
func (r *receiver) waitFor(base, want int64, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for r.total.Load()-base < want {
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(500 * time.Microsecond)
	}
	return time.Now(), true
}
