package yjstest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Client is a running e2e/yjs/client.mjs: a y-websocket client (y-websocket's
// WebsocketProvider and a Y.Doc) driven by commands, reporting what happens as events. client.mjs
// lists the commands and events. Its methods are safe for concurrent use.
type Client struct {
	p *proc

	mu      sync.Mutex
	events  []map[string]any
	cursor  map[string]int // per event name: the index after the last one Next returned
	changed chan struct{}  // closed (and replaced) when an event arrives
	bad     []string       // stdout lines that were not JSON objects
}

// ClientOption configures StartClient.
type ClientOption func(*[]string)

// WithoutReconnect makes the provider give up after the first closed connection instead of
// reconnecting (by default y-websocket reconnects with backoff, except after close codes
// 4400-4499).
func WithoutReconnect() ClientOption {
	return func(args *[]string) { *args = append(*args, "--no-reconnect") }
}

// StartClient starts a client connecting to serverURL (e.g. "ws://127.0.0.1:PORT/v2/crdt/sync")
// for room ("org/doc/editor"), with token as the token query parameter: the WebSocket URL is
// serverURL/room?token=token. It stops when the test ends (it exits when its stdin closes). It
// fails the test when Node.js or npm is missing or the client does not start.
func StartClient(t testing.TB, serverURL, room, token string, opts ...ClientOption) *Client {
	t.Helper()
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"client.mjs", serverURL, room, token}
	for _, o := range opts {
		o(&args)
	}
	c := &Client{cursor: map[string]int{}, changed: make(chan struct{})}
	c.p, err = startProc(env, c.onLine, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("yjstest: client.mjs (%s %s) events:\n%s", serverURL, room, c.eventLog())
			if c.p.stderr.Len() > 0 {
				t.Logf("yjstest: client.mjs's stderr:\n%s", c.p.stderr)
			}
		}
	})
	return c
}

func (c *Client) onLine(line []byte) {
	var ev map[string]any
	err := decodeJSON(line, &ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := ev["event"].(string); err != nil || !ok {
		c.bad = append(c.bad, string(line))
		return
	}
	c.events = append(c.events, ev)
	close(c.changed)
	c.changed = make(chan struct{})
}

// Send writes a command (a value encoding to a JSON object such as map[string]any{"cmd":
// "insertText", "root": "content", "index": 0, "text": "hi"}). A command client.mjs rejects
// comes back as an "error" event.
func (c *Client) Send(cmd any) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("yjstest: client command: %w", err)
	}
	return c.p.writeLine(b)
}

// Next waits for the next event named name ("synced", "update", "awareness", ...) after the
// last one Next returned for that name, and returns it (numbers as json.Number). Events of other
// names stay for their own Next calls. It fails when ctx ends first or the client has exited and
// no such event is left.
func (c *Client) Next(ctx context.Context, name string) (map[string]any, error) {
	for {
		c.mu.Lock()
		for i := c.cursor[name]; i < len(c.events); i++ {
			if c.events[i]["event"] == name {
				c.cursor[name] = i + 1
				ev := c.events[i]
				c.mu.Unlock()
				return ev, nil
			}
		}
		c.cursor[name] = len(c.events)
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-c.p.exited:
			// Look once more: the last events may have come with the exit.
			c.mu.Lock()
			more := c.cursor[name] < len(c.events)
			c.mu.Unlock()
			if !more {
				return nil, fmt.Errorf("yjstest: client.mjs exited before a %q event; events:\n%s%s",
					name, c.eventLog(), c.p.exitInfo())
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("yjstest: no %q event from client.mjs: %w; events:\n%s", name, ctx.Err(), c.eventLog())
		}
	}
}

// View asks for the client's view of roots (view.mjs's view of its Y.Doc) and waits for it.
func (c *Client) View(ctx context.Context, roots []Root) (View, error) {
	if err := c.Send(map[string]any{"cmd": "view", "roots": nonNilRoots(roots)}); err != nil {
		return View{}, err
	}
	ev, err := c.Next(ctx, "view")
	if err != nil {
		return View{}, err
	}
	b, err := json.Marshal(ev["view"])
	if err != nil {
		return View{}, fmt.Errorf("yjstest: view event: %w", err)
	}
	var v View
	if err := decodeJSON(b, &v); err != nil {
		return View{}, fmt.Errorf("yjstest: view event: %w", err)
	}
	return v, nil
}

// Events returns every event so far, in order.
func (c *Client) Events() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.events...)
}

// Close sends the close command and waits (up to 10 s) for the client to exit.
func (c *Client) Close() error {
	if err := c.Send(map[string]any{"cmd": "close"}); err != nil {
		return err
	}
	select {
	case <-c.p.exited:
		return nil
	case <-time.After(10 * time.Second):
		c.p.kill()
		return fmt.Errorf("yjstest: client.mjs did not exit within 10 s of the close command (killed it)")
	}
}

// eventLog is the events so far, one JSON object a line, long ones shortened.
func (c *Client) eventLog() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []byte
	for _, ev := range c.events {
		b, _ := json.Marshal(ev)
		if len(b) > 300 {
			b = append(b[:300:300], "…"...)
		}
		out = append(append(out, "  "...), b...)
		out = append(out, '\n')
	}
	for _, l := range c.bad {
		out = append(out, fmt.Sprintf("  (not an event) %.300q\n", l)...)
	}
	return string(out)
}
