package users

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/validate"
)

const statusSuccess = "success"

// Messages the caller sees (docs/api.md, "Users").
const (
	msgUsersProcessed   = "User(s) processed successfully."
	msgUsersDeleted     = "User(s) deleted successfully."
	msgUsersRetrieved   = "Users retrieved successfully."
	msgGroupsProcessed  = "Group(s) processed successfully."
	msgUserAdded        = "User added."
	msgUserUpdated      = "User updated."
	msgUserRemoved      = "User removed."
	msgUserMissing      = "User does not exist."
	msgRoleFailed       = "Could not set the user's access role."
	msgGroupAdded       = "Group added."
	msgGroupUpdated     = "Group updated."
	msgGroupMissing     = "Group does not exist."
	msgAddedToGroup     = "User added to group."
	msgRemovedFromGroup = "User removed from group."
	msgNotInGroup       = "User is not in the group."
	// The documents service's words, for a resource deleted while a request wrote to it.
	msgOrgMissing      = "Organization does not exist."
	msgDocumentMissing = "Document does not exist."
	msgTooManyUsers    = "This organization has more users than Get Users answers at once (at most 50000, within 8 MiB); narrow it with userIds, documentId or organizationUserGroupIds."
)

// Resource types of access.SetRoles.
const (
	resourceOrganization = "organization"
	resourceFolder       = "folder"
	resourceDocument     = "document"
)

// eventUsersRemoved is the type of the event Delete Users publishes.
const eventUsersRemoved = lifecycle.UsersRemoved

// Publisher stores an event durably and delivers it to every subscribing service, this one
// included (*outbox.Outbox).
type Publisher interface {
	Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
}

var (
	_ usersv1.UsersServiceServer = (*Server)(nil)
	_ lifecycle.Handler          = (*Server)(nil)
	_ Publisher                  = (*outbox.Outbox)(nil)
	_ Store                      = (*MemoryStore)(nil)
	_ Store                      = (*MongoStore)(nil)
)

// Server implements the users service and applies lifecycle events to its data.
type Server struct {
	usersv1.UnimplementedUsersServiceServer

	store  Store
	docs   documentsv1.DocumentsServiceClient
	access accessv1.AccessServiceClient
	events Publisher
	clock  clock.Clock
	log    *slog.Logger
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server on store. docs checks and creates organizations, folders and documents;
// access keeps the roles given here; events carries Delete Users to every service.
func New(store Store, docs documentsv1.DocumentsServiceClient, access accessv1.AccessServiceClient, events Publisher, opts ...Option) (*Server, error) {
	switch {
	case store == nil:
		return nil, errors.New("users: a store is required")
	case docs == nil:
		return nil, errors.New("users: a documents client is required")
	case access == nil:
		return nil, errors.New("users: an access client is required")
	case events == nil:
		return nil, errors.New("users: an event publisher is required")
	}
	s := &Server{store: store, docs: docs, access: access, events: events, clock: clock.Real(), log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

// ---- Users ----

func (s *Server) AddUsers(ctx context.Context, req *usersv1.AddUsersRequest) (*usersv1.UserResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUsers(req.GetOrganizationId(), req.GetDocumentId(), req.GetFolderId(), req.GetUsers()); err != nil {
		return nil, err
	}
	org, doc, folder := req.GetOrganizationId(), req.GetDocumentId(), req.GetFolderId()
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{
		ApiKey: c.APIKey, OrganizationId: org, CreateOrganization: req.GetCreateOrganization(),
		FolderId: folder, CreateFolder: req.GetCreateFolder(),
		DocumentId: doc, CreateDocument: req.GetCreateDocument(),
	})
	if err != nil {
		return nil, err
	}

	ids := make([]string, 0, len(req.GetUsers()))
	for _, u := range req.GetUsers() {
		ids = append(ids, u.GetUserId())
		// Add Users carries plain strings, so "sent" means not empty: an empty field keeps what
		// an existing user has.
		patch := UserPatch{UserID: u.GetUserId(), Name: nonEmpty(trim(u.GetName())), Email: nonEmpty(trim(u.GetEmail())), PhotoURL: nonEmpty(trim(u.GetPhotoUrl()))}
		if err := s.store.UpsertUser(ctx, c.APIKey, patch); err != nil {
			return nil, fmt.Errorf("add users: %w", err)
		}
	}
	if err := s.store.AddMembers(ctx, c.APIKey, p.orgRef, ids); err != nil {
		return nil, fmt.Errorf("add users: %w", err)
	}
	if doc != "" {
		if err := s.store.AddDocumentContacts(ctx, c.APIKey, p.orgRef, p.docRef, ids); err != nil {
			return nil, fmt.Errorf("add users: %w", err)
		}
	}

	scoped := p.scope()
	data := make(map[string]*usersv1.UserResult, len(ids))
	for _, u := range req.GetUsers() {
		// No role given: editor for a newcomer, and an existing role stays as it is.
		role, onlyIfAbsent := u.GetAccessRole(), false
		if role == "" {
			role, onlyIfAbsent = validate.RoleEditor, true
		}
		err := s.setRole(ctx, c.APIKey, p, u.GetUserId(), p.orgScope(), role, onlyIfAbsent)
		if err == nil && scoped.resourceType != resourceOrganization {
			err = s.setRole(ctx, c.APIKey, p, u.GetUserId(), scoped, role, onlyIfAbsent)
		}
		data[u.GetUserId()] = s.roleResult(ctx, u.GetUserId(), msgUserAdded, err)
	}
	if err := s.confirm(ctx, c.APIKey, p); err != nil {
		return nil, err
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgUsersProcessed, Data: data}, nil
}

func (s *Server) GetUsers(ctx context.Context, req *usersv1.GetUsersRequest) (*usersv1.GetUsersResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org, doc := req.GetOrganizationId(), req.GetDocumentId()
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("documentId", doc); err != nil {
		return nil, err
	}
	userIDs, err := validate.IDs("userIds", req.GetUserIds(), false, maxUserIDs)
	if err != nil {
		return nil, err
	}
	groupIDs, err := validate.IDs("organizationUserGroupIds", req.GetOrganizationUserGroupIds(), false, maxGroupFilter)
	if err != nil {
		return nil, err
	}
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org})
	if err != nil {
		return nil, err
	}

	// The filters combine as an intersection, each step narrowing the ids of the one before
	// (nil: not narrowed yet).
	var only []string
	if len(userIDs) > 0 {
		only = userIDs
	}
	if len(groupIDs) > 0 {
		if only, err = s.store.GroupMembers(ctx, c.APIKey, p.orgRef, groupIDs, only); err != nil {
			return nil, fmt.Errorf("get users: %w", err)
		}
	}
	if doc != "" {
		// The document's contacts of its current generation: a list left under a deleted one
		// is never read.
		docRef, exists, err := s.documentRef(ctx, c.APIKey, org, doc)
		if err != nil {
			return nil, err
		}
		switch {
		case !exists:
			only = []string{} // matches nobody
		default:
			if only, err = s.store.DocumentContacts(ctx, c.APIKey, p.orgRef, docRef, only); err != nil {
				return nil, fmt.Errorf("get users: %w", err)
			}
		}
	}
	// One more than the cap tells that there are more; the answer must also fit a message.
	members, err := s.store.Members(ctx, c.APIKey, p.orgRef, only, maxGetUsers+1)
	if err != nil {
		return nil, fmt.Errorf("get users: %w", err)
	}
	if len(members) > maxGetUsers {
		return nil, apierr.FailedPrecondition(msgTooManyUsers)
	}
	identities, err := s.store.Users(ctx, c.APIKey, members)
	if err != nil {
		return nil, fmt.Errorf("get users: %w", err)
	}
	byID := make(map[string]*User, len(identities))
	for _, u := range identities {
		byID[u.UserID] = u
	}
	data := make([]*usersv1.UserInfo, 0, len(members))
	for _, id := range members {
		info := &usersv1.UserInfo{UserId: id}
		if u, ok := byID[id]; ok {
			info.Name, info.Email = u.Name, u.Email
		}
		data = append(data, info)
	}
	resp := &usersv1.GetUsersResponse{Status: statusSuccess, Message: msgUsersRetrieved, Data: data}
	if !grpcserver.Fits(resp) {
		return nil, apierr.FailedPrecondition(msgTooManyUsers)
	}
	return resp, nil
}

func (s *Server) UpdateUsers(ctx context.Context, req *usersv1.UpdateUsersRequest) (*usersv1.UserResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUsers(req.GetOrganizationId(), req.GetDocumentId(), req.GetFolderId(), req.GetUsers()); err != nil {
		return nil, err
	}
	org, doc, folder := req.GetOrganizationId(), req.GetDocumentId(), req.GetFolderId()
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org, FolderId: folder, DocumentId: doc})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(req.GetUsers()))
	for _, u := range req.GetUsers() {
		ids = append(ids, u.GetUserId())
	}
	members, err := s.memberSet(ctx, c.APIKey, p.orgRef, ids)
	if err != nil {
		return nil, fmt.Errorf("update users: %w", err)
	}

	target := p.scope()
	data := make(map[string]*usersv1.UserResult, len(ids))
	for _, u := range req.GetUsers() {
		id := u.GetUserId()
		if !members[id] {
			data[id] = &usersv1.UserResult{Success: false, Id: id, Message: msgUserMissing}
			continue
		}
		patch := UserPatch{UserID: id, Name: trimPtr(u.Name), Email: trimPtr(u.Email), PhotoURL: trimPtr(u.PhotoUrl)}
		if patch.Name != nil || patch.Email != nil || patch.PhotoURL != nil {
			if err := s.store.UpsertUser(ctx, c.APIKey, patch); err != nil {
				return nil, fmt.Errorf("update users: %w", err)
			}
		}
		var roleErr error
		if role := u.GetAccessRole(); role != "" {
			roleErr = s.setRole(ctx, c.APIKey, p, id, target, role, false)
		}
		data[id] = s.roleResult(ctx, id, msgUserUpdated, roleErr)
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgUsersProcessed, Data: data}, nil
}

func (s *Server) DeleteUsers(ctx context.Context, req *usersv1.DeleteUsersRequest) (*usersv1.DeleteUsersResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	org, doc, folder := req.GetOrganizationId(), req.GetDocumentId(), req.GetFolderId()
	if err := checkScope(org, doc, folder); err != nil {
		return nil, err
	}
	ids, err := validate.IDs("userIds", req.GetUserIds(), true, maxUserIDs)
	if err != nil {
		return nil, err
	}
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org, FolderId: folder, DocumentId: doc})
	if err != nil {
		return nil, err
	}
	members, err := s.store.Members(ctx, c.APIKey, p.orgRef, ids, 0)
	if err != nil {
		return nil, fmt.Errorf("delete users: %w", err)
	}
	if len(members) > 0 {
		// The event is the only write: every service, this one included (HandleEvent), removes
		// its part when it is delivered, and delivery is retried until each has.
		if _, err := s.events.Publish(ctx, &lifecyclev1.Event{
			Type: eventUsersRemoved, ApiKey: c.APIKey, OrganizationId: org, OrganizationGeneration: p.gens.GetOrganizationGeneration(),
			CreatedAt: float64(s.clock.Now().UnixMilli()),
			Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{
				UserIds: members, DocumentId: doc, FolderId: folder,
				DocumentGeneration: p.gens.GetDocumentGeneration(), FolderGeneration: p.gens.GetFolderGeneration(),
			}},
		}); err != nil {
			return nil, fmt.Errorf("delete users: publish %s: %w", eventUsersRemoved, err)
		}
	}
	isMember := make(map[string]bool, len(members))
	for _, id := range members {
		isMember[id] = true
	}
	data := make(map[string]*usersv1.DeleteResult, len(ids))
	for _, id := range ids {
		if isMember[id] {
			data[id] = &usersv1.DeleteResult{Success: true, Message: msgUserRemoved}
		} else {
			data[id] = &usersv1.DeleteResult{Success: false, Message: msgUserMissing}
		}
	}
	return &usersv1.DeleteUsersResponse{Status: statusSuccess, Message: msgUsersDeleted, Data: data}, nil
}

// CountMembers counts an organization's members (its contact list, under the organization's
// current generation), for the notifications service's fan-out quota. Internal: the tenant is
// the request's apiKey.
func (s *Server) CountMembers(ctx context.Context, req *usersv1.CountMembersRequest) (*usersv1.CountMembersResponse, error) {
	apiKey, org := req.GetApiKey(), req.GetOrganizationId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org})
	if err != nil {
		return nil, apierr.FromPeer("resolve resources", err)
	}
	if !res.GetOrganizationExists() {
		return nil, apierr.NotFound(msgOrgMissing)
	}
	n, err := s.store.CountMembers(ctx, apiKey, lifecycle.Ref(org, res.GetOrganizationGeneration()))
	if err != nil {
		return nil, fmt.Errorf("count members: %w", err)
	}
	return &usersv1.CountMembersResponse{Count: int64(n)}, nil
}

// MembersAmong tells which of the users are members of an organization (its contact list,
// under the organization's current generation), for the notifications service's configs: one
// read of the users asked (Members with only), never a page through the list. Internal: the
// tenant is the request's apiKey.
func (s *Server) MembersAmong(ctx context.Context, req *usersv1.MembersAmongRequest) (*usersv1.MembersAmongResponse, error) {
	apiKey, org := req.GetApiKey(), req.GetOrganizationId()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	only, err := validate.IDs("userIds", req.GetUserIds(), true, maxMembersAmong)
	if err != nil {
		return nil, err
	}
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org})
	if err != nil {
		return nil, apierr.FromPeer("resolve resources", err)
	}
	if !res.GetOrganizationExists() {
		return nil, apierr.NotFound(msgOrgMissing)
	}
	members, err := s.store.Members(ctx, apiKey, lifecycle.Ref(org, res.GetOrganizationGeneration()), only, 0)
	if err != nil {
		return nil, fmt.Errorf("members among: %w", err)
	}
	return &usersv1.MembersAmongResponse{UserIds: members}, nil
}

// ListMembers pages through an organization's members (its contact list, under the
// organization's current generation) in user-id order, with their names and emails, for the
// notifications service. Internal: the tenant is the request's apiKey. A page holds limit
// members, or fewer when more would not fit a gRPC message (more then still says so).
func (s *Server) ListMembers(ctx context.Context, req *usersv1.ListMembersRequest) (*usersv1.ListMembersResponse, error) {
	apiKey, org, after := req.GetApiKey(), req.GetOrganizationId(), req.GetAfter()
	if err := validate.ID("apiKey", apiKey); err != nil {
		return nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("after", after); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultListMembers
	}
	if limit < 1 || limit > maxListMembers {
		return nil, apierr.InvalidArgument("limit must be between 1 and %d.", maxListMembers)
	}
	only, err := validate.IDs("userIds", req.GetUserIds(), false, maxListMembers)
	if err != nil {
		return nil, err
	}
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org})
	if err != nil {
		return nil, apierr.FromPeer("resolve resources", err)
	}
	if !res.GetOrganizationExists() {
		return nil, apierr.NotFound(msgOrgMissing)
	}
	orgRef := lifecycle.Ref(org, res.GetOrganizationGeneration())
	var ids []string
	resp := &usersv1.ListMembersResponse{}
	if len(req.GetUserIds()) > 0 {
		if ids, err = s.store.Members(ctx, apiKey, orgRef, only, 0); err != nil {
			return nil, fmt.Errorf("list members: %w", err)
		}
	} else {
		// One more than the page tells whether more follow.
		if ids, err = s.store.MembersAfter(ctx, apiKey, orgRef, after, limit+1); err != nil {
			return nil, fmt.Errorf("list members: %w", err)
		}
		if len(ids) > limit {
			ids, resp.More = ids[:limit], true
		}
	}
	resp.Members = make([]*usersv1.UserInfo, 0, len(ids))
	identities, err := s.store.Users(ctx, apiKey, ids)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	byID := make(map[string]*User, len(identities))
	for _, u := range identities {
		byID[u.UserID] = u
	}
	size := 0
	for _, id := range ids {
		info := &usersv1.UserInfo{UserId: id}
		if u, ok := byID[id]; ok {
			info.Name, info.Email = u.Name, u.Email
		}
		// Each entry costs its size, a tag byte and a length prefix (at most 3 bytes here).
		if size += proto.Size(info) + 4; size > maxListMembersBytes {
			// The caller goes on after the last member sent, so nothing is skipped.
			resp.More = true
			break
		}
		resp.Members = append(resp.Members, info)
	}
	return resp, nil
}

// ---- Groups ----

func (s *Server) AddUserGroups(ctx context.Context, req *usersv1.AddUserGroupsRequest) (*usersv1.UserResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkAddGroups(req); err != nil {
		return nil, err
	}
	org := req.GetOrganizationId()
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org})
	if err != nil {
		return nil, err
	}
	data := make(map[string]*usersv1.UserResult, len(req.GetOrganizationUserGroups()))
	for _, g := range req.GetOrganizationUserGroups() {
		created, err := s.store.UpsertGroup(ctx, c.APIKey, p.orgRef, Group{GroupID: g.GetGroupId(), Name: trim(g.GetGroupName())})
		if err != nil {
			return nil, fmt.Errorf("add user groups: %w", err)
		}
		msg := msgGroupUpdated
		if created {
			msg = msgGroupAdded
		}
		data[g.GetGroupId()] = &usersv1.UserResult{Success: true, Id: g.GetGroupId(), Message: msg}
	}
	if err := s.confirm(ctx, c.APIKey, p); err != nil {
		return nil, err
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgGroupsProcessed, Data: data}, nil
}

func (s *Server) AddUsersToGroup(ctx context.Context, req *usersv1.AddUsersToGroupRequest) (*usersv1.UserResultsResponse, error) {
	apiKey, p, members, ids, err := s.groupRequest(ctx, req.GetOrganizationId(), req.GetOrganizationUserGroupId(), req.GetUserIds())
	if err != nil {
		return nil, err
	}
	group := req.GetOrganizationUserGroupId()
	adding := make([]string, 0, len(ids))
	for _, id := range ids {
		if members[id] {
			adding = append(adding, id)
		}
	}
	if err := s.store.AddGroupMembers(ctx, apiKey, p.orgRef, group, adding); err != nil {
		return nil, fmt.Errorf("add users to group: %w", err)
	}
	if err := s.confirm(ctx, apiKey, p); err != nil {
		return nil, err
	}
	data := make(map[string]*usersv1.UserResult, len(ids))
	for _, id := range ids {
		if members[id] {
			data[id] = &usersv1.UserResult{Success: true, Id: id, Message: msgAddedToGroup}
		} else {
			data[id] = &usersv1.UserResult{Success: false, Id: id, Message: msgUserMissing}
		}
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgUsersProcessed, Data: data}, nil
}

func (s *Server) DeleteUsersFromGroup(ctx context.Context, req *usersv1.DeleteUsersFromGroupRequest) (*usersv1.UserResultsResponse, error) {
	apiKey, p, members, ids, err := s.groupRequest(ctx, req.GetOrganizationId(), req.GetOrganizationUserGroupId(), req.GetUserIds())
	if err != nil {
		return nil, err
	}
	group := req.GetOrganizationUserGroupId()
	inGroup, err := s.store.GroupMembers(ctx, apiKey, p.orgRef, []string{group}, ids)
	if err != nil {
		return nil, fmt.Errorf("delete users from group: %w", err)
	}
	if err := s.store.RemoveGroupMembers(ctx, apiKey, p.orgRef, group, inGroup); err != nil {
		return nil, fmt.Errorf("delete users from group: %w", err)
	}
	removed := make(map[string]bool, len(inGroup))
	for _, id := range inGroup {
		removed[id] = true
	}
	data := make(map[string]*usersv1.UserResult, len(ids))
	for _, id := range ids {
		switch {
		case !members[id]:
			data[id] = &usersv1.UserResult{Success: false, Id: id, Message: msgUserMissing}
		case !removed[id]:
			data[id] = &usersv1.UserResult{Success: false, Id: id, Message: msgNotInGroup}
		default:
			data[id] = &usersv1.UserResult{Success: true, Id: id, Message: msgRemovedFromGroup}
		}
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgUsersProcessed, Data: data}, nil
}

// groupRequest validates a request on a group's members, checks that the organization and the
// group exist, and returns the caller's API key, the organization, which of the
// (de-duplicated) ids are members of it, and the ids.
func (s *Server) groupRequest(ctx context.Context, org, group string, rawIDs []string) (string, place, map[string]bool, []string, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return "", place{}, nil, nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return "", place{}, nil, nil, err
	}
	if err := validate.ID("organizationUserGroupId", group); err != nil {
		return "", place{}, nil, nil, err
	}
	ids, err := validate.IDs("userIds", rawIDs, true, maxUserIDs)
	if err != nil {
		return "", place{}, nil, nil, err
	}
	p, err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org})
	if err != nil {
		return "", place{}, nil, nil, err
	}
	if _, err := s.store.Group(ctx, c.APIKey, p.orgRef, group); errors.Is(err, ErrNotFound) {
		return "", place{}, nil, nil, apierr.NotFound(msgGroupMissing)
	} else if err != nil {
		return "", place{}, nil, nil, fmt.Errorf("read group: %w", err)
	}
	members, err := s.memberSet(ctx, c.APIKey, p.orgRef, ids)
	if err != nil {
		return "", place{}, nil, nil, fmt.Errorf("read members: %w", err)
	}
	return c.APIKey, p, members, ids, nil
}

// ---- Calls to other services ----

// place is an organization, and a folder or document of it, as the request named them and as
// the stores key them: by id and generation (lifecycle.Ref), so that records a racing request
// left under a generation deleted meanwhile are never read again.
type place struct {
	org, folder, doc          string
	orgRef, folderRef, docRef string
	gens                      *documentsv1.EnsureResourcesResponse
}

// ensure asks the documents service for the organization, folder and document (creating them
// when the request says so) and their generations.
func (s *Server) ensure(ctx context.Context, req *documentsv1.EnsureResourcesRequest) (place, error) {
	gens, err := s.docs.EnsureResources(ctx, req)
	if err != nil {
		return place{}, apierr.FromPeer("ensure resources", err)
	}
	p := place{org: req.GetOrganizationId(), folder: req.GetFolderId(), doc: req.GetDocumentId(), gens: gens}
	p.orgRef = lifecycle.Ref(p.org, gens.GetOrganizationGeneration())
	if p.folder != "" {
		p.folderRef = lifecycle.Ref(p.folder, gens.GetFolderGeneration())
	}
	if p.doc != "" {
		p.docRef = lifecycle.Ref(p.doc, gens.GetDocumentGeneration())
	}
	return p, nil
}

// documentRef returns the store key of a document's current generation, and whether it exists.
func (s *Server) documentRef(ctx context.Context, apiKey, org, doc string) (string, bool, error) {
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org, DocumentIds: []string{doc}})
	if err != nil {
		return "", false, apierr.FromPeer("resolve resources", err)
	}
	d := res.GetDocuments()[doc]
	return lifecycle.Ref(doc, d.GetGeneration()), d.GetExists(), nil
}

// confirm runs after a request has written records of p. When the organization or the document
// was deleted meanwhile (its generation is no longer there), its deletion may have swept our
// records before these writes landed: the records of that generation go again, and the caller
// learns that it does not exist, as if the deletion had come first. Nobody reads under a dead
// generation, so this is tidying, and what it misses (a crash just before it) stays unseen.
func (s *Server) confirm(ctx context.Context, apiKey string, p place) error {
	req := &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: p.org}
	if p.doc != "" {
		req.DocumentIds = []string{p.doc}
	}
	res, err := s.docs.ResolveResources(ctx, req)
	if err != nil {
		return apierr.FromPeer("resolve resources", err)
	}
	tidy := context.WithoutCancel(ctx)
	if !res.GetOrganizationExists() || res.GetOrganizationGeneration() != p.gens.GetOrganizationGeneration() {
		if err := s.store.DeleteOrganization(tidy, apiKey, p.orgRef); err != nil {
			return fmt.Errorf("remove records of a deleted organization: %w", err)
		}
		return apierr.NotFound(msgOrgMissing)
	}
	if d := res.GetDocuments()[p.doc]; p.doc != "" && (!d.GetExists() || d.GetGeneration() != p.gens.GetDocumentGeneration()) {
		if err := s.store.DeleteDocuments(tidy, apiKey, p.orgRef, []string{p.docRef}); err != nil {
			return fmt.Errorf("remove records of a deleted document: %w", err)
		}
		return apierr.NotFound(msgDocumentMissing)
	}
	return nil
}

// scope is where a role applies: the organization, or one folder or document of it, with the
// generation the grant is keyed by.
type scope struct{ resourceType, resourceID, generation string }

func (p place) orgScope() scope {
	return scope{resourceOrganization, p.org, p.gens.GetOrganizationGeneration()}
}

// scope is the narrowest resource p names.
func (p place) scope() scope {
	switch {
	case p.doc != "":
		return scope{resourceDocument, p.doc, p.gens.GetDocumentGeneration()}
	case p.folder != "":
		return scope{resourceFolder, p.folder, p.gens.GetFolderGeneration()}
	}
	return p.orgScope()
}

func (s *Server) setRole(ctx context.Context, apiKey string, p place, userID string, at scope, role string, onlyIfAbsent bool) error {
	_, err := s.access.SetRoles(ctx, &accessv1.SetRolesRequest{
		ApiKey: apiKey, OrganizationId: p.org, OrganizationGeneration: p.gens.GetOrganizationGeneration(), UserIds: []string{userID},
		ResourceType: at.resourceType, ResourceId: at.resourceID, ResourceGeneration: at.generation,
		AccessRole: role, OnlyIfAbsent: onlyIfAbsent,
	})
	if err != nil {
		return fmt.Errorf("set %s role on %s %s: %w", role, at.resourceType, at.resourceID, err)
	}
	return nil
}

// roleResult is a user's item: success with msg, or the role failure (whose cause is logged,
// as the caller can do nothing with it but retry).
func (s *Server) roleResult(ctx context.Context, userID, msg string, roleErr error) *usersv1.UserResult {
	if roleErr != nil {
		s.log.ErrorContext(ctx, "users: access role not set", "user_id", userID, "error", roleErr)
		return &usersv1.UserResult{Success: false, Id: userID, Message: msgRoleFailed}
	}
	return &usersv1.UserResult{Success: true, Id: userID, Message: msg}
}

// memberSet returns which of ids are on the organization's contact list.
func (s *Server) memberSet(ctx context.Context, apiKey, org string, ids []string) (map[string]bool, error) {
	members, err := s.store.Members(ctx, apiKey, org, ids, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(members))
	for _, id := range members {
		out[id] = true
	}
	return out, nil
}
