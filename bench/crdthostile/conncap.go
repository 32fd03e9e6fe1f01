package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/yjs"
)

// Finding 5, no per-user connection cap: one token could fill a room. The old server admitted
// 480 connections of one token in 0.4 s and locked everyone else out at the room's cap of
// 1000.
const (
	// floodConns connections of one token, opened at once.
	floodConns = 1000
	// floodPerUser: the fixed server admits at most that many of one user's connections to a
	// room and closes the others with floodRefusal.
	floodPerUser = 20
	floodRefusal = websocket.StatusCode(4429)
	// floodAnswer is how long a connection waits for the server's first frame (admitted) or
	// its close (refused).
	floodAnswer = 5 * time.Second
)

const nameConnCap = "5. 1000 connections of one token"

// connCapResult is what finding 5's scenario measured.
type connCapResult struct {
	Result
	// Admitted counts the connections the room took (they got the server's step 1); Closed
	// the others by close code (-1: ended without one); DialErrs those refused before the
	// WebSocket opened; Took the time until every connection was decided.
	Admitted int
	Closed   map[websocket.StatusCode]int
	DialErrs int
	Took     time.Duration
}

func runConnCap(ctx context.Context, cfg config) connCapResult {
	var r connCapResult
	attack := func(ctx context.Context, t *target) error {
		url, err := t.syncURL(ctx, "flooder", collabproc.RoleEditor)
		if err != nil {
			return err
		}
		start := time.Now()
		socks := t.flood(ctx, url, &r)
		r.Took = time.Since(start)
		defer func() {
			for _, ws := range socks {
				ws.CloseNow()
			}
		}()
		t.res.Outcome = fmt.Sprintf("%d of %d admitted in %.1f s%s", r.Admitted, floodConns, r.Took.Seconds(), r.refusals())
		if t.stopped(ctx) {
			return nil
		}
		// Another user's clients, while the flood's admitted connections stay open.
		pair, err := t.connectHonest(ctx)
		if err != nil {
			t.res.Honest = err
			return nil
		}
		defer pair.close()
		pair.check(ctx, t.res)
		return nil
	}
	r.Result = session(ctx, cfg, nameConnCap, 0, addHello, attack)
	return r
}

// flood opens floodConns connections with one URL at once and sorts them by the server's
// answer; it returns the admitted ones, left open.
func (t *target) flood(ctx context.Context, url string, r *connCapResult) []*websocket.Conn {
	r.Closed = map[websocket.StatusCode]int{}
	var mu sync.Mutex
	var admitted []*websocket.Conn
	var wg sync.WaitGroup
	for range floodConns {
		wg.Go(func() {
			ws, err := dialRaw(ctx, url)
			if err != nil {
				mu.Lock()
				r.DialErrs++
				mu.Unlock()
				return
			}
			actx, cancel := context.WithTimeout(ctx, floodAnswer)
			defer cancel()
			f, err := readFrame(actx, ws)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && len(f.head) > 1 && f.head[0] == yjs.MessageSync && f.head[1] == yjs.SyncStep1 {
				r.Admitted++
				admitted = append(admitted, ws)
				return
			}
			r.Closed[websocket.CloseStatus(err)]++
			ws.CloseNow()
		})
	}
	wg.Wait()
	return admitted
}

// refusals lists the close codes of the connections not admitted.
func (r *connCapResult) refusals() string {
	var b strings.Builder
	for _, code := range slices.Sorted(maps.Keys(r.Closed)) {
		fmt.Fprintf(&b, "; %d closed %d", r.Closed[code], code)
	}
	if r.DialErrs > 0 {
		fmt.Fprintf(&b, "; %d refused at the handshake", r.DialErrs)
	}
	return b.String()
}
