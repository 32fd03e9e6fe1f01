package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/bench/collabproc"
	"github.com/collab/collab/internal/yjs"
)

// Finding 3, delete sets that split a text into millions of pieces: one update inserting a
// long run of characters and deleting every second one costs far more to hold than its bytes,
// and replacing such a text was quadratic. The old server accepted and stored the live frame
// (+2 GB), and its REST Update after 160,000 pieces took 66 s of CPU (0.34 s at 40,000
// characters, 4.4 s at 80,000).
const (
	// holesFrameBytes is the live frame's size: under the fixed server's frame limit (5 MiB
	// + 64 KiB; the old one was 8 MiB).
	holesFrameBytes = 5 << 20
	// holesMaxGrowth bounds the server's peak RSS growth through the live frame.
	holesMaxGrowth = 400 << 20
	// holesRESTChars is the REST scenario's insert (its delete set: half as many pieces,
	// within the 4 MiB update limit); holesUpdateWithin bounds the Update that follows.
	holesRESTChars    = 320_000
	holesUpdateWithin = 5 * time.Second
	// holesClient is the attacker's Yjs client id.
	holesClient = 0x5eed
)

const nameHolesLive = "3a. live delete set of every second character"

// holesLiveResult is what finding 3's live scenario measured.
type holesLiveResult struct {
	Result
	// Attacker is the editor's socket that sent the frame (FrameBytes of it); Saw how it
	// stood once the server had had closeWait to refuse it.
	Attacker   *closeWatch
	FrameBytes int
	Saw        string
	// Before and After are Get CRDT Data's answers for the editor around the attack.
	Before, After json.RawMessage
}

// describe is the attacker's side of the outcome, as far as the attack went.
func (r *holesLiveResult) describe() string {
	if r.Saw == "" {
		return ""
	}
	s := fmt.Sprintf("frame of %s sent: %s", size(int64(r.FrameBytes)), r.Saw)
	switch {
	case r.After == nil:
	case string(r.After) == string(r.Before):
		s += "; stored data unchanged"
	default:
		s += fmt.Sprintf("; stored data changed (Get answers %s)", size(int64(len(r.After))))
	}
	return s
}

func runHolesLive(ctx context.Context, cfg config) holesLiveResult {
	var r holesLiveResult
	attack := func(ctx context.Context, t *target) error {
		defer func() { t.res.Outcome = r.describe() }()
		return t.honestRun(ctx, func(ctx context.Context) error {
			frame, err := holesFrame(holesFrameBytes)
			if err != nil {
				return err
			}
			r.FrameBytes = len(frame)
			if r.Before, err = t.get(ctx, t.editor); err != nil {
				return err
			}
			ws, err := t.dialAs(ctx, "holes-editor", collabproc.RoleEditor)
			if err != nil {
				return err
			}
			r.Attacker = watchClose(ctx, ws)
			defer r.Attacker.close()
			if err := ws.Write(ctx, websocket.MessageBinary, frame); err != nil && !r.Attacker.wait(closeWait) {
				return fmt.Errorf("send the frame: %w", err)
			}
			r.Saw = r.Attacker.await(closeWait)
			t.settle(ctx)
			if t.stopped(ctx) {
				return nil
			}
			r.After, err = t.get(ctx, t.editor)
			return err
		})
	}
	r.Result = session(ctx, cfg, nameHolesLive, holesMaxGrowth, addHello, attack)
	return r
}

// holesRESTResult is what finding 3's REST scenario measured.
type holesRESTResult struct {
	Result
	// UpdateTook is the Update's time to answer (UpdateErr: it failed or did not answer).
	UpdateTook time.Duration
	UpdateErr  error
	// Text is what Get reads afterwards.
	Text string
}

// describe is the attacker's side of the outcome.
func (r *holesRESTResult) describe() string {
	if r.UpdateErr != nil {
		return fmt.Sprintf("Update failed after %.1f s: %v", r.UpdateTook.Seconds(), r.UpdateErr)
	}
	return fmt.Sprintf("Update answered in %.2f s; Get reads %q", r.UpdateTook.Seconds(), r.Text)
}

// runHolesREST applies, through REST, an insert of chars characters and a delete set of every
// second one, then times an Update of the text to "z".
func runHolesREST(ctx context.Context, cfg config, chars int) holesRESTResult {
	var r holesRESTResult
	attack := func(ctx context.Context, t *target) error {
		return t.honestRun(ctx, func(ctx context.Context) error {
			insert, err := insertText(holesClient, chars)
			if err != nil {
				return err
			}
			for _, u := range [][]byte{insert, append([]byte{0}, everySecond(holesClient, chars)...)} {
				if err := t.call(ctx, "/v2/crdt/apply", map[string]any{"update": base64.StdEncoding.EncodeToString(u)}); err != nil {
					return err
				}
			}
			start := time.Now()
			r.UpdateErr = t.call(ctx, "/v2/crdt/update", map[string]any{"data": "z", "type": "text"})
			r.UpdateTook = time.Since(start)
			if r.UpdateErr == nil {
				raw, err := t.get(ctx, t.editor)
				if err != nil {
					return err
				}
				r.Text = textOf(raw, t.editor)
			}
			t.res.Outcome = r.describe()
			return nil
		})
	}
	r.Result = session(ctx, cfg, nameHolesREST(chars), 0, nil, attack)
	return r
}

func nameHolesREST(chars int) string {
	return fmt.Sprintf("3b. REST delete set, %dk characters", chars/1000)
}

// holesFrame is a sync update frame of at most limit bytes, within 16 bytes of it: an insert
// of a run of characters and a delete set removing every second one.
func holesFrame(limit int) ([]byte, error) {
	// A character costs its byte and half a range: 2 to 4 bytes, as the clock's varUint grows.
	n := limit / 3
	var best []byte
	for range 30 {
		insert, err := insertText(holesClient, n)
		if err != nil {
			return nil, err
		}
		// The insert's delete set is empty (its last byte, 0 ranges of clients): the
		// attack's takes its place.
		f := yjs.SyncFrame(yjs.SyncUpdate, append(insert[:len(insert)-1], everySecond(holesClient, n)...))
		switch {
		case len(f) > limit:
			n -= (len(f)-limit)/2 + 1
		case limit-len(f) <= 16:
			return f, nil
		default:
			best = f
			n += (limit - len(f)) / 4
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no frame of the attack fits in %d bytes", limit)
	}
	return best, nil
}

// insertText is the update of a client inserting n characters into the root "content".
func insertText(client uint64, n int) ([]byte, error) {
	d := yjs.NewDocWithClient(client)
	u, err := d.Replace("content", yjs.Text, strings.Repeat("ab", n/2+1)[:n])
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	if len(u) == 0 || u[len(u)-1] != 0 {
		return nil, errors.New("insert: the update does not end in an empty delete set")
	}
	return u, nil
}

// everySecond is a delete set (y-protocols' encoding: clients, then each one's ranges as
// clock and length, all varUint) removing the client's clocks 1, 3, 5, ... below n.
func everySecond(client uint64, n int) []byte {
	b := binary.AppendUvarint(nil, 1)
	b = binary.AppendUvarint(b, client)
	b = binary.AppendUvarint(b, uint64(n/2))    //nolint:gosec // G115: n is a positive count
	for c := uint64(1); c < uint64(n); c += 2 { //nolint:gosec // G115: n is a positive count
		b = binary.AppendUvarint(b, c)
		b = binary.AppendUvarint(b, 1)
	}
	return b
}

// call posts to a CRDT operation on the attacked editor, within cfg.restTimeout.
func (t *target) call(ctx context.Context, path string, data map[string]any) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.restTimeout)
	defer cancel()
	data["organizationId"], data["documentId"], data["editorId"] = t.org, t.doc, t.editor
	return t.srv.Call(ctx, path, data, nil)
}

// get is Get CRDT Data's data (a list of editors' rows) for one editor, or for the whole
// document when editor is "".
func (t *target) get(ctx context.Context, editor string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.restTimeout)
	defer cancel()
	req := map[string]any{"organizationId": t.org, "documentId": t.doc}
	if editor != "" {
		req["editorId"] = editor
	}
	var out struct {
		Result struct {
			Data json.RawMessage `json:"data"`
		} `json:"result"`
	}
	if err := t.srv.Call(ctx, "/v2/crdt/get", req, &out); err != nil {
		return nil, err
	}
	return out.Result.Data, nil
}

// textOf reads an editor's text from Get's data.
func textOf(raw json.RawMessage, editor string) string {
	var rows []struct {
		ID   string `json:"id"`
		Data any    `json:"data"`
	}
	_ = json.Unmarshal(raw, &rows)
	for _, r := range rows {
		if s, ok := r.Data.(string); ok && r.ID == editor {
			return s
		}
	}
	return ""
}
