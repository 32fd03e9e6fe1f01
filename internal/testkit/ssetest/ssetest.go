// Package ssetest gives tests a real EventSource client for Server-Sent Events streams:
// e2e/eventsource/client.mjs, the `eventsource` npm package (pinned in its package-lock.json),
// which parses the stream, keeps the last event id and reconnects with Last-Event-ID as a
// browser's EventSource does. Start runs one for a URL; the test reads what it reports, in
// order, with Next and NextOf.
//
// It needs Node.js (18 or newer) and npm in PATH; without them the test fails (CI has both).
// The first use in a test binary installs e2e/eventsource's locked dependencies with `npm ci`
// when node_modules lacks them or holds other versions, under a file lock so parallel test
// binaries install once (internal/testkit/nodeproject).
package ssetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/nodeproject"
)

// project is e2e/eventsource, the EventSource client of the tests.
var project = nodeproject.New(nodeproject.Spec{
	Rel: filepath.Join("e2e", "eventsource"), Marker: "client.mjs", Who: "ssetest", What: "the EventSource client of the tests",
})

// Kinds of Event, what client.mjs reports (its header comment says when).
const (
	KindRequest    = "request"    // a request EventSource made (LastEventID: the header it sent)
	KindOpen       = "open"       // the stream opened
	KindMessage    = "message"    // an event a listener got (Type, ID, Data)
	KindUnlistened = "unlistened" // an event of a type nobody listens to
	KindError      = "error"      // an error event (ReadyState: Connecting or Closed)
	KindClosed     = "closed"     // the client closed on the close command
	KindFatal      = "fatal"      // a bad command line or command
)

// ReadyState values of an error event.
const (
	Connecting = 0 // EventSource reconnects after its retry delay
	Closed     = 2 // EventSource gave up: a status other than 200 or a wrong content type
)

// Event is one line client.mjs reported.
type Event struct {
	Kind string `json:"event"`
	// Type, ID and Data of a message: the event's type ("message" without an event: field),
	// its lastEventId and its data.
	Type string `json:"type,omitempty"`
	ID   string `json:"id,omitempty"`
	Data string `json:"data,omitempty"`
	// URL and LastEventID of a request (LastEventID nil: no Last-Event-ID header).
	URL         string  `json:"url,omitempty"`
	LastEventID *string `json:"lastEventId,omitempty"`
	// Code (the HTTP status, when there is one), Message and ReadyState of an error; Message
	// of a fatal report.
	Code       *int   `json:"code,omitempty"`
	Message    string `json:"message,omitempty"`
	ReadyState int    `json:"readyState,omitempty"`
}

// Option configures Start.
type Option func(*[]string)

// WithHeader adds a request header to every request of the client (e.g. Authorization; a
// browser's EventSource cannot, so front ends put tokens in the URL).
func WithHeader(name, value string) Option {
	return func(args *[]string) { *args = append(*args, "--header", name+": "+value) }
}

// WithTypes makes the client listen to events of these types besides "message", as a front end
// listens to the types it knows; events of other types are reported as KindUnlistened.
func WithTypes(types ...string) Option {
	return func(args *[]string) { *args = append(*args, "--types", strings.Join(types, ",")) }
}

// Client is a running client.mjs. Its methods are safe for concurrent use.
type Client struct {
	url    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer // written by exec's copier until exited is closed
	exited chan struct{}

	mu      sync.Mutex
	events  []Event
	cursor  int           // index after the last event Next or NextOf returned
	changed chan struct{} // closed (and replaced) when an event arrives
	bad     []string      // stdout lines that were not events
}

// Start starts a client opening url; it stops when the test ends. It fails the test when
// Node.js or npm is missing or the client does not start.
func Start(t testing.TB, url string, opts ...Option) *Client {
	t.Helper()
	env, err := project.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"client.mjs", url}
	for _, o := range opts {
		o(&args)
	}
	c := &Client{url: url, exited: make(chan struct{}), changed: make(chan struct{})}
	c.cmd = exec.Command(env.Node, args...)
	c.cmd.Dir = env.Dir
	c.cmd.Stderr = &c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("ssetest: starting %s %s: %v", env.Node, strings.Join(args, " "), err)
	}
	go c.read(stdout)
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("ssetest: client.mjs (%s) events:\n%s%s", url, c.eventLog(), c.exitInfo())
		}
	})
	return c
}

// read takes client.mjs's stdout, one event a line, until it exits.
func (c *Client) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			c.add(line)
		}
		if err != nil {
			break
		}
	}
	_ = c.cmd.Wait() // its exit status is in ProcessState, shown by exitInfo
	close(c.exited)
}

func (c *Client) add(line []byte) {
	var ev Event
	err := json.Unmarshal(line, &ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || ev.Kind == "" {
		c.bad = append(c.bad, string(line))
		return
	}
	c.events = append(c.events, ev)
	close(c.changed)
	c.changed = make(chan struct{})
}

// Next waits for the next event of any kind after the last one Next or NextOf returned.
func (c *Client) Next(ctx context.Context) (Event, error) { return c.NextOf(ctx) }

// NextOf waits for the next event of one of kinds (any kind when none is given) after the last
// one Next or NextOf returned, passing over the others. It fails when ctx ends first, or the
// client has exited and no such event is left.
func (c *Client) NextOf(ctx context.Context, kinds ...string) (Event, error) {
	for {
		c.mu.Lock()
		for c.cursor < len(c.events) {
			ev := c.events[c.cursor]
			c.cursor++
			if len(kinds) == 0 || contains(kinds, ev.Kind) {
				c.mu.Unlock()
				return ev, nil
			}
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.exited:
			c.mu.Lock()
			more := c.cursor < len(c.events)
			c.mu.Unlock()
			if !more {
				return Event{}, fmt.Errorf("ssetest: client.mjs exited before a %v event; events:\n%s%s", kinds, c.eventLog(), c.exitInfo())
			}
		case <-ctx.Done():
			return Event{}, fmt.Errorf("ssetest: no %v event from client.mjs (%s): %w; events:\n%s", kinds, c.url, ctx.Err(), c.eventLog())
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Events returns every event so far, in order.
func (c *Client) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}

// Close closes the EventSource (it reconnects no more) and waits up to 10 s for the client to
// exit.
func (c *Client) Close() error {
	if _, err := c.stdin.Write([]byte(`{"cmd":"close"}` + "\n")); err != nil {
		return fmt.Errorf("ssetest: close command: %w%s", err, c.exitInfo())
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		return fmt.Errorf("ssetest: client.mjs did not exit within 10 s of the close command (killed it)")
	}
}

// stop ends the client: its stdin closes (it exits then), and after 5 s it is killed.
func (c *Client) stop() {
	_ = c.stdin.Close() // it exits when its stdin ends
	select {
	case <-c.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = c.cmd.Process.Kill()
	<-c.exited // WaitDelay bounds cmd.Wait
}

// exitInfo says how the client ended and what it wrote on stderr, once it has exited.
func (c *Client) exitInfo() string {
	select {
	case <-c.exited:
		return fmt.Sprintf("\nclient.mjs has exited (%v); stderr:\n%s", c.cmd.ProcessState, c.stderr.String())
	default:
		return ""
	}
}

// eventLog is the events so far, one a line, long data shortened, and any stdout line that
// was not an event.
func (c *Client) eventLog() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, ev := range c.events {
		line, _ := json.Marshal(ev)
		if len(line) > 400 {
			line = append(line[:400:400], "..."...)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, l := range c.bad {
		fmt.Fprintf(&b, "not an event: %.400s\n", l)
	}
	return b.String()
}
