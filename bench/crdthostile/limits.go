package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/yjs"
)

// Finding 4, two limits: live sync bounded a document by its memory (20 MiB), REST by its
// encoded state (5 MiB, what a Get answer must hold), so live edits made data REST could no
// longer read. The old server accepted all 12 MB, and Get CRDT Data failed afterwards, for
// the editor and for the whole document.
const (
	// limitFrames inserts of limitFrameChars characters each, in frames under the frame limit.
	limitFrames     = 3
	limitFrameChars = 4_000_000
	// limitClient is the first of the attacker's client ids (one per frame, so each insert
	// stands alone).
	limitClient = 0x11e0
)

const nameTwoLimits = "4. 12 MB through live sync"

// twoLimitsResult is what finding 4's scenario measured.
type twoLimitsResult struct {
	Result
	// Attacker is the editor's socket; Sent counts the frames written before it was closed;
	// Saw is how it stood once the server had had closeWait to refuse them.
	Attacker *closeWatch
	Sent     int
	Saw      string
	// EditorErr and DocumentErr are Get CRDT Data's failures afterwards, for the editor and
	// for the whole document (nil: it answered).
	EditorErr, DocumentErr error
	// checked: the Gets were made.
	checked bool
}

// describe is the attacker's side of the outcome, as far as the attack went.
func (r *twoLimitsResult) describe() string {
	if r.Saw == "" {
		return ""
	}
	s := fmt.Sprintf("%d frames of 4 MB sent: %s", r.Sent, r.Saw)
	if r.checked {
		s += fmt.Sprintf("; Get of the editor: %s; of the document: %s", answered(r.EditorErr), answered(r.DocumentErr))
	}
	return s
}

func runTwoLimits(ctx context.Context, cfg config) twoLimitsResult {
	var r twoLimitsResult
	attack := func(ctx context.Context, t *target) error {
		defer func() { t.res.Outcome = r.describe() }()
		return t.honestRun(ctx, func(ctx context.Context) error {
			ws, err := t.dialAs(ctx, "limits-editor", collabproc.RoleEditor)
			if err != nil {
				return err
			}
			r.Attacker = watchClose(ctx, ws)
			defer r.Attacker.close()
			for i := range limitFrames {
				u, err := insertText(limitClient+uint64(i), limitFrameChars)
				if err != nil {
					return err
				}
				if r.Attacker.ended() || ws.Write(ctx, websocket.MessageBinary, yjs.SyncFrame(yjs.SyncUpdate, u)) != nil {
					break
				}
				r.Sent++
			}
			r.Saw = r.Attacker.await(closeWait)
			t.settle(ctx)
			if t.stopped(ctx) {
				return nil
			}
			_, r.EditorErr = t.get(ctx, t.editor)
			_, r.DocumentErr = t.get(ctx, "")
			r.checked = true
			return nil
		})
	}
	r.Result = session(ctx, cfg, nameTwoLimits, 0, addHello, attack)
	return r
}

// answered says how a REST call went: the API's message when it refused.
func answered(err error) string {
	var se *apiclient.StatusError
	switch {
	case err == nil:
		return "answered"
	case errors.As(err, &se):
		return fmt.Sprintf("%d %q", se.Status, se.Message())
	}
	return "failed (" + err.Error() + ")"
}
