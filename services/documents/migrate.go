package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/validate"
)

// migrationIDPrefix marks migration ids, which are the ids of their document.migrated events.
const migrationIDPrefix = "mig_"

// MigrateDocument starts moving a document to a new id. The migration is its document.migrated
// event: the outbox relay delivers it to this service first (which moves the record, see
// applyMigration) and then to every other data service, and the event's delivery state is the
// migration's status.
func (s *Server) MigrateDocument(ctx context.Context, req *documentsv1.MigrateDocumentRequest) (*documentsv1.MigrateDocumentResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org, from, to := req.GetOrganizationId(), req.GetDocumentId(), req.GetNewDocumentId()
	for _, f := range []struct{ name, v string }{{"organizationId", org}, {"documentId", from}, {"newDocumentId", to}} {
		if err := validate.ID(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if from == to {
		return nil, apierr.InvalidArgument("newDocumentId must differ from documentId.")
	}
	orgGen, err := s.requireOrg(ctx, c.APIKey, org)
	if err != nil {
		return nil, err
	}
	existing, err := s.documentsByID(ctx, c.APIKey, org, []string{from, to})
	if err != nil {
		return nil, err
	}
	if existing[from] == nil {
		return nil, apierr.NotFound(msgDocumentMissing)
	}
	if existing[to] != nil {
		return nil, apierr.AlreadyExists("A document with id %s already exists.", to)
	}
	id := migrationIDPrefix + ids.Random(20)
	e := s.event(c.APIKey, org, orgGen, eventDocumentMigrated)
	e.Id = id
	e.Payload = &lifecyclev1.Event_DocumentMigrated{DocumentMigrated: &lifecyclev1.DocumentMigrated{FromDocumentId: from, ToDocumentId: to, MigrationId: id,
		Generation: existing[from].Generation}}
	if _, err := s.events.PublishAsync(ctx, e); err != nil {
		return nil, fmt.Errorf("start migration: %w", err)
	}
	s.log.InfoContext(ctx, "document migration started", "api_key", c.APIKey, "organization_id", org, "from", from, "to", to, "migration_id", id)
	return &documentsv1.MigrateDocumentResponse{Status: statusSuccess, Message: "Document migration started successfully.",
		Data: &documentsv1.MigrationId{MigrationId: id}}, nil
}

func (s *Server) GetMigrationStatus(ctx context.Context, req *documentsv1.GetMigrationStatusRequest) (*documentsv1.GetMigrationStatusResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org, id := req.GetOrganizationId(), req.GetMigrationId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.ID("migrationId", id); err != nil {
		return nil, err
	}
	r, err := s.events.Get(ctx, id)
	if errors.Is(err, outbox.ErrNotFound) {
		return nil, apierr.NotFound(msgMigrationAbsent)
	}
	if err != nil {
		return nil, fmt.Errorf("read migration: %w", err)
	}
	// Any other event, or another tenant's or organization's migration, does not exist here.
	if r.Type != eventDocumentMigrated || r.APIKey != c.APIKey || r.OrganizationID != org {
		return nil, apierr.NotFound(msgMigrationAbsent)
	}
	return &documentsv1.GetMigrationStatusResponse{Status: statusSuccess, Message: "Migration status retrieved successfully.",
		Data: &documentsv1.Migration{MigrationId: id, Status: r.State()}}, nil
}

// applyMigration moves the document record from → to. The copy is written before the original
// is removed, and marked with the migration id, so a redelivery after a crash between the two
// writes recognises its own copy and finishes; a document at the new id that is not that copy
// is a conflict, which fails the migration for good before any other service moves anything.
func (s *Server) applyMigration(ctx context.Context, apiKey, org string, m lifecycle.Migration) error {
	from, to, migration := m.From, m.To, m.ID
	// A concurrent writer can take the new id between the read and the insert: then decide
	// again on what is there.
	for range 2 {
		docs, err := s.store.ListDocuments(ctx, apiKey, org, DocumentFilter{IDs: []string{from, to}}, nil, 0)
		if err != nil {
			return fmt.Errorf("read migrated documents: %w", err)
		}
		var src, dst *Document
		for _, d := range docs {
			if d.ID == from {
				src = d
			} else {
				dst = d
			}
		}
		switch {
		case src == nil && dst == nil:
			return apierr.NotFound(msgDocumentMissing)
		case src == nil:
			return nil // done already
		case dst != nil && (migration == "" || dst.MigrationID != migration):
			return apierr.AlreadyExists("A document with id %s already exists.", to)
		case dst == nil:
			moved := *src
			moved.ID, moved.MigrationID = to, migration
			if err := s.store.CreateDocument(ctx, &moved); errors.Is(err, ErrExists) {
				continue
			} else if err != nil {
				return fmt.Errorf("copy migrated document: %w", err)
			}
			// The organization may have gone meanwhile: then the copy goes too, and the
			// migration fails for good.
			if err := s.confirmOrg(ctx, apiKey, org, src.OrgGeneration); err != nil {
				return err
			}
		}
		if err := s.store.DeleteDocuments(ctx, apiKey, org, []lifecycle.Incarnation{{ID: from, Generation: src.Generation}}); err != nil {
			return fmt.Errorf("remove migrated document: %w", err)
		}
		return nil
	}
	return apierr.AlreadyExists("A document with id %s already exists.", to)
}

// DeleteDataByLocation publishes location.data_deleted; the services holding feature data of
// the location remove it when the event reaches them.
func (s *Server) DeleteDataByLocation(ctx context.Context, req *documentsv1.DeleteDataByLocationRequest) (*documentsv1.DeleteDataByLocationResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	loc := req.GetLocation()
	locID, locName := loc.GetId(), trim(loc.GetLocationName())
	if locID == "" && locName == "" {
		return nil, apierr.InvalidArgument("location.id or location.locationName is required.")
	}
	if err := validate.OptionalID("location.id", locID); err != nil {
		return nil, err
	}
	// The name is matched, not stored, here; the services that store locations take it as
	// any other name, so it is held to the same rule.
	if err := validate.OptionalID("location.locationName", locName); err != nil {
		return nil, err
	}
	if err := validate.Name("location.locationName", locName, validate.MaxIDLength); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("documentId", req.GetDocumentId()); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	orgGen := ""
	if org := req.GetOrganizationId(); org != "" {
		// A location of an organization that does not exist has no data: the event still goes,
		// harmlessly, with the empty generation.
		if o, err := s.store.Organization(ctx, c.APIKey, org); err == nil {
			orgGen = o.Generation
		} else if !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("read organization: %w", err)
		}
	}
	e := s.event(c.APIKey, req.GetOrganizationId(), orgGen, eventLocationDataDeleted)
	e.Payload = &lifecyclev1.Event_LocationDataDeleted{LocationDataDeleted: &lifecyclev1.LocationDataDeleted{
		DocumentId: req.GetDocumentId(), LocationId: locID, LocationName: locName,
	}}
	if _, err := s.events.Publish(ctx, e); err != nil {
		return nil, fmt.Errorf("delete data by location: %w", err)
	}
	// data stays unset: the spec answers null.
	return &documentsv1.DeleteDataByLocationResponse{Status: statusSuccess, Message: "Data deleted successfully."}, nil
}
