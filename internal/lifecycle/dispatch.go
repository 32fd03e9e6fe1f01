package lifecycle

import (
	"context"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

// Scope is the tenant and the organization incarnation a lifecycle event is about.
type Scope struct {
	APIKey                 string
	OrganizationID         string
	OrganizationGeneration string
}

// OrgRef is the key of records about the organization incarnation (Ref).
func (s Scope) OrgRef() string { return Ref(s.OrganizationID, s.OrganizationGeneration) }

// Migration is a document.migrated event's payload, its ids checked.
type Migration struct {
	From, To   string
	Generation string // the document's, which it keeps under its new id
	ID         string // the migration's ("" for events from before migration ids)
}

// Handlers are a service's handlers of the lifecycle events it acts on, one field per kind of
// payload: Dispatch calls the one of an event's payload after checking what that kind needs,
// so the services do not repeat the checks. A nil handler skips its kind.
//
// location.data_deleted has no field: no service holds data tied to locations yet.
type Handlers struct {
	OrganizationDeleted func(ctx context.Context, s Scope) error
	// DocumentsDeleted gets the documents with their generations (DeletedDocuments).
	DocumentsDeleted func(ctx context.Context, s Scope, docs []Incarnation) error
	FolderDeleted    func(ctx context.Context, s Scope, folder Incarnation) error
	DocumentMigrated func(ctx context.Context, s Scope, m Migration) error
	UsersRemoved     func(ctx context.Context, s Scope, r *lifecyclev1.UsersRemoved) error
	// LocationDataDeleted gets the location whose feature data goes (Delete Data by Location):
	// a document id ("" for every document of the organization), and the location's id, else
	// its name. Its Scope's organization is "" when the location goes in every organization
	// of the key.
	LocationDataDeleted func(ctx context.Context, s Scope, l Location) error
	// Domain gets a domain event riding the relay, as it is: unlike the others, it needs no
	// scope in the envelope, so its handler checks what it needs.
	Domain func(ctx context.Context, e *eventsv1.Event) error
}

// Dispatch applies an event with the handler of its payload. Every kind but a domain event needs
// its tenant and organization (Scoped), deleted documents a generation each or none
// (DeletedDocuments), a deleted folder its id, a migration both ids: an event without them is
// refused for good (Invalid) before any handler runs. handled is false when h has no handler
// for the payload (or the payload is of a kind this version does not know), which is then left
// alone unchecked. A handler's error is returned as it is.
func Dispatch(ctx context.Context, e *lifecyclev1.Event, h Handlers) (handled bool, err error) {
	if d, ok := e.GetPayload().(*lifecyclev1.Event_Domain); ok {
		if h.Domain == nil {
			return false, nil
		}
		return true, h.Domain(ctx, d.Domain)
	}
	apply := h.scoped(e)
	if apply == nil {
		return false, nil
	}
	apiKey, org, err := Scoped(e)
	if _, ok := e.GetPayload().(*lifecyclev1.Event_LocationDataDeleted); ok && err != nil && e.GetApiKey() != "" {
		// Delete Data by Location without an organization: the location goes in every
		// organization of the key (docs/api.md, "Delete Data by Location").
		apiKey, org, err = e.GetApiKey(), "", nil
	}
	if err != nil {
		return true, err
	}
	return true, apply(ctx, Scope{APIKey: apiKey, OrganizationID: org, OrganizationGeneration: e.GetOrganizationGeneration()})
}

// scoped returns the handler of e's scoped payload, bound to the payload and checking it, or
// nil when h has none.
func (h Handlers) scoped(e *lifecyclev1.Event) func(context.Context, Scope) error {
	switch p := e.GetPayload().(type) {
	case *lifecyclev1.Event_OrganizationDeleted:
		return h.OrganizationDeleted
	case *lifecyclev1.Event_DocumentsDeleted:
		if h.DocumentsDeleted == nil {
			return nil
		}
		return func(ctx context.Context, s Scope) error {
			docs, err := DeletedDocuments(e, p.DocumentsDeleted)
			if err != nil {
				return err
			}
			return h.DocumentsDeleted(ctx, s, docs)
		}
	case *lifecyclev1.Event_FolderDeleted:
		if h.FolderDeleted == nil {
			return nil
		}
		return func(ctx context.Context, s Scope) error {
			f := p.FolderDeleted
			if f.GetFolderId() == "" {
				return Invalid(e, "folder id")
			}
			return h.FolderDeleted(ctx, s, Incarnation{ID: f.GetFolderId(), Generation: f.GetGeneration()})
		}
	case *lifecyclev1.Event_DocumentMigrated:
		if h.DocumentMigrated == nil {
			return nil
		}
		return func(ctx context.Context, s Scope) error {
			m := p.DocumentMigrated
			if m.GetFromDocumentId() == "" || m.GetToDocumentId() == "" {
				return Invalid(e, "document ids")
			}
			return h.DocumentMigrated(ctx, s, Migration{From: m.GetFromDocumentId(), To: m.GetToDocumentId(), Generation: m.GetGeneration(), ID: m.GetMigrationId()})
		}
	case *lifecyclev1.Event_UsersRemoved:
		if h.UsersRemoved == nil {
			return nil
		}
		return func(ctx context.Context, s Scope) error { return h.UsersRemoved(ctx, s, p.UsersRemoved) }
	case *lifecyclev1.Event_LocationDataDeleted:
		if h.LocationDataDeleted == nil {
			return nil
		}
		return func(ctx context.Context, s Scope) error {
			l := p.LocationDataDeleted
			if l.GetLocationId() == "" && l.GetLocationName() == "" {
				return Invalid(e, "location id or name")
			}
			return h.LocationDataDeleted(ctx, s, Location{DocumentID: l.GetDocumentId(), ID: l.GetLocationId(), Name: l.GetLocationName()})
		}
	}
	return nil
}

// Location is a location of Delete Data by Location.
type Location struct{ DocumentID, ID, Name string }
