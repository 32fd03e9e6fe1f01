package crdt

import (
	"context"
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/yjs"
)

// eventUpdateData is the domain event of every change of CRDT data; its data's action says
// which (docs/events.md, "`crdt.update_data`").
const eventUpdateData = "crdt.update_data"

// Actions of crdt.update_data.
const (
	actionAdd    = "add"
	actionUpdate = "update"
	actionApply  = "apply"
	actionDelete = "delete"
	// actionLive: edits of clients connected to live sync, announced at most once per room
	// every few seconds with the content after them.
	actionLive = "live"
)

// consumes are the lifecycle events the CRDT data follows.
var consumes = []string{lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated}

// HandleEvent applies the lifecycle events to the data (lifecycle.Dispatch). Idempotent:
// deletions and moves may run twice, and after a partial run.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	_, err := lifecycle.Dispatch(ctx, e, lifecycle.Handlers{
		OrganizationDeleted: s.organizationDeleted,
		DocumentsDeleted:    s.documentsDeleted,
		DocumentMigrated:    s.documentMigrated,
	})
	return err
}

// organizationDeleted buries the organization's generation, then deletes its editors' data.
func (s *Server) organizationDeleted(ctx context.Context, sc lifecycle.Scope) error {
	apiKey, org, gen := sc.APIKey, sc.OrganizationID, sc.OrganizationGeneration
	// Buried first: a writer that checks after this sees it and sweeps what it wrote.
	if gen != "" {
		if err := s.store.Bury(ctx, apiKey, org, KindOrganization, org, gen); err != nil {
			return err
		}
	}
	if err := s.store.DeleteOrganization(ctx, apiKey, org, gen); err != nil {
		return err
	}
	s.reloadWhere(Scope{APIKey: apiKey, Org: org})
	return nil
}

// documentsDeleted buries each document's generation, then deletes its editors' data.
func (s *Server) documentsDeleted(ctx context.Context, sc lifecycle.Scope, docs []lifecycle.Incarnation) error {
	apiKey, org := sc.APIKey, sc.OrganizationID
	for _, d := range docs {
		if d.Generation != "" {
			if err := s.store.Bury(ctx, apiKey, org, KindDocument, d.ID, d.Generation); err != nil {
				return err
			}
		}
		doc := Editor{APIKey: apiKey, OrganizationID: org, OrgGen: sc.OrganizationGeneration, DocumentID: d.ID, DocGen: d.Generation}
		if err := s.store.DeleteDocument(ctx, doc); err != nil {
			return err
		}
		s.reloadWhere(Scope{APIKey: apiKey, Org: org, Doc: d.ID})
	}
	return nil
}

// documentMigrated gives the editors of the migrated incarnation their new id.
func (s *Server) documentMigrated(ctx context.Context, sc lifecycle.Scope, m lifecycle.Migration) error {
	apiKey, org := sc.APIKey, sc.OrganizationID
	// Data is keyed by the document's generation, which it keeps: it is found under the new id
	// already, and a write racing the migration lands where readers look. Only the id kept
	// beside it changes.
	if err := s.store.MoveDocument(ctx, apiKey, org, m.From, m.To, m.Generation); err != nil {
		return err
	}
	// Clients of the old id reconnect, and find the document gone from there.
	s.reloadWhere(Scope{APIKey: apiKey, Org: org, Doc: m.From})
	return nil
}

// publish announces a stored change as crdt.update_data, with the content read as key and kind
// when it is small. The change is stored already: a failure to publish is logged, not
// answered, as a retry of the request would not publish it either (the content would be the
// same).
func (s *Server) publish(ctx context.Context, c authn.Caller, m *Meta, action string, d *yjs.Doc, key string, kind yjs.Kind) {
	s.emitAs(ctx, c, m, "", contentData(m, action, d, key, kind))
}

// contentData is the data of crdt.update_data for a change: the content when it is small.
func contentData(m *Meta, action string, d *yjs.Doc, key string, kind yjs.Kind) map[string]any {
	data := map[string]any{"editorId": m.EditorID, "action": action, "type": kind.String(), "contentKey": key}
	if b, err := json.Marshal(yjs.Plain(d.JSON(key, kind))); err == nil && len(b) <= maxEventContentBytes {
		var v any
		if json.Unmarshal(b, &v) == nil {
			data["data"] = v
		}
	} else {
		data["dataOmitted"] = true
	}
	return data
}

// publishDeleted announces a deletion as crdt.update_data.
func (s *Server) publishDeleted(ctx context.Context, c authn.Caller, m *Meta) {
	key := m.ContentKey
	if key == "" {
		key = defaultContentKey
	}
	s.emit(ctx, c, m, map[string]any{"editorId": m.EditorID, "action": actionDelete, "type": m.Type, "contentKey": key})
}

// publishLive announces live edits, with the user of the last writing connection.
func (s *Server) publishLive(ctx context.Context, c authn.Caller, m *Meta, user string, d *yjs.Doc, key string, kind yjs.Kind) {
	s.emitAs(ctx, c, m, user, contentData(m, actionLive, d, key, kind))
}

func (s *Server) emit(ctx context.Context, c authn.Caller, m *Meta, data map[string]any) {
	s.emitAs(ctx, c, m, "", data)
}

func (s *Server) emitAs(ctx context.Context, c authn.Caller, m *Meta, user string, data map[string]any) {
	st, err := structpb.NewStruct(data)
	if err != nil {
		s.log.ErrorContext(ctx, "crdt event data", "editor_id", m.EditorID, "error", err)
		return
	}
	e := &eventsv1.Event{
		Id: "crdt_" + ids.Random(24), Type: eventUpdateData, WorkspaceId: c.WorkspaceID, ApiKey: m.APIKey,
		OrganizationId: m.OrganizationID, DocumentId: m.DocumentID, Timestamp: float64(s.now()),
		TargetEntityId: m.EditorID, Data: st,
		OrganizationGeneration: m.OrgGen, DocumentGeneration: m.DocGen,
	}
	if user != "" {
		e.ActionUser = &eventsv1.ActionUser{UserId: user}
	}
	if _, err := s.events.PublishAsync(ctx, lifecycle.Domain(e)); err != nil {
		s.log.ErrorContext(ctx, "crdt.update_data not published", "editor_id", m.EditorID, "error", err)
	}
}
