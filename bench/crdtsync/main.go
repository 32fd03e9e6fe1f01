// Command crdtsync measures live fan-out on the y-websocket server (services/crdt/live): one
// hub on loopback (an httptest server, an update log in memory), -clients clients connected
// to one room, and one more client that types: -updates single-character inserts, each sent
// as a sync update. For every update and every receiver it records the time from just before
// the writer's send until the receiver has read the frame, and prints the percentiles, over all
// deliveries and over each update's slowest receiver.
//
// Every client is a minimal y-websocket peer on an internal/yjs.Doc, in this process: on
// connect it sends sync step 1 with its state vector and answers the server's step 1 with step
// 2, as y-websocket's provider does, and it applies every update it receives (after taking the
// time). At the end every receiver must hold the writer's text.
//
// With -interval 0 (the default) the writer sends an update once every receiver has the
// previous one: the latency of one update on an idle room. With -interval D it sends one every
// D whatever happened to the previous ones, so slow fan-outs queue up as they would under a
// fast typist.
//
//	go run ./bench/crdtsync [-clients 100] [-updates 2000] [-interval 0]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/internal/yjs"
	"github.com/collab/collab/services/crdt/live"
)

func main() {
	clients := flag.Int("clients", 100, "receiving clients in the room")
	updates := flag.Int("updates", 2000, "updates the writer sends (measured)")
	warmup := flag.Int("warmup", 200, "updates sent first, not measured")
	interval := flag.Duration("interval", 0, "time between sends; 0: each once every receiver has the previous one")
	flag.Parse()
	if err := run(*clients, *updates, *warmup, *interval); err != nil {
		log.Fatal(err)
	}
}

// memLog is a live.Log in memory.
type memLog struct {
	mu      sync.Mutex
	updates map[string][][]byte
}

func (l *memLog) Load(_ context.Context, key string) ([][]byte, live.Cursor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	us := l.updates[key]
	return slices.Clone(us), live.Cursor{Version: "v", Seq: uint64(len(us))}, nil
}

func (l *memLog) Append(_ context.Context, key, _ string, u []byte) (live.Cursor, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	created := len(l.updates[key]) == 0
	l.updates[key] = append(l.updates[key], slices.Clone(u))
	return live.Cursor{Version: "v", Seq: uint64(len(l.updates[key]))}, created, nil
}

func (l *memLog) Since(_ context.Context, key string, at live.Cursor) ([]live.Entry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []live.Entry
	for i := at.Seq; i < uint64(len(l.updates[key])); i++ {
		out = append(out, live.Entry{Seq: i + 1, Update: l.updates[key][i]})
	}
	return out, false, nil
}

// peer is one y-websocket client.
type peer struct {
	ws     *websocket.Conn
	mu     sync.Mutex
	doc    *yjs.Doc
	synced chan struct{} // closed when the server's sync step 2 has arrived
	err    error         // why reading or applying failed; guarded by mu
}

// dial connects a peer and starts reading; onUpdate gets each update frame's payload and the
// time it was read.
func dial(ctx context.Context, url string, onUpdate func(payload []byte, at time.Time)) (*peer, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	p := &peer{ws: ws, doc: yjs.NewDoc(), synced: make(chan struct{})}
	if err := ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep1, p.doc.StateVector())); err != nil {
		return nil, err
	}
	go func() {
		var once sync.Once
		for {
			_, frame, err := ws.Read(context.Background())
			at := time.Now()
			if err != nil {
				if websocket.CloseStatus(err) == -1 && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
					p.mu.Lock()
					p.err = err
					p.mu.Unlock()
				}
				return
			}
			m, err := yjs.ReadMessage(frame)
			if err != nil || m.Type != yjs.MessageSync {
				continue
			}
			switch m.Sync {
			case yjs.SyncStep1:
				p.mu.Lock()
				diff, err := p.doc.Encode(m.Payload)
				p.mu.Unlock()
				if err == nil {
					_ = ws.Write(context.Background(), websocket.MessageBinary, yjs.SyncFrame(yjs.SyncStep2, diff))
				}
			case yjs.SyncStep2:
				p.apply(m.Payload)
				once.Do(func() { close(p.synced) })
			case yjs.SyncUpdate:
				if onUpdate != nil {
					onUpdate(m.Payload, at)
				}
				p.apply(m.Payload)
			}
		}
	}()
	return p, nil
}

func (p *peer) apply(u []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.doc.Apply(u); err != nil && p.err == nil {
		p.err = err
	}
}

// state is the peer's text and the error that stopped it, if any.
func (p *peer) state() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.doc.JSON("content", yjs.Text).(string), p.err
}

func run(nClients, nUpdates, warmup int, interval time.Duration) error {
	hub := live.New(live.Config{
		Log: &memLog{updates: map[string][][]byte{}},
		Authorize: func(_ context.Context, token, org, doc, editor string) (live.Grant, error) {
			return live.Grant{Key: org + "/" + doc + "/" + editor, CanWrite: token == "edit", UserID: "bench"}, nil
		},
		Logger: slog.New(slog.DiscardHandler),
		Prefix: "/v2/crdt/sync/",
	})
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v2/crdt/sync/org/doc/editor?token=edit"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The updates, made in advance by the writer's doc: one character appended each.
	total := warmup + nUpdates
	wdoc := yjs.NewDocWithClient(7)
	frames := make([][]byte, total)
	index := make(map[string]int, total) // update bytes -> its number
	var text strings.Builder
	for i := range frames {
		text.WriteByte("abcdefghijklmnopqrstuvwxyz "[i%27])
		u, err := wdoc.Replace("content", yjs.Text, text.String())
		if err != nil {
			return err
		}
		frames[i] = yjs.SyncFrame(yjs.SyncUpdate, u)
		index[string(u)] = i
	}

	// sent[i] is when update i was sent (ns since start); lat[i][c] when receiver c read it.
	start := time.Now()
	sent := make([]atomic.Int64, total)
	lat := make([][]int64, total)
	for i := range lat {
		lat[i] = make([]int64, nClients)
	}
	got := make([]atomic.Int32, total)
	allGot := make(chan int, total)
	receivers := make([]*peer, nClients)
	for c := range receivers {
		p, err := dial(ctx, url, func(payload []byte, at time.Time) {
			i, ok := index[string(payload)]
			if !ok {
				return
			}
			lat[i][c] = at.Sub(start).Nanoseconds() - sent[i].Load()
			if got[i].Add(1) == int32(nClients) { //nolint:gosec // G115: nClients is a small flag value
				allGot <- i
			}
		})
		if err != nil {
			return fmt.Errorf("client %d: %w", c, err)
		}
		defer p.ws.CloseNow() //nolint:revive // every client stays connected until the run ends
		receivers[c] = p
	}
	writer, err := dial(ctx, url, nil)
	if err != nil {
		return err
	}
	defer writer.ws.CloseNow()
	for _, p := range slices.Concat(receivers, []*peer{writer}) {
		select {
		case <-p.synced:
		case <-ctx.Done():
			return errors.New("clients did not sync within 30 s")
		}
	}

	send := func(i int) error {
		sent[i].Store(time.Since(start).Nanoseconds())
		return writer.ws.Write(ctx, websocket.MessageBinary, frames[i])
	}
	wait := func(n int) error {
		for range n {
			select {
			case <-allGot:
			case <-time.After(10 * time.Second):
				return errors.New("an update did not reach every client within 10 s")
			}
		}
		return nil
	}
	for i := range warmup {
		if err := send(i); err != nil {
			return err
		}
		if err := wait(1); err != nil {
			return err
		}
	}
	began := time.Now()
	if interval == 0 {
		for i := warmup; i < total; i++ {
			if err := send(i); err != nil {
				return err
			}
			if err := wait(1); err != nil {
				return err
			}
		}
	} else {
		t := time.NewTicker(interval)
		for i := warmup; i < total; i++ {
			if err := send(i); err != nil {
				return err
			}
			<-t.C
		}
		t.Stop()
		if err := wait(nUpdates); err != nil {
			return err
		}
	}
	elapsed := time.Since(began)

	// Everyone holds the writer's text.
	for c, p := range receivers {
		g, err := p.state()
		if err != nil {
			return fmt.Errorf("client %d: %w", c, err)
		}
		if g != text.String() {
			return fmt.Errorf("client %d holds %d characters, the writer %d", c, len(g), text.Len())
		}
	}

	var all, slowest []float64
	for i := warmup; i < total; i++ {
		worst := int64(0)
		for _, l := range lat[i] {
			all = append(all, float64(l))
			worst = max(worst, l)
		}
		slowest = append(slowest, float64(worst))
	}
	slices.Sort(all)
	slices.Sort(slowest)
	mode := "each update sent once every receiver had the previous one"
	if interval > 0 {
		mode = fmt.Sprintf("one update every %v", interval)
	}
	fmt.Printf("%d receivers, %d updates (%s, %d warm-up updates first), %.0f updates/s over %.2f s; Go %s, GOMAXPROCS %d\n\n",
		nClients, nUpdates, mode, warmup, float64(nUpdates)/elapsed.Seconds(), elapsed.Seconds(), runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Println("| latency, send to read | p50 | p95 | p99 | max |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| every delivery (%d) | %s | %s | %s | %s |\n", len(all), pct(all, 50), pct(all, 95), pct(all, 99), dur(all[len(all)-1]))
	fmt.Printf("| each update's slowest receiver (%d) | %s | %s | %s | %s |\n", len(slowest), pct(slowest, 50), pct(slowest, 95), pct(slowest, 99), dur(slowest[len(slowest)-1]))
	return nil
}

// pct is the p-th percentile of sorted xs (nearest rank).
func pct(xs []float64, p float64) string {
	i := int(float64(len(xs))*p/100+0.5) - 1
	return dur(xs[min(max(i, 0), len(xs)-1)])
}

func dur(ns float64) string {
	if ns < 1e6 {
		return fmt.Sprintf("%.0f µs", ns/1e3)
	}
	return fmt.Sprintf("%.2f ms", ns/1e6)
}
