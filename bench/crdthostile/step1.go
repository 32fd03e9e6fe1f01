package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/collabproc"
)

// Finding 1, step-1 amplification: every sync step 1 is answered with the whole document,
// queued for a reader that never reads. The old server (main before the fix) grew by about
// 2.5 GB per attacking socket within 4 s on this machine.
const (
	// step1TextBytes is the editor's text, made by REST Add (under the 4 MiB data limit).
	step1TextBytes = 3_900_000
	// step1Sockets viewer sockets send step1Frames step 1s each with an empty state vector.
	step1Sockets = 3
	step1Frames  = 500
	// step1MaxGrowth: the fixed server keeps at most one answer outstanding per connection.
	step1MaxGrowth = 200 << 20
)

const nameStep1 = "1. step-1 amplification"

// emptyStep1 is a sync step 1 with an empty state vector: "send me everything".
var emptyStep1 = []byte{0, 0, 1, 0}

// step1Result is what finding 1's scenario measured.
type step1Result struct {
	Result
	// Sent counts the step 1s written; WriteErrs the sockets whose writes failed.
	Sent      int
	WriteErrs []string
}

func runStep1(ctx context.Context, cfg config) step1Result {
	var r step1Result
	setup := func(ctx context.Context, t *target) error {
		text := strings.Repeat("lorem ipsum dolor sit amet, ", step1TextBytes/28+1)[:step1TextBytes]
		return t.srv.Call(ctx, "/v2/crdt/add", map[string]any{"organizationId": t.org, "documentId": t.doc,
			"editorId": t.editor, "data": text, "type": "text"}, nil)
	}
	attack := func(ctx context.Context, t *target) error {
		return t.honestRun(ctx, func(ctx context.Context) error {
			url, err := t.syncURL(ctx, "step1-viewer", collabproc.RoleViewer)
			if err != nil {
				return err
			}
			socks := make([]*websocket.Conn, 0, step1Sockets)
			defer func() {
				for _, ws := range socks {
					ws.CloseNow()
				}
			}()
			for range step1Sockets {
				ws, err := dialRaw(ctx, url)
				if err != nil {
					return err
				}
				socks = append(socks, ws)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, ws := range socks {
				wg.Go(func() {
					n, err := sendStep1s(ctx, ws)
					mu.Lock()
					defer mu.Unlock()
					r.Sent += n
					if err != nil {
						r.WriteErrs = append(r.WriteErrs, err.Error())
					}
				})
			}
			wg.Wait()
			t.settle(ctx)
			t.res.Outcome = fmt.Sprintf("%d of %d step 1s written, never read", r.Sent, step1Sockets*step1Frames)
			if len(r.WriteErrs) > 0 {
				t.res.Outcome += fmt.Sprintf("; %d sockets failed: %s", len(r.WriteErrs), r.WriteErrs[0])
			}
			return nil
		})
	}
	r.Result = session(ctx, cfg, nameStep1, step1MaxGrowth, setup, attack)
	return r
}

// sendStep1s writes step1Frames step 1s as fast as the socket takes them.
func sendStep1s(ctx context.Context, ws *websocket.Conn) (int, error) {
	for i := range step1Frames {
		if err := ws.Write(ctx, websocket.MessageBinary, emptyStep1); err != nil {
			return i, fmt.Errorf("after %d step 1s: %w", i, err)
		}
	}
	return step1Frames, nil
}
