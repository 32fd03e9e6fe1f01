package crdt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/validate"
	"github.com/collab/collab/internal/wakeup"
	"github.com/collab/collab/internal/yjs"
	"github.com/collab/collab/services/crdt/live"
)

// SyncPrefix is the route of live sync: SyncPrefix + organizationId/documentId/editorId.
const SyncPrefix = "/v2/crdt/sync/"

// Messages of a refused sync connection (the y-websocket permission-denied reason).
//
//nolint:gosec // G101: messages that mention a token, not credentials
const (
	msgNoToken  = "A token is required: pass the JWT of Generate Token as the token query parameter."
	msgNoAccess = "You do not have access to this document."
)

// liveSync connects the live rooms (services/crdt/live) to the service: the rooms' log is the
// store, a connection is authorized by the access service, REST changes reach the rooms, and
// lifecycle deletions close them.
type liveSync struct {
	s      *Server
	access accessv1.AccessServiceClient
	hub    *live.Hub
	log    *slog.Logger
	// bus tells the other replicas of lifecycle closings (followGone); nil: this process only.
	bus wakeup.Bus
}

// grantInfo is what a connection's grant carries for events.
type grantInfo struct {
	caller authn.Caller
	editor Editor
	user   string
}

// roomKey names an editor's room: its fields as a JSON array, so keys are unambiguous.
func roomKey(e Editor) string {
	b, _ := json.Marshal([]string{e.APIKey, e.OrganizationID, e.OrgGen, e.DocumentID, e.DocGen, e.EditorID})
	return string(b)
}

func editorOf(key string) (Editor, error) {
	var f []string
	if err := json.Unmarshal([]byte(key), &f); err != nil || len(f) != 6 {
		return Editor{}, fmt.Errorf("crdt sync: bad room key %q", key)
	}
	return Editor{APIKey: f[0], OrganizationID: f[1], OrgGen: f[2], DocumentID: f[3], DocGen: f[4], EditorID: f[5]}, nil
}

// Load is live.Log's Load on the store.
func (l *liveSync) Load(ctx context.Context, key string) ([][]byte, live.Cursor, error) {
	e, err := editorOf(key)
	if err != nil {
		return nil, live.Cursor{}, err
	}
	st, err := l.s.store.Load(ctx, e)
	if errors.Is(err, ErrNotFound) {
		return nil, live.Cursor{}, nil
	}
	if err != nil {
		return nil, live.Cursor{}, err
	}
	return st.Parts(), live.Cursor{Version: st.Meta.Stream, Seq: uint64(st.LastSeq())}, nil //nolint:gosec // G115: sequence numbers count up from 0: non-negative
}

// Append is live.Log's Append: a client's update, stored as Apply CRDT Update stores one.
func (l *liveSync) Append(ctx context.Context, key, version string, update []byte) (live.Cursor, bool, error) {
	e, err := editorOf(key)
	if err != nil {
		return live.Cursor{}, false, err
	}
	m, seq, created, err := l.s.appendLive(ctx, e, version, update)
	if errors.Is(err, errStale) {
		return live.Cursor{}, false, live.ErrGone
	}
	if err != nil {
		return live.Cursor{}, false, err
	}
	return live.Cursor{Version: m.Stream, Seq: uint64(seq)}, created, nil //nolint:gosec // G115: sequence numbers count up from 0: non-negative
}

// Since is live.Log's Since: the log entries of the editor's current stream after the cursor.
func (l *liveSync) Since(ctx context.Context, key string, at live.Cursor) ([]live.Entry, bool, error) {
	e, err := editorOf(key)
	if err != nil {
		return nil, false, err
	}
	m, err := l.s.store.Meta(ctx, e)
	if errors.Is(err, ErrNotFound) {
		if at.Version != "" {
			return nil, false, live.ErrGone
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if m.Stream != at.Version {
		if at.Version != "" {
			// The data the room holds was deleted and made anew: merging the new data into
			// the old would keep deleted content alive.
			return nil, false, live.ErrGone
		}
		return nil, true, nil // the room was loaded without data
	}
	ups, reload, err := l.s.store.Tail(ctx, m.Stream, int64(at.Seq), 1000) //nolint:gosec // G115: a cursor holds a sequence number of the store (an int64)
	if err != nil || reload {
		return nil, reload, err
	}
	out := make([]live.Entry, len(ups))
	for i, u := range ups {
		out[i] = live.Entry{Seq: uint64(u.Seq), Update: u.Data} //nolint:gosec // G115: sequence numbers count up from 0: non-negative
	}
	return out, false, nil
}

// authorize decides a sync connection: the token must be one of Generate Token's and valid,
// the organization and document must exist for its API key, and its user must be an editor
// (read and write) or a viewer (read only) of the document.
func (l *liveSync) authorize(ctx context.Context, token, org, doc, editor string) (live.Grant, error) {
	if token == "" {
		return live.Grant{}, &live.DeniedError{Reason: msgNoToken}
	}
	loc, err := checkLocation(org, doc, editor, true)
	var refused *apierr.Error
	if errors.As(err, &refused) {
		return live.Grant{}, &live.DeniedError{Reason: refused.Message}
	} else if err != nil {
		return live.Grant{}, err
	}
	claims, err := l.access.VerifyToken(ctx, &accessv1.VerifyTokenRequest{Token: token})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unauthenticated {
			return live.Grant{}, &live.DeniedError{Reason: st.Message()}
		}
		return live.Grant{}, fmt.Errorf("verify token: %w", err)
	}
	e, err := l.s.editor(ctx, claims.GetApiKey(), loc)
	if errors.As(err, &refused) && refused.Code == codes.NotFound {
		return live.Grant{}, &live.DeniedError{Reason: refused.Message}
	} else if err != nil {
		return live.Grant{}, err
	}
	readers, err := l.access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: claims.GetApiKey(), OrganizationId: org, DocumentId: doc, UserIds: []string{claims.GetUserId()}})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
			return live.Grant{}, &live.DeniedError{Reason: st.Message()}
		}
		return live.Grant{}, fmt.Errorf("check access: %w", err)
	}
	role := readers.GetRoles()[claims.GetUserId()]
	if role != validate.RoleEditor && role != validate.RoleViewer {
		return live.Grant{}, &live.DeniedError{Reason: msgNoAccess}
	}
	caller := authn.Caller{WorkspaceID: claims.GetWorkspaceId(), APIKey: claims.GetApiKey()}
	return live.Grant{
		Key:      roomKey(e),
		CanWrite: role == validate.RoleEditor,
		UserID:   claims.GetUserId(),
		ValidFor: time.Unix(claims.GetExpiresAt(), 0).Sub(l.s.clock.Now()),
		Info:     grantInfo{caller: caller, editor: e, user: claims.GetUserId()},
	}, nil
}

// changed announces live edits as crdt.update_data (at most one per room every few seconds,
// with the state after them).
func (l *liveSync) changed(g live.Grant, state []byte) {
	info, ok := g.Info.(grantInfo)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := l.s.store.Meta(ctx, info.editor)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			l.log.Warn("crdt sync: event for live edits", "err", err)
		}
		return
	}
	d := yjs.NewDoc()
	if err := d.Apply(state); err != nil {
		return
	}
	key, kind := readAs(m, d, "", 0, false)
	l.s.publishLive(ctx, info.caller, m, info.user, d, key, kind)
}

// broadcast is the server's hook of stored changes: REST changes reach the rooms at once, and
// a deletion (a nil update) closes them.
func (l *liveSync) broadcast(m *Meta, seq int64, update []byte) {
	key := roomKey(m.Editor)
	if update == nil {
		l.hub.Gone(func(k string) bool { return k == key })
		// The other replicas' rooms find the deletion in the log at once.
		l.hub.Wake(key, live.Cursor{})
		return
	}
	l.hub.Publish(key, live.Cursor{Version: m.Stream, Seq: uint64(seq)}, update) //nolint:gosec // G115: sequence numbers count up from 0: non-negative
}
