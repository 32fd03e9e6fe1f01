package comments

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedWriter is a streaming ResponseWriter whose first write waits for the test (a client
// slow to take the stream's first bytes).
type gatedWriter struct {
	hdr     http.Header
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	out     strings.Builder
}

func (w *gatedWriter) Header() http.Header { return w.hdr }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
func (w *gatedWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.gate })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(b)
}

func (w *gatedWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// A change that the document's room reads while a new stream is still writing its first
// bytes does not wedge the stream: it sends the change and ends with its client (the stream
// blocked on its own wake-up channel for ever before, holding its slot of the user's 16 and
// keeping its room polling) (review of issue 24).
func TestReview24StreamWokenWhileOpening(t *testing.T) {
	s, _ := newServer(t, NewMemoryStore())
	s.bus, s.poll = nil, 5*time.Millisecond
	hub := newStreamHub(s)
	t.Cleanup(hub.Close)
	add(t, s, "d", thread("a1", "first"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &gatedWriter{hdr: http.Header{}, entered: make(chan struct{}), gate: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.ServeHTTP(w, httptest.NewRequest(http.MethodGet, StreamPrefix+"o/d?token=t:vi", nil).WithContext(ctx))
	}()
	<-w.entered // the stream joined its room and writes its first bytes
	reply(t, s, "while the stream opens")
	time.Sleep(100 * time.Millisecond) // the room reads the change and signals the stream
	close(w.gate)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(w.text(), "event: comment.add") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when its client went")
	}
	if !strings.Contains(w.text(), "event: comment.add") {
		t.Fatalf("the change was not sent: %q", w.text())
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.total != 0 {
		t.Fatalf("%d streams still counted", hub.total)
	}
}
