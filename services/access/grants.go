package access

import (
	"context"
	"fmt"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// Messages the caller sees (docs/api.md, "Access").
const (
	msgPermissionsAdded   = "Permissions added successfully."
	msgPermissionsRemoved = "Permissions removed successfully."
)

// AddPermissions grants the user roles on organizations, folders and documents, and sets their
// access context fields; everything is checked, existence included, before anything is written.
func (s *Server) AddPermissions(ctx context.Context, req *accessv1.AddPermissionsRequest) (*accessv1.PermissionsChangedResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	userID := req.GetUser().GetUserId()
	if err := validate.ID("user.userId", userID); err != nil {
		return nil, err
	}
	plan, err := s.planGrants(ctx, c.APIKey, userID, req.GetPermissions(), s.now())
	if err != nil {
		return nil, err
	}
	if err := s.apply(ctx, c.APIKey, plan); err != nil {
		return nil, fmt.Errorf("add permissions: %w", err)
	}
	return &accessv1.PermissionsChangedResponse{Status: statusSuccess, Message: msgPermissionsAdded}, nil
}

// RemovePermissions deletes the user's grants on the resources named; removing what is not
// there is no error.
func (s *Server) RemovePermissions(ctx context.Context, req *accessv1.RemovePermissionsRequest) (*accessv1.PermissionsChangedResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	userID := req.GetUserId()
	if err := validate.ID("userId", userID); err != nil {
		return nil, err
	}
	resources := req.GetPermissions().GetResources()
	if err := checkCount("permissions.resources", "resource", len(resources), maxResources); err != nil {
		return nil, err
	}
	refs := make([]GrantRef, 0, len(resources))
	for i, r := range resources {
		if err := checkTarget(fmt.Sprintf("permissions.resources[%d].", i), r.GetType(), r.GetId(), r.GetOrganizationId()); err != nil {
			return nil, err
		}
		refs = append(refs, GrantRef{OrganizationID: r.GetOrganizationId(), ResourceType: r.GetType(), ResourceID: r.GetId(), UserID: userID})
	}
	// Grants are kept under the resources' current generations. A resource that no longer
	// exists is not refused: its grants went with it, or sit under its dead generation, which
	// nobody reads.
	orgs, err := s.resolveTargets(ctx, c.APIKey, refs)
	if err != nil {
		return nil, err
	}
	byOrg := map[string]*resolvedOrg{}
	for _, o := range orgs {
		byOrg[o.id] = o
	}
	bound := refs[:0]
	for _, g := range refs {
		o := byOrg[g.OrganizationID]
		ref, ok := o.ref(g.ResourceType, g.ResourceID)
		if !ok {
			continue
		}
		g.OrganizationID, _ = o.ref(ResourceOrganization, "")
		g.ResourceID = ref
		bound = append(bound, g)
	}
	if err := s.store.DeleteGrants(ctx, c.APIKey, bound); err != nil {
		return nil, fmt.Errorf("remove permissions: %w", err)
	}
	return &accessv1.PermissionsChangedResponse{Status: statusSuccess, Message: msgPermissionsRemoved}, nil
}

// SetRoles is the users service's way to give roles (Add Users, Update Users). The caller has
// checked that the resource exists and passes its generation (and the organization's), which
// key the grants; the tenant comes in the request, as internal calls carry no caller.
func (s *Server) SetRoles(ctx context.Context, req *accessv1.SetRolesRequest) (*accessv1.SetRolesResponse, error) {
	apiKey := req.GetApiKey()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := checkTarget("", req.GetResourceType(), req.GetResourceId(), req.GetOrganizationId()); err != nil {
		return nil, err
	}
	userIDs, err := validate.IDs("userIds", req.GetUserIds(), true, maxUserIDs)
	if err != nil {
		return nil, err
	}
	if err := validate.AccessRole("accessRole", req.GetAccessRole(), false); err != nil {
		return nil, err
	}
	orgRef := lifecycle.Ref(req.GetOrganizationId(), req.GetOrganizationGeneration())
	resourceRef := lifecycle.Ref(req.GetResourceId(), req.GetResourceGeneration())
	if req.GetResourceType() == ResourceOrganization {
		resourceRef = orgRef
	}
	grants := make([]Grant, 0, len(userIDs))
	for _, u := range userIDs {
		grants = append(grants, Grant{
			OrganizationID: orgRef, ResourceType: req.GetResourceType(), ResourceID: resourceRef,
			UserID: u, AccessRole: req.GetAccessRole(),
		})
	}
	if req.GetOnlyIfAbsent() {
		err = s.store.PutGrantsIfAbsent(ctx, apiKey, grants, s.now())
	} else {
		err = s.store.PutGrants(ctx, apiKey, grants)
	}
	if err != nil {
		return nil, fmt.Errorf("set roles: %w", err)
	}
	return &accessv1.SetRolesResponse{}, nil
}
