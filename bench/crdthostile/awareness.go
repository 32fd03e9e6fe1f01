package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/yjs"
)

// Finding 2, awareness without a size bound: a room kept every state whole and sent them all
// to each joiner in one frame. The old server grew by about 290 MB per socket sending 16
// states of 7.9 MiB, and a joiner got a 112 MB frame.
const (
	// awarenessStateMax: on the fixed server a state over it closes the connection (4413).
	awarenessStateMax = 8 << 10
	// awarenessOverBytes is the probe's state, just over the limit.
	awarenessOverBytes = awarenessStateMax + 64
	// awarenessGiantBytes states, one per frame, for awarenessGiantClients client ids: under
	// the old frame limit (8 MiB); the fixed server's (about 5 MiB) refuses them earlier.
	awarenessGiantBytes   = 79 << 20 / 10
	awarenessGiantClients = 16
	// awarenessMaxGrowth bounds the server's peak RSS growth through the giant states.
	awarenessMaxGrowth = 100 << 20
	// joinerFrameMax bounds the awareness frame a joiner gets after the giant states: a room
	// keeps at most 1 MiB of states (and here should keep none of them).
	joinerFrameMax = 1<<20 + 16<<10
	// crowdConns users' connections send one crowdStateBytes state each (under the limit,
	// together past the room's 1 MiB); a joiner's frame must stay under crowdJoinerFrameMax.
	crowdConns          = 200
	crowdStateBytes     = 7 << 10
	crowdJoinerFrameMax = 11 << 20 / 10
	// closeWait is how long a refusal may take to arrive; joinWait how long a joiner waits
	// for an awareness frame.
	closeWait = 2 * time.Second
	joinWait  = 2 * time.Second
)

const (
	nameAwarenessLarge = "2a. awareness: 7.9 MiB states"
	nameAwarenessMany  = "2b. awareness: 200 × 7 KiB states"
)

// awarenessLargeResult is what finding 2's first scenario measured.
type awarenessLargeResult struct {
	Result
	// Probe is the socket that sent one state just over the limit; Giant the one that sent
	// the 7.9 MiB states (GiantSent of them before it was closed); ProbeSaw and GiantSaw how
	// they stood once the server had had closeWait to refuse them.
	Probe, Giant       *closeWatch
	GiantSent          int
	ProbeSaw, GiantSaw string
	// JoinerFrame is the size of the first awareness frame a joiner got (0: none; -1: no
	// joiner came).
	JoinerFrame int64
}

// describe is the attacker's side of the outcome, as far as the attack went.
func (r *awarenessLargeResult) describe() string {
	var parts []string
	if r.ProbeSaw != "" {
		parts = append(parts, "state of 8 KiB + 64 B: "+r.ProbeSaw)
	}
	if r.GiantSaw != "" {
		parts = append(parts, fmt.Sprintf("%d states of 7.9 MiB sent: %s", r.GiantSent, r.GiantSaw))
	}
	if r.JoinerFrame >= 0 {
		parts = append(parts, "joiner's awareness frame "+size(r.JoinerFrame))
	}
	return strings.Join(parts, "; ")
}

func runAwarenessLarge(ctx context.Context, cfg config) awarenessLargeResult {
	r := awarenessLargeResult{JoinerFrame: -1}
	attack := func(ctx context.Context, t *target) error {
		defer func() { t.res.Outcome = r.describe() }()
		return t.honestRun(ctx, func(ctx context.Context) error {
			probe, err := t.dialAs(ctx, "aware-probe", collabproc.RoleViewer)
			if err != nil {
				return err
			}
			r.Probe = watchClose(ctx, probe)
			defer r.Probe.close()
			if err := probe.Write(ctx, websocket.MessageBinary, awarenessFrame(1, awarenessOverBytes)); err != nil {
				return fmt.Errorf("probe: %w", err)
			}
			r.ProbeSaw = r.Probe.await(closeWait)

			giant, err := t.dialAs(ctx, "aware-giant", collabproc.RoleViewer)
			if err != nil {
				return err
			}
			r.Giant = watchClose(ctx, giant)
			defer r.Giant.close()
			for i := range awarenessGiantClients {
				if r.Giant.ended() || giant.Write(ctx, websocket.MessageBinary, awarenessFrame(uint64(100+i), awarenessGiantBytes)) != nil {
					break
				}
				r.GiantSent++
			}
			r.GiantSaw = r.Giant.await(closeWait)
			joined, err := t.joinerFrame(ctx)
			if err != nil {
				return err
			}
			r.JoinerFrame = joined
			return nil
		})
	}
	r.Result = session(ctx, cfg, nameAwarenessLarge, awarenessMaxGrowth, addHello, attack)
	return r
}

// awarenessManyResult is what finding 2's second scenario measured.
type awarenessManyResult struct {
	Result
	// Sent counts the connections that sent their state; JoinerFrame as above.
	Sent        int
	JoinerFrame int64
}

func runAwarenessMany(ctx context.Context, cfg config) awarenessManyResult {
	r := awarenessManyResult{JoinerFrame: -1}
	attack := func(ctx context.Context, t *target) error {
		return t.honestRun(ctx, func(ctx context.Context) error {
			socks, sent, err := t.crowd(ctx)
			defer func() {
				for _, ws := range socks {
					ws.CloseNow()
				}
			}()
			if err != nil {
				return err
			}
			r.Sent = sent
			t.res.Outcome = fmt.Sprintf("%d connections sent a 7 KiB state", r.Sent)
			t.settle(ctx)
			joined, err := t.joinerFrame(ctx)
			if err != nil {
				return err
			}
			r.JoinerFrame = joined
			t.res.Outcome += "; joiner's awareness frame " + size(r.JoinerFrame)
			return nil
		})
	}
	r.Result = session(ctx, cfg, nameAwarenessMany, 0, addHello, attack)
	return r
}

// crowd connects crowdConns viewers, one user each (a per-user cap must not be what stops
// them), each sending one state and reading (discarding) what the room relays. It returns
// the sockets and how many states were written.
func (t *target) crowd(ctx context.Context) ([]*websocket.Conn, int, error) {
	socks := make([]*websocket.Conn, crowdConns)
	errs := make([]error, crowdConns)
	var sent atomic.Int64
	type job struct {
		i      int
		client uint64
	}
	work := make(chan job)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range work {
				ws, err := t.dialAs(ctx, fmt.Sprintf("crowd-%d", j.i), collabproc.RoleViewer)
				if err != nil {
					errs[j.i] = err
					continue
				}
				socks[j.i] = ws
				watchClose(ctx, ws)
				if ws.Write(ctx, websocket.MessageBinary, awarenessFrame(j.client, crowdStateBytes)) == nil {
					sent.Add(1)
				}
			}
		})
	}
	client := uint64(1000)
	for i := range crowdConns {
		work <- job{i, client}
		client++
	}
	close(work)
	wg.Wait()
	var open []*websocket.Conn
	for _, ws := range socks {
		if ws != nil {
			open = append(open, ws)
		}
	}
	return open, int(sent.Load()), errors.Join(errs...)
}

// dialAs opens a raw socket to the attacked editor for user with role (a token of its own).
func (t *target) dialAs(ctx context.Context, user, role string) (*websocket.Conn, error) {
	url, err := t.syncURL(ctx, user, role)
	if err != nil {
		return nil, err
	}
	ws, err := dialRaw(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", user, err)
	}
	return ws, nil
}

// joinerFrame connects a fresh viewer, asks for the room's awareness, and returns the size
// of the first awareness frame it gets within joinWait (0: none came).
func (t *target) joinerFrame(ctx context.Context) (int64, error) {
	ws, err := t.dialAs(ctx, "joiner", collabproc.RoleViewer)
	if err != nil {
		return 0, err
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte{yjs.MessageQueryAwareness}); err != nil {
		return 0, fmt.Errorf("joiner: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, joinWait)
	defer cancel()
	for {
		f, err := readFrame(rctx, ws)
		if err != nil {
			if ctx.Err() == nil && rctx.Err() != nil {
				return 0, nil // none within joinWait
			}
			return 0, fmt.Errorf("joiner: %w", err)
		}
		if len(f.head) > 0 && f.head[0] == yjs.MessageAwareness {
			return f.size, nil
		}
	}
}

// awarenessFrame is an awareness update of one client with a JSON state of n bytes.
func awarenessFrame(client uint64, n int) []byte {
	state := `{"s":"` + strings.Repeat("a", n-8) + `"}`
	return yjs.AwarenessFrame([]yjs.AwarenessState{{Client: client, Clock: 1, State: json.RawMessage(state)}})
}

// addHello gives the attacked editor a small text.
func addHello(ctx context.Context, t *target) error {
	return t.srv.Call(ctx, "/v2/crdt/add", map[string]any{"organizationId": t.org, "documentId": t.doc,
		"editorId": t.editor, "data": "hello", "type": "text"}, nil)
}

func size(n int64) string {
	switch {
	case n == 0:
		return "none"
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
