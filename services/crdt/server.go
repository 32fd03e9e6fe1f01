package crdt

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/yjs"
)

const statusSuccess = "success"

// Publisher stores an event durably and relays it (*outbox.Outbox).
type Publisher interface {
	PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
}

// Broadcast is told of every change this server stores, after it is stored: update is the Yjs
// update that was appended (seq its number in the editor's log; 0 for the first update, which
// the editor's record holds), or nil when the editor's data was deleted. The live-sync layer
// pushes it to the clients connected to the editor.
type Broadcast func(m *Meta, seq int64, update []byte)

var (
	_ crdtv1.CrdtServiceServer = (*Server)(nil)
	_ lifecycle.Handler        = (*Server)(nil)
	_ Publisher                = (*outbox.Outbox)(nil)
)

// Server implements the CRDT service.
type Server struct {
	crdtv1.UnimplementedCrdtServiceServer

	store      Store
	docs       documentsv1.DocumentsServiceClient
	events     Publisher
	clock      clock.Clock
	log        *slog.Logger
	origin     string
	compaction Compaction
	broadcast  Broadcast
	reload     func(Scope)

	// liveBytes counts what live appends added to each stream since this process compacted it.
	liveMu    sync.Mutex
	liveBytes map[string]int
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithOrigin names this process in the updates it appends (default: random per Server).
func WithOrigin(origin string) Option { return func(s *Server) { s.origin = origin } }

// WithCompaction sets when an editor's log is compacted (default DefaultCompaction).
func WithCompaction(c Compaction) Option { return func(s *Server) { s.compaction = c } }

// WithBroadcast sets the hook told of every stored change.
func WithBroadcast(b Broadcast) Option { return func(s *Server) { s.broadcast = b } }

// WithReload sets the hook told of editors a lifecycle event deleted or moved (live sync
// closes their rooms, in every replica).
func WithReload(r func(Scope)) Option { return func(s *Server) { s.reload = r } }

// Scope is what a lifecycle event took from live sync: an organization's editors, or (with
// Doc) one document's.
type Scope struct{ APIKey, Org, Doc string }

// Matches reports whether the editor is in the scope.
func (sc Scope) Matches(e Editor) bool {
	return e.APIKey == sc.APIKey && e.OrganizationID == sc.Org && (sc.Doc == "" || e.DocumentID == sc.Doc)
}

func (s *Server) reloadWhere(sc Scope) {
	if s.reload != nil {
		s.reload(sc)
	}
}

// New returns a Server on store. docs tells the generations data is filed under; events
// publishes crdt.update_data.
func New(store Store, docs documentsv1.DocumentsServiceClient, events Publisher, opts ...Option) (*Server, error) {
	if store == nil || docs == nil || events == nil {
		return nil, errors.New("crdt: a store, a documents client and an outbox are required")
	}
	s := &Server{store: store, docs: docs, events: events, clock: clock.Real(), log: slog.Default(),
		origin: ids.Random(12), compaction: DefaultCompaction}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() int64 { return s.clock.Now().UnixMilli() }

// editor resolves the organization and document to their current generations: NOT_FOUND for
// either unknown. Unlike activity and events, the document must exist: CRDT data is the
// document's content, live sync checks the caller's access to the document, and data filed
// under a document the documents service does not know would be out of sight once it does.
func (s *Server) editor(ctx context.Context, apiKey string, loc location) (Editor, error) {
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: loc.org, DocumentIds: []string{loc.doc}})
	if err != nil {
		return Editor{}, fmt.Errorf("resolve %s: %w", loc.org, err)
	}
	if !res.GetOrganizationExists() {
		return Editor{}, apierr.NotFound(msgOrgMissing)
	}
	d := res.GetDocuments()[loc.doc]
	if !d.GetExists() {
		return Editor{}, apierr.NotFound(msgDocMissing)
	}
	return Editor{APIKey: apiKey, OrganizationID: loc.org, OrgGen: res.GetOrganizationGeneration(),
		DocumentID: loc.doc, DocGen: d.GetGeneration(), EditorID: loc.editor}, nil
}

// settle runs after a write under e's generations: if the organization or document was
// deleted meanwhile (its deletion may have swept before the write landed), the write's data
// goes as if the deletion had come after it, and the caller answers NOT_FOUND.
func (s *Server) settle(ctx context.Context, e Editor) error {
	if buried, err := s.store.Buried(ctx, e.APIKey, e.OrganizationID, KindOrganization, e.OrganizationID, e.OrgGen); err != nil {
		return fmt.Errorf("check organization generation: %w", err)
	} else if buried {
		if err := s.store.DeleteOrganization(ctx, e.APIKey, e.OrganizationID, e.OrgGen); err != nil {
			return fmt.Errorf("sweep CRDT data of a deleted organization: %w", err)
		}
		return apierr.NotFound(msgOrgMissing)
	}
	if e.DocGen == "" {
		return nil
	}
	if buried, err := s.store.Buried(ctx, e.APIKey, e.OrganizationID, KindDocument, e.DocumentID, e.DocGen); err != nil {
		return fmt.Errorf("check document generation: %w", err)
	} else if buried {
		if err := s.store.DeleteDocument(ctx, e); err != nil {
			return fmt.Errorf("sweep CRDT data of a deleted document: %w", err)
		}
		return apierr.NotFound(msgDocMissing)
	}
	return nil
}

// settleAppend runs after an append to m's stream: settle, then whether the editor's record
// still names the stream. When it does not, the editor's data was deleted (and perhaps added
// again) meanwhile: the entry went with it, as if the deletion had come after it, and kept is
// false. The orphaned entry is removed.
func (s *Server) settleAppend(ctx context.Context, m *Meta) (kept bool, err error) {
	if err := s.settle(ctx, m.Editor); err != nil {
		return false, err
	}
	cur, err := s.store.Meta(ctx, m.Editor)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, fmt.Errorf("check editor: %w", err)
	}
	if err == nil && cur.Stream == m.Stream {
		return true, nil
	}
	if err := s.store.DeleteStream(ctx, m.Stream); err != nil {
		return false, fmt.Errorf("remove an orphaned log: %w", err)
	}
	return false, nil
}

// docOf builds the editor's document from its stored state. The state is trusted (every
// update was checked when written) but may be large: loading stops when the caller is gone.
func docOf(ctx context.Context, st *State) (*yjs.Doc, error) {
	d := yjs.NewDoc()
	for _, p := range st.Parts() {
		if _, err := d.ApplyUntrusted(ctx, p, stored); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("load CRDT data: %w", ctx.Err())
			}
			return nil, fmt.Errorf("stored CRDT data of editor %s does not load: %w", st.Meta.EditorID, err)
		}
	}
	return d, nil
}

// stored are the limits of loading what the store holds: none but the caller's context (the
// work budget is past any stored state's).
var stored = yjs.Limits{MaxWork: math.MaxInt, MaxPending: math.MaxInt}

// load reads an editor's state and document; ErrNotFound without data.
func (s *Server) load(ctx context.Context, e Editor) (*State, *yjs.Doc, error) {
	st, err := s.store.Load(ctx, e)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load CRDT data: %w", err)
	}
	// The id the caller knows the document by: the stored one may be from before a migration
	// whose event is still on its way.
	st.Meta.DocumentID = e.DocumentID
	d, err := docOf(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	return st, d, nil
}

// checkSize bounds the state as stored and answered (its encoding) after a replacement.
func checkSize(d *yjs.Doc) error {
	if d.EncodedSize() > maxStateBytes {
		return apierr.FailedPrecondition(msgStateTooBig)
	}
	return nil
}

// appended finishes a stored append: settle, then (when the entry is kept) compaction when the
// log is due, the broadcast, the event.
func (s *Server) appended(ctx context.Context, c authn.Caller, st *State, seq int64, update []byte, action string, d *yjs.Doc, key string, kind yjs.Kind) error {
	kept, err := s.settleAppend(ctx, &st.Meta)
	if err != nil || !kept {
		return err
	}
	// The log after this append: compact when it is due (Compact checks again).
	grown := *st
	grown.Updates = append(st.Updates[:len(st.Updates):len(st.Updates)], Update{Seq: seq, Data: update})
	if s.compaction.due(&grown) {
		if _, err := s.store.Compact(ctx, st.Meta.Editor, s.compaction, yjs.Merge); err != nil {
			// The update is stored; the next write compacts.
			s.log.WarnContext(ctx, "crdt compaction failed", "editor_id", st.Meta.EditorID, "error", err)
		}
	}
	if s.broadcast != nil {
		s.broadcast(&st.Meta, seq, update)
	}
	s.publish(ctx, c, &st.Meta, action, d, key, kind)
	return nil
}

func (s *Server) AddCrdtData(ctx context.Context, req *crdtv1.AddCrdtDataRequest) (*crdtv1.AddCrdtDataResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	in, err := checkContent(req.GetOrganizationId(), req.GetDocumentId(), req.GetEditorId(), req.GetData(), req.GetType(), req.GetContentKey())
	if err != nil {
		return nil, err
	}
	e, err := s.editor(ctx, c.APIKey, in.location)
	if err != nil {
		return nil, err
	}
	d := yjs.NewDoc()
	update, err := d.ReplaceWithin(in.key, in.kind, in.value, maxDocMemory)
	if err != nil {
		return nil, replaceRefusal(in.kind, err)
	}
	if err := checkSize(d); err != nil {
		return nil, err
	}
	m := &Meta{Editor: e, Type: in.kind.String(), ContentKey: in.key, CreatedAt: s.now()}
	if err := s.store.Create(ctx, m, update); errors.Is(err, ErrExists) {
		return nil, apierr.AlreadyExists(msgExists)
	} else if err != nil {
		return nil, fmt.Errorf("add CRDT data: %w", err)
	}
	if err := s.settle(ctx, e); err != nil {
		return nil, err
	}
	// Empty content makes an empty update: nothing to relay (and nil means a deletion).
	if s.broadcast != nil && len(update) > 0 {
		s.broadcast(m, 0, update)
	}
	s.publish(ctx, c, m, actionAdd, d, in.key, in.kind)
	return &crdtv1.AddCrdtDataResponse{Status: statusSuccess, Message: msgAdded}, nil
}

func (s *Server) UpdateCrdtData(ctx context.Context, req *crdtv1.UpdateCrdtDataRequest) (*crdtv1.UpdateCrdtDataResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	in, err := checkContent(req.GetOrganizationId(), req.GetDocumentId(), req.GetEditorId(), req.GetData(), req.GetType(), req.GetContentKey())
	if err != nil {
		return nil, err
	}
	e, err := s.editor(ctx, c.APIKey, in.location)
	if err != nil {
		return nil, err
	}
	st, d, err := s.load(ctx, e)
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound(msgNoData)
	}
	if err != nil {
		return nil, err
	}
	if err := checkKind(&st.Meta, d, in.key, in.kind); err != nil {
		return nil, err
	}
	update, err := d.ReplaceWithin(in.key, in.kind, in.value, maxDocMemory)
	if err != nil {
		return nil, replaceRefusal(in.kind, err)
	}
	resp := &crdtv1.UpdateCrdtDataResponse{Status: statusSuccess, Message: msgUpdated}
	if len(update) == 0 {
		return resp, nil // the content is the data already: nothing to store or announce
	}
	if err := checkSize(d); err != nil {
		return nil, err
	}
	seq, err := s.store.Append(ctx, st.Meta.Stream, Update{Data: update, At: s.now(), Origin: s.origin})
	if err != nil {
		return nil, fmt.Errorf("update CRDT data: %w", err)
	}
	if err := s.appended(ctx, c, st, seq, update, actionUpdate, d, in.key, in.kind); err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *Server) ApplyCrdtUpdate(ctx context.Context, req *crdtv1.ApplyCrdtUpdateRequest) (*crdtv1.ApplyCrdtUpdateResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	loc, update, err := checkApply(req.GetOrganizationId(), req.GetDocumentId(), req.GetEditorId(), req.GetUpdate())
	if err != nil {
		return nil, err
	}
	e, err := s.editor(ctx, c.APIKey, loc)
	if err != nil {
		return nil, err
	}
	resp := &crdtv1.ApplyCrdtUpdateResponse{Status: statusSuccess, Message: msgApplied}
	// Twice at most: when a concurrent Apply creates the editor first, this one appends.
	for range 2 {
		st, d, err := s.load(ctx, e)
		if errors.Is(err, ErrNotFound) {
			// Yjs clients make documents implicitly: the first update creates the editor.
			d := yjs.NewDoc()
			if _, err := d.ApplyUntrusted(ctx, update, untrusted); err != nil {
				return nil, applyRefusal(err)
			}
			m := &Meta{Editor: e, CreatedAt: s.now()}
			err := s.store.Create(ctx, m, update)
			if errors.Is(err, ErrExists) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("apply CRDT update: %w", err)
			}
			if err := s.settle(ctx, e); err != nil {
				return nil, err
			}
			if s.broadcast != nil {
				s.broadcast(m, 0, update)
			}
			key, kind := readAs(m, d, "", 0, false)
			s.publish(ctx, c, m, actionApply, d, key, kind)
			return resp, nil
		}
		if err != nil {
			return nil, err
		}
		// The caller's update is untrusted: it may cost and take only so much.
		applied, err := d.ApplyUntrusted(ctx, update, untrusted)
		if err != nil {
			return nil, applyRefusal(err)
		}
		if !applied.Changed {
			return resp, nil // the editor holds it already: nothing to store, relay or announce
		}
		seq, err := s.store.Append(ctx, st.Meta.Stream, Update{Data: update, At: s.now(), Origin: s.origin})
		if err != nil {
			return nil, fmt.Errorf("apply CRDT update: %w", err)
		}
		key, kind := readAs(&st.Meta, d, "", 0, false)
		if err := s.appended(ctx, c, st, seq, update, actionApply, d, key, kind); err != nil {
			return nil, err
		}
		return resp, nil
	}
	return nil, errors.New("apply CRDT update: the editor was created and deleted while applying")
}

// checkKind refuses to write kind into an editor's root that holds another type: a Yjs root
// keeps the type it was made with, and a map written beside a text would be stored and
// announced, and read by no one. The type held is Add's for Add's own root, else what the
// content shows; a root whose content its clients deleted is still a sequence (text, array or
// XML) or a map, which its items tell.
func checkKind(m *Meta, d *yjs.Doc, key string, kind yjs.Kind) error {
	held, ok := yjs.Kind(0), false
	if key == m.ContentKey {
		held, ok = yjs.ParseKind(m.Type)
	}
	if !ok {
		held, ok = d.KindOf(key)
	}
	if ok && held != kind {
		return apierr.InvalidArgument(msgOtherType, key, held, held)
	}
	if ok {
		return nil
	}
	switch sequence, entries := d.Shape(key); {
	case sequence && kind == yjs.Map:
		return apierr.InvalidArgument(msgNotMap, key)
	case entries && !sequence && kind != yjs.Map:
		return apierr.InvalidArgument(msgOtherType, key, yjs.Map, yjs.Map)
	}
	return nil
}

// readAs is the root and type an editor's content is read as: those asked for; else what Add
// stored (its type only for its own root); else the type the content looks like; else text.
func readAs(m *Meta, d *yjs.Doc, key string, kind yjs.Kind, kindGiven bool) (string, yjs.Kind) {
	if key == "" {
		key = m.ContentKey
	}
	if key == "" {
		key = defaultContentKey
	}
	if kindGiven {
		return key, kind
	}
	if key == m.ContentKey {
		if k, ok := yjs.ParseKind(m.Type); ok {
			return key, k
		}
	}
	if k, ok := d.KindOf(key); ok {
		return key, k
	}
	return key, yjs.Text
}

func (s *Server) GetCrdtData(ctx context.Context, req *crdtv1.GetCrdtDataRequest) (*crdtv1.GetCrdtDataResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	r, err := checkGet(req.GetOrganizationId(), req.GetDocumentId(), req.GetEditorId(), req.GetType(), req.GetContentKey(), req.GetFormat(), req.GetStateVector())
	if err != nil {
		return nil, err
	}
	e, err := s.editor(ctx, c.APIKey, r.location)
	if err != nil {
		return nil, err
	}
	resp := &crdtv1.GetCrdtDataResponse{Status: statusSuccess, Message: msgRetrieved, Data: []*crdtv1.CrdtEditorData{}}
	editors := []Editor{e}
	if r.editor == "" {
		metas, err := s.store.List(ctx, e, maxEditors+1)
		if err != nil {
			return nil, fmt.Errorf("list CRDT editors: %w", err)
		}
		if len(metas) > maxEditors {
			return nil, apierr.FailedPrecondition(msgTooManyEds)
		}
		editors = editors[:0]
		for _, m := range metas {
			editors = append(editors, m.Editor)
		}
	}
	size := proto.Size(resp)
	for _, ed := range editors {
		st, d, err := s.load(ctx, ed)
		if errors.Is(err, ErrNotFound) {
			if r.editor == "" {
				continue // deleted since it was listed
			}
			return nil, apierr.NotFound(msgNoData)
		}
		if err != nil {
			return nil, err
		}
		row := &crdtv1.CrdtEditorData{Id: ed.EditorID, LastUpdate: float64(st.LastUpdate())}
		if r.format == formatYjs {
			update, err := d.Encode(r.stateVector)
			if errors.Is(err, yjs.ErrMalformed) {
				return nil, apierr.InvalidArgument(msgBadSV)
			}
			if err != nil {
				return nil, fmt.Errorf("encode CRDT data: %w", err)
			}
			row.Data = structpb.NewStringValue(base64.StdEncoding.EncodeToString(update))
		} else {
			key, kind := readAs(&st.Meta, d, r.key, r.kind, r.kindGiven)
			if row.Data, err = structpb.NewValue(yjs.Plain(d.JSON(key, kind))); err != nil {
				return nil, fmt.Errorf("CRDT data of editor %s as JSON: %w", ed.EditorID, err)
			}
		}
		// Stop before holding more than an answer can carry.
		if size += proto.Size(row) + 8; size > grpcserver.MaxMessageBytes {
			return nil, apierr.FailedPrecondition(msgAnswerTooBig)
		}
		resp.Data = append(resp.Data, row)
	}
	return resp, nil
}

func (s *Server) DeleteCrdtData(ctx context.Context, req *crdtv1.DeleteCrdtDataRequest) (*crdtv1.DeleteCrdtDataResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	loc, err := checkLocation(req.GetOrganizationId(), req.GetDocumentId(), req.GetEditorId(), false)
	if err != nil {
		return nil, err
	}
	e, err := s.editor(ctx, c.APIKey, loc)
	if err != nil {
		return nil, err
	}
	resp := &crdtv1.DeleteCrdtDataResponse{Status: statusSuccess, Message: msgDeleted}
	if loc.editor != "" {
		deleted, err := s.deleteEditor(ctx, c, e)
		if err != nil {
			return nil, err
		}
		if !deleted {
			return nil, apierr.NotFound(msgNoData)
		}
		return resp, nil
	}
	// Every editor of the document, a batch at a time, each announced. Bounded, so editors
	// added as fast as they are deleted cannot keep it going.
	for range maxDeleteRounds {
		metas, err := s.store.List(ctx, e, maxEditors)
		if err != nil {
			return nil, fmt.Errorf("list CRDT editors: %w", err)
		}
		if len(metas) == 0 {
			break
		}
		for _, m := range metas {
			ed := m.Editor
			ed.DocumentID = e.DocumentID
			if _, err := s.deleteEditor(ctx, c, ed); err != nil {
				return nil, err
			}
		}
	}
	return resp, nil
}

// maxDeleteRounds bounds the batches of a document's deletion.
const maxDeleteRounds = 1000

// deleteEditor deletes one editor's data and announces it; false when it had none.
func (s *Server) deleteEditor(ctx context.Context, c authn.Caller, e Editor) (bool, error) {
	m, err := s.store.Meta(ctx, e)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete CRDT data: %w", err)
	}
	m.DocumentID = e.DocumentID
	deleted, err := s.store.DeleteEditor(ctx, e)
	if err != nil {
		return false, fmt.Errorf("delete CRDT data: %w", err)
	}
	if !deleted {
		return false, nil
	}
	if s.broadcast != nil {
		s.broadcast(m, 0, nil)
	}
	s.publishDeleted(ctx, c, m)
	return true, nil
}

// errStale refuses a live update to data deleted since the room loaded it.
var errStale = errors.New("the editor's data was deleted since the room loaded it")

// appendLive stores an update of a live client as Apply CRDT Update stores one, creating the
// editor's data when it has none (created), but without the size check (the room bounds its
// document), the broadcast (the room relays the update itself) and the event (live edits are
// announced coalesced). It returns the editor's record and the update's sequence number (0
// for the update that created the data). version is the stream the room loaded ("" for none):
// errStale when the data is no longer that one.
func (s *Server) appendLive(ctx context.Context, e Editor, version string, update []byte) (m *Meta, seq int64, created bool, err error) {
	for range 2 {
		m, err := s.store.Meta(ctx, e)
		if version != "" && (errors.Is(err, ErrNotFound) || (err == nil && m.Stream != version)) {
			// The room holds data that was deleted: its client's update must not revive it.
			return nil, 0, false, errStale
		}
		if errors.Is(err, ErrNotFound) {
			m = &Meta{Editor: e, CreatedAt: s.now()}
			err := s.store.Create(ctx, m, update)
			if errors.Is(err, ErrExists) {
				continue
			}
			if err != nil {
				return nil, 0, false, fmt.Errorf("store a live update: %w", err)
			}
			if err := s.settle(ctx, e); err != nil {
				return nil, 0, false, err
			}
			return m, 0, true, nil
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("store a live update: %w", err)
		}
		seq, err := s.store.Append(ctx, m.Stream, Update{Data: update, At: s.now(), Origin: s.origin})
		if err != nil {
			return nil, 0, false, fmt.Errorf("store a live update: %w", err)
		}
		kept, err := s.settleAppend(ctx, m)
		if err != nil {
			return nil, 0, false, err
		}
		// Due every MaxUpdates entries, or once this process appended MaxBytes to the stream
		// since it last compacted it (the room appends without reading the log's size);
		// Compact checks again.
		if kept && s.liveDue(m.Stream, seq, len(update)) {
			if _, err := s.store.Compact(ctx, e, s.compaction, yjs.Merge); err != nil {
				s.log.WarnContext(ctx, "crdt compaction failed", "editor_id", e.EditorID, "error", err)
			}
		}
		return m, seq, false, nil
	}
	return nil, 0, false, errors.New("store a live update: the editor was created and deleted meanwhile")
}

// liveDue counts a live append and reports whether the stream's log is due for compaction.
func (s *Server) liveDue(stream string, seq int64, n int) bool {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.liveBytes == nil {
		s.liveBytes = map[string]int{}
	}
	s.liveBytes[stream] += n
	due := (s.compaction.MaxUpdates > 0 && seq%int64(s.compaction.MaxUpdates) == 0) ||
		(s.compaction.MaxBytes > 0 && s.liveBytes[stream] >= s.compaction.MaxBytes)
	if due {
		delete(s.liveBytes, stream)
	}
	return due
}
