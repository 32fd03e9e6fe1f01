package ssetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// scriptedServer answers the n-th request to its stream with the n-th of its answers, and
// records each request's Last-Event-ID and Authorization.
type scriptedServer struct {
	answers []func(w http.ResponseWriter)

	mu       sync.Mutex
	requests []http.Header
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, r.Header.Clone())
	s.mu.Unlock()
	if n >= len(s.answers) {
		w.WriteHeader(http.StatusNoContent) // EventSource stops reconnecting
		return
	}
	s.answers[n](w)
}

func stream(body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}
}

func next(t *testing.T, c *Client, kinds ...string) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.NextOf(ctx, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// The client reports the events its listeners get and those of other types, reconnects by
// itself after the stream ends with the last id as Last-Event-ID, sends the given headers, and
// gives up on a refusal with its status.
func TestClientReconnectsWithLastEventID(t *testing.T) {
	srv := &scriptedServer{answers: []func(http.ResponseWriter){
		stream("retry: 50\n\nid: 1\nevent: a\ndata: one\n\nid: 2\nevent: b\ndata: two\ndata: lines\n\n"),
		stream("id: 3\nevent: z\ndata: other\n\nid: 4\ndata: plain\n\n"),
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":{"status":"PERMISSION_DENIED","message":"no"}}`)
		},
	}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c := Start(t, hs.URL+"/s?token=x", WithTypes("a", "b"), WithHeader("Authorization", "Bearer tok"))

	if ev := next(t, c); ev.Kind != KindRequest || ev.LastEventID != nil || ev.URL != hs.URL+"/s?token=x" {
		t.Fatalf("first report %+v, want a request without Last-Event-ID", ev)
	}
	next(t, c, KindOpen)
	for _, want := range []Event{{Kind: KindMessage, Type: "a", ID: "1", Data: "one"}, {Kind: KindMessage, Type: "b", ID: "2", Data: "two\nlines"}} {
		if ev := next(t, c); ev.Kind != want.Kind || ev.Type != want.Type || ev.ID != want.ID || ev.Data != want.Data {
			t.Fatalf("got %+v, want %+v", ev, want)
		}
	}
	if ev := next(t, c); ev.Kind != KindError || ev.ReadyState != Connecting {
		t.Fatalf("after the stream ended: %+v, want an error while reconnecting", ev)
	}
	if ev := next(t, c); ev.Kind != KindRequest || ev.LastEventID == nil || *ev.LastEventID != "2" {
		t.Fatalf("reconnect %+v, want Last-Event-ID 2", ev)
	}
	next(t, c, KindOpen)
	if ev := next(t, c); ev.Kind != KindUnlistened || ev.Type != "z" || ev.ID != "3" {
		t.Fatalf("got %+v, want the unlistened z", ev)
	}
	if ev := next(t, c); ev.Kind != KindMessage || ev.Type != "message" || ev.ID != "4" || ev.Data != "plain" {
		t.Fatalf("got %+v, want a plain message", ev)
	}
	next(t, c, KindError)
	if ev := next(t, c, KindRequest); *ev.LastEventID != "4" {
		t.Fatalf("second reconnect %+v, want Last-Event-ID 4", ev)
	}
	if ev := next(t, c); ev.Kind != KindError || ev.ReadyState != Closed || ev.Code == nil || *ev.Code != http.StatusForbidden {
		t.Fatalf("after a 403: %+v, want an error with the status, closed", ev)
	}
	srv.mu.Lock()
	for i, h := range srv.requests {
		if h.Get("Authorization") != "Bearer tok" || h.Get("Accept") != "text/event-stream" {
			t.Errorf("request %d headers %v", i, h)
		}
	}
	srv.mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	next(t, c, KindClosed)
}

// An unknown command is reported, and the client goes on; a client whose server is gone says
// so with errors while it keeps reconnecting.
func TestClientBadCommandAndNoServer(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL + "/gone"
	hs.Close()
	c := Start(t, url)
	if ev := next(t, c, KindError); ev.ReadyState != Connecting {
		t.Fatalf("no server: %+v, want an error while reconnecting", ev)
	}
	if _, err := c.stdin.Write([]byte(`{"cmd":"fly"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, c, KindFatal); ev.Message == "" {
		t.Fatalf("fatal %+v without a message", ev)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
