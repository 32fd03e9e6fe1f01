package users

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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

// Messages the caller sees (REFERENCE "Facts for operations in the spec" and the Add Users row).
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
	msgTooManyUsers     = "This organization has more users than Get Users answers at once (at most 50000, within 8 MiB); narrow it with userIds, documentId or organizationUserGroupIds."
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
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{
		ApiKey: c.APIKey, OrganizationId: org, CreateOrganization: req.GetCreateOrganization(),
		FolderId: folder, CreateFolder: req.GetCreateFolder(),
		DocumentId: doc, CreateDocument: req.GetCreateDocument(),
	}); err != nil {
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
	if err := s.store.AddMembers(ctx, c.APIKey, org, ids); err != nil {
		return nil, fmt.Errorf("add users: %w", err)
	}
	if doc != "" {
		if err := s.store.AddDocumentContacts(ctx, c.APIKey, org, doc, ids); err != nil {
			return nil, fmt.Errorf("add users: %w", err)
		}
	}

	scoped := scopeOf(org, doc, folder)
	data := make(map[string]*usersv1.UserResult, len(ids))
	for _, u := range req.GetUsers() {
		// No role given: editor for a newcomer, and an existing role stays as it is.
		role, onlyIfAbsent := u.GetAccessRole(), false
		if role == "" {
			role, onlyIfAbsent = validate.RoleEditor, true
		}
		err := s.setRole(ctx, c.APIKey, org, u.GetUserId(), scope{resourceOrganization, org}, role, onlyIfAbsent)
		if err == nil && scoped.resourceType != resourceOrganization {
			err = s.setRole(ctx, c.APIKey, org, u.GetUserId(), scoped, role, onlyIfAbsent)
		}
		data[u.GetUserId()] = s.roleResult(ctx, u.GetUserId(), msgUserAdded, err)
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
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org}); err != nil {
		return nil, err
	}

	// The filters combine as an intersection, each step narrowing the ids of the one before
	// (nil: not narrowed yet).
	var only []string
	if len(userIDs) > 0 {
		only = userIDs
	}
	if len(groupIDs) > 0 {
		if only, err = s.store.GroupMembers(ctx, c.APIKey, org, groupIDs, only); err != nil {
			return nil, fmt.Errorf("get users: %w", err)
		}
	}
	if doc != "" {
		if only, err = s.store.DocumentContacts(ctx, c.APIKey, org, doc, only); err != nil {
			return nil, fmt.Errorf("get users: %w", err)
		}
	}
	// One more than the cap tells that there are more; the answer must also fit a message.
	members, err := s.store.Members(ctx, c.APIKey, org, only, maxGetUsers+1)
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
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org, FolderId: folder, DocumentId: doc}); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(req.GetUsers()))
	for _, u := range req.GetUsers() {
		ids = append(ids, u.GetUserId())
	}
	members, err := s.memberSet(ctx, c.APIKey, org, ids)
	if err != nil {
		return nil, fmt.Errorf("update users: %w", err)
	}

	target := scopeOf(org, doc, folder)
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
			roleErr = s.setRole(ctx, c.APIKey, org, id, target, role, false)
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
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org, FolderId: folder, DocumentId: doc}); err != nil {
		return nil, err
	}
	members, err := s.store.Members(ctx, c.APIKey, org, ids, 0)
	if err != nil {
		return nil, fmt.Errorf("delete users: %w", err)
	}
	if len(members) > 0 {
		// The event is the only write: every service, this one included (HandleEvent), removes
		// its part when it is delivered, and delivery is retried until each has.
		if _, err := s.events.Publish(ctx, &lifecyclev1.Event{
			Type: eventUsersRemoved, ApiKey: c.APIKey, OrganizationId: org,
			CreatedAt: float64(s.clock.Now().UnixMilli()),
			Payload: &lifecyclev1.Event_UsersRemoved{UsersRemoved: &lifecyclev1.UsersRemoved{
				UserIds: members, DocumentId: doc, FolderId: folder,
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
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org}); err != nil {
		return nil, err
	}
	data := make(map[string]*usersv1.UserResult, len(req.GetOrganizationUserGroups()))
	for _, g := range req.GetOrganizationUserGroups() {
		created, err := s.store.UpsertGroup(ctx, c.APIKey, org, Group{GroupID: g.GetGroupId(), Name: trim(g.GetGroupName())})
		if err != nil {
			return nil, fmt.Errorf("add user groups: %w", err)
		}
		msg := msgGroupUpdated
		if created {
			msg = msgGroupAdded
		}
		data[g.GetGroupId()] = &usersv1.UserResult{Success: true, Id: g.GetGroupId(), Message: msg}
	}
	return &usersv1.UserResultsResponse{Status: statusSuccess, Message: msgGroupsProcessed, Data: data}, nil
}

func (s *Server) AddUsersToGroup(ctx context.Context, req *usersv1.AddUsersToGroupRequest) (*usersv1.UserResultsResponse, error) {
	apiKey, members, ids, err := s.groupRequest(ctx, req.GetOrganizationId(), req.GetOrganizationUserGroupId(), req.GetUserIds())
	if err != nil {
		return nil, err
	}
	org, group := req.GetOrganizationId(), req.GetOrganizationUserGroupId()
	adding := make([]string, 0, len(ids))
	for _, id := range ids {
		if members[id] {
			adding = append(adding, id)
		}
	}
	if err := s.store.AddGroupMembers(ctx, apiKey, org, group, adding); err != nil {
		return nil, fmt.Errorf("add users to group: %w", err)
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
	apiKey, members, ids, err := s.groupRequest(ctx, req.GetOrganizationId(), req.GetOrganizationUserGroupId(), req.GetUserIds())
	if err != nil {
		return nil, err
	}
	org, group := req.GetOrganizationId(), req.GetOrganizationUserGroupId()
	inGroup, err := s.store.GroupMembers(ctx, apiKey, org, []string{group}, ids)
	if err != nil {
		return nil, fmt.Errorf("delete users from group: %w", err)
	}
	if err := s.store.RemoveGroupMembers(ctx, apiKey, org, group, inGroup); err != nil {
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
// group exist, and returns the caller's API key, which of the (de-duplicated) ids are members
// of the organization, and the ids.
func (s *Server) groupRequest(ctx context.Context, org, group string, rawIDs []string) (string, map[string]bool, []string, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	if err := validate.ID("organizationId", org); err != nil {
		return "", nil, nil, err
	}
	if err := validate.ID("organizationUserGroupId", group); err != nil {
		return "", nil, nil, err
	}
	ids, err := validate.IDs("userIds", rawIDs, true, maxUserIDs)
	if err != nil {
		return "", nil, nil, err
	}
	if err := s.ensure(ctx, &documentsv1.EnsureResourcesRequest{ApiKey: c.APIKey, OrganizationId: org}); err != nil {
		return "", nil, nil, err
	}
	if _, err := s.store.Group(ctx, c.APIKey, org, group); errors.Is(err, ErrNotFound) {
		return "", nil, nil, apierr.NotFound(msgGroupMissing)
	} else if err != nil {
		return "", nil, nil, fmt.Errorf("read group: %w", err)
	}
	members, err := s.memberSet(ctx, c.APIKey, org, ids)
	if err != nil {
		return "", nil, nil, fmt.Errorf("read members: %w", err)
	}
	return c.APIKey, members, ids, nil
}

// ---- Calls to other services ----

// ensure asks the documents service for the organization, folder and document (creating them
// when the request says so).
func (s *Server) ensure(ctx context.Context, req *documentsv1.EnsureResourcesRequest) error {
	if _, err := s.docs.EnsureResources(ctx, req); err != nil {
		return apierr.FromPeer("ensure resources", err)
	}
	return nil
}

// scope is where a role applies: the organization, or one folder or document of it.
type scope struct{ resourceType, resourceID string }

func scopeOf(org, doc, folder string) scope {
	switch {
	case doc != "":
		return scope{resourceDocument, doc}
	case folder != "":
		return scope{resourceFolder, folder}
	}
	return scope{resourceOrganization, org}
}

func (s *Server) setRole(ctx context.Context, apiKey, org, userID string, at scope, role string, onlyIfAbsent bool) error {
	_, err := s.access.SetRoles(ctx, &accessv1.SetRolesRequest{
		ApiKey: apiKey, OrganizationId: org, UserIds: []string{userID},
		ResourceType: at.resourceType, ResourceId: at.resourceID,
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
