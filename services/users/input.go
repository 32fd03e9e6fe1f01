package users

import (
	"fmt"
	"strings"

	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/grpcserver"
	"github.com/collab/collab/internal/validate"
)

// Limits. Every request is checked whole before anything is written or any service is called,
// so a refused request leaves no trace.
const (
	maxUsers       = 100 // users per Add / Update Users
	maxUserIDs     = 100 // userIds per request
	maxGroupFilter = 30  // organizationUserGroupIds of Get Users
	// maxGetUsers bounds the answer of Get Users, which the spec does not page.
	maxGetUsers   = 50000
	maxGroups     = 100 // organizationUserGroups per Add User Groups
	maxNameLength = 200
)

// ListMembers pages: limit 0 means defaultListMembers, at most maxListMembers; a page is cut
// short before its members pass maxListMembersBytes, well inside a gRPC message.
const (
	defaultListMembers  = 1000
	maxListMembers      = 5000
	maxListMembersBytes = grpcserver.MaxMessageBytes - 64<<10
)

// maxMembersAmong bounds the userIds of MembersAmong: more than any request of the
// notifications service names (Set Notification Config: 100).
const maxMembersAmong = 1000

const msgEitherScope = "Provide either documentId or folderId, not both."

// checkScope checks the organization and the optional document or folder.
func checkScope(org, doc, folder string) error {
	if err := validate.ID("organizationId", org); err != nil {
		return err
	}
	if err := validate.OptionalID("documentId", doc); err != nil {
		return err
	}
	if err := validate.OptionalID("folderId", folder); err != nil {
		return err
	}
	if doc != "" && folder != "" {
		return apierr.InvalidArgument(msgEitherScope)
	}
	return nil
}

// checkCount requires 1 to limit items in the list called field.
func checkCount(field, item string, n, limit int) error {
	if n == 0 {
		return apierr.InvalidArgument("%s must contain at least one %s.", field, item)
	}
	if n > limit {
		return apierr.InvalidArgument("%s must contain at most %d %ss.", field, limit, item)
	}
	return nil
}

// checkUserID checks users[i].userId and that no earlier item had it.
func checkUserID(i int, id string, seen map[string]int) error {
	field := fmt.Sprintf("users[%d].userId", i)
	if err := validate.ID(field, id); err != nil {
		return err
	}
	if j, dup := seen[id]; dup {
		return apierr.InvalidArgument("%s repeats users[%d].userId: each user may appear once.", field, j)
	}
	seen[id] = i
	return nil
}

// checkProfile checks the optional fields of users[i]; empty means not given.
func checkProfile(i int, name, email, photoURL, role string) error {
	prefix := fmt.Sprintf("users[%d].", i)
	if err := validate.Name(prefix+"name", strings.TrimSpace(name), maxNameLength); err != nil {
		return err
	}
	if email = strings.TrimSpace(email); email != "" && !validate.IsEmail(email) {
		return apierr.InvalidArgument("%semail must be a valid email address.", prefix)
	}
	if photoURL = strings.TrimSpace(photoURL); photoURL != "" && !validate.IsHTTPURL(photoURL) {
		return apierr.InvalidArgument("%sphotoUrl must be a valid http(s) URL.", prefix)
	}
	return validate.AccessRole(prefix+"accessRole", role, true)
}

// userFields are the fields Add Users' User and Update Users' UserUpdate share.
type userFields interface {
	GetUserId() string
	GetName() string
	GetEmail() string
	GetPhotoUrl() string
	GetAccessRole() string
}

// checkUsers checks the scope and the users of Add Users and Update Users.
func checkUsers[U userFields](org, doc, folder string, users []U) error {
	if err := checkScope(org, doc, folder); err != nil {
		return err
	}
	if err := checkCount("users", "user", len(users), maxUsers); err != nil {
		return err
	}
	seen := map[string]int{}
	for i, u := range users {
		if err := checkUserID(i, u.GetUserId(), seen); err != nil {
			return err
		}
		if err := checkProfile(i, u.GetName(), u.GetEmail(), u.GetPhotoUrl(), u.GetAccessRole()); err != nil {
			return err
		}
	}
	return nil
}

func checkAddGroups(req *usersv1.AddUserGroupsRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	groups := req.GetOrganizationUserGroups()
	if err := checkCount("organizationUserGroups", "group", len(groups), maxGroups); err != nil {
		return err
	}
	seen := map[string]int{}
	for i, g := range groups {
		field := fmt.Sprintf("organizationUserGroups[%d].", i)
		if err := validate.ID(field+"groupId", g.GetGroupId()); err != nil {
			return err
		}
		if j, dup := seen[g.GetGroupId()]; dup {
			return apierr.InvalidArgument("%sgroupId repeats organizationUserGroups[%d].groupId: each group may appear once.", field, j)
		}
		seen[g.GetGroupId()] = i
		if err := validate.Name(field+"groupName", strings.TrimSpace(g.GetGroupName()), maxNameLength); err != nil {
			return err
		}
	}
	return nil
}

func trim(v string) string { return strings.TrimSpace(v) }

// nonEmpty returns a pointer to v, or nil when v is empty (not given).
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// trimPtr returns the trimmed value of an optional field, nil when it was not sent.
func trimPtr(v *string) *string {
	if v == nil {
		return nil
	}
	t := strings.TrimSpace(*v)
	return &t
}
