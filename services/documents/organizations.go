package documents

import (
	"context"
	"errors"
	"fmt"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// checkOrganizations checks the items of Add and Update Organizations.
func checkOrganizations(orgs []*documentsv1.Organization) error {
	if err := checkCount("organizations", "organization", len(orgs), maxItems); err != nil {
		return err
	}
	seen := map[string]int{}
	for i, o := range orgs {
		if err := validate.ID(field("organizations", i, "organizationId"), o.GetOrganizationId()); err != nil {
			return err
		}
		if err := checkUnique("organizations", "organizationId", i, o.GetOrganizationId(), seen); err != nil {
			return err
		}
		if err := validate.Name(field("organizations", i, "organizationName"), trim(o.GetOrganizationName()), maxNameLength); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) AddOrganizations(ctx context.Context, req *documentsv1.AddOrganizationsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkOrganizations(req.GetOrganizations()); err != nil {
		return nil, err
	}
	now := s.now()
	data := map[string]*documentsv1.ItemResult{}
	for _, o := range req.GetOrganizations() {
		id := o.GetOrganizationId()
		err := s.store.CreateOrganization(ctx, &Organization{APIKey: c.APIKey, ID: id, Generation: lifecycle.NewGeneration(), Name: trim(o.GetOrganizationName()), CreatedAt: now})
		switch {
		case errors.Is(err, ErrExists):
			data[id] = itemResult(id, false, msgOrgExists)
		case err != nil:
			return nil, fmt.Errorf("add organization: %w", err)
		default:
			data[id] = itemResult(id, true, msgOrgAdded)
		}
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Organization(s) added successfully.", Data: data}, nil
}

func (s *Server) GetOrganizations(ctx context.Context, req *documentsv1.GetOrganizationsRequest) (*documentsv1.GetOrganizationsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := validate.IDs("organizationIds", req.GetOrganizationIds(), false, maxIDs)
	if err != nil {
		return nil, err
	}
	size, err := checkPageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	scope := pageScope("organizations", c.APIKey, nil, ids)
	after, err := openPage(s.orgPages, req.GetPageToken(), scope)
	if err != nil {
		return nil, err
	}
	// One extra row tells whether another page exists.
	orgs, err := s.store.ListOrganizations(ctx, c.APIKey, ids, after, size+1)
	if err != nil {
		return nil, fmt.Errorf("list organizations: %w", err)
	}
	resp := &documentsv1.GetOrganizationsResponse{Status: statusSuccess, Message: "Organizations retrieved successfully.", Data: []*documentsv1.Organization{}}
	if len(orgs) > size {
		orgs = orgs[:size]
		if resp.PageToken, err = nextPage(s.orgPages, scope, orgs[size-1].position()); err != nil {
			return nil, err
		}
	}
	for _, o := range orgs {
		resp.Data = append(resp.Data, &documentsv1.Organization{OrganizationId: o.ID, OrganizationName: o.Name})
	}
	return resp, nil
}

func (s *Server) UpdateOrganizations(ctx context.Context, req *documentsv1.UpdateOrganizationsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkOrganizations(req.GetOrganizations()); err != nil {
		return nil, err
	}
	data := map[string]*documentsv1.ItemResult{}
	for _, o := range req.GetOrganizations() {
		id := o.GetOrganizationId()
		err := s.store.RenameOrganization(ctx, c.APIKey, id, trim(o.GetOrganizationName()))
		switch {
		case errors.Is(err, ErrNotFound):
			data[id] = itemResult(id, false, msgOrgMissing)
		case err != nil:
			return nil, fmt.Errorf("update organization: %w", err)
		default:
			data[id] = itemResult(id, true, msgOrgUpdated)
		}
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Organization(s) updated successfully.", Data: data}, nil
}

// DeleteOrganizations publishes organization.deleted for each existing organization; every
// service (this one first, through HandleEvent) removes its data of it.
func (s *Server) DeleteOrganizations(ctx context.Context, req *documentsv1.DeleteOrganizationsRequest) (*documentsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := validate.IDs("organizationIds", req.GetOrganizationIds(), true, maxIDs)
	if err != nil {
		return nil, err
	}
	data := map[string]*documentsv1.ItemResult{}
	for _, id := range ids {
		o, err := s.store.Organization(ctx, c.APIKey, id)
		if errors.Is(err, ErrNotFound) {
			data[id] = itemResult(id, false, msgOrgMissing)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read organization: %w", err)
		}
		e := s.event(c.APIKey, id, o.Generation, eventOrganizationDeleted)
		e.Payload = &lifecyclev1.Event_OrganizationDeleted{OrganizationDeleted: &lifecyclev1.OrganizationDeleted{}}
		if _, err := s.events.Publish(ctx, e); err != nil {
			return nil, fmt.Errorf("delete organization: %w", err)
		}
		s.log.InfoContext(ctx, "organization deleted", "api_key", c.APIKey, "organization_id", id, "event_id", e.GetId())
		data[id] = itemResult(id, true, msgOrgDeleted)
	}
	return &documentsv1.ItemResultsResponse{Status: statusSuccess, Message: "Organization(s) deleted successfully.", Data: data}, nil
}
