package users

import (
	"context"
	"errors"
)

// ErrNotFound is returned (possibly wrapped) for a record that does not exist.
var ErrNotFound = errors.New("not found")

// User is a user's identity within one API key. It is shared by every organization of the key;
// membership lives in the contact lists. There is deliberately no admin flag: isAdmin is set
// only by token generation (docs/api.md, "Authentication"), so it is never stored here.
type User struct {
	UserID   string `bson:"userId"`
	Name     string `bson:"name"`
	Email    string `bson:"email"`
	PhotoURL string `bson:"photoUrl"`
}

// UserPatch changes the identity fields that are not nil.
type UserPatch struct {
	UserID   string
	Name     *string
	Email    *string
	PhotoURL *string
}

// Group is an organization user group.
type Group struct {
	GroupID string `bson:"groupId"`
	Name    string `bson:"groupName"`
}

// Store keeps user identities, contact lists and groups. Every method takes the tenant (API
// key) and, except for identities, the organization, so one tenant never reaches another's
// records.
//
// Methods that take "only []string" filter by user id: nil means every user, an empty non-nil
// slice matches nobody. They return user ids sorted ascending, never nil. Writes are
// idempotent: adding what is there or removing what is not is no error.
type Store interface {
	// UpsertUser creates the identity of patch.UserID when missing and sets the fields the
	// patch holds; fields it does not hold keep their value (empty for a new user).
	UpsertUser(ctx context.Context, apiKey string, patch UserPatch) error
	// Users returns the identities among userIDs that exist, sorted by user id.
	Users(ctx context.Context, apiKey string, userIDs []string) ([]*User, error)

	// AddMembers puts the users on the organization's contact list.
	AddMembers(ctx context.Context, apiKey, orgID string, userIDs []string) error
	// Members returns the members of the organization among only: the first limit of them by
	// user id (limit <= 0: all).
	Members(ctx context.Context, apiKey, orgID string, only []string, limit int) ([]string, error)
	// MembersAfter pages through the organization's members: the first limit of them (limit
	// > 0) whose user ids sort after after (byte order; "" starts from the first), by user id.
	// It seeks to after rather than reading the members before it, so paging through a large
	// contact list costs each page its own size.
	MembersAfter(ctx context.Context, apiKey, orgID, after string, limit int) ([]string, error)
	// CountMembers counts the organization's members.
	CountMembers(ctx context.Context, apiKey, orgID string) (int, error)
	// RemoveUsers takes the users off the organization's contact list, every document contact
	// list of the organization and every group of it.
	RemoveUsers(ctx context.Context, apiKey, orgID string, userIDs []string) error

	// AddDocumentContacts puts the users on the document's contact list.
	AddDocumentContacts(ctx context.Context, apiKey, orgID, documentID string, userIDs []string) error
	// DocumentContacts returns the users on the document's contact list among only.
	DocumentContacts(ctx context.Context, apiKey, orgID, documentID string, only []string) ([]string, error)
	// RemoveDocumentContacts takes the users off the document's contact list.
	RemoveDocumentContacts(ctx context.Context, apiKey, orgID, documentID string, userIDs []string) error
	// DeleteDocuments drops the contact lists of the documents.
	DeleteDocuments(ctx context.Context, apiKey, orgID string, documentIDs []string) error
	// MoveDocument moves the contact list of from to to, merging with what to has. Run again
	// after a partial run, it finishes the move.
	MoveDocument(ctx context.Context, apiKey, orgID, from, to string) error

	// UpsertGroup creates the group or, when it exists, renames it; an empty name keeps the
	// current one. created reports whether it was new.
	UpsertGroup(ctx context.Context, apiKey, orgID string, g Group) (created bool, err error)
	// Group returns the group, or ErrNotFound.
	Group(ctx context.Context, apiKey, orgID, groupID string) (*Group, error)
	// AddGroupMembers puts the users in the group.
	AddGroupMembers(ctx context.Context, apiKey, orgID, groupID string, userIDs []string) error
	// RemoveGroupMembers takes the users out of the group.
	RemoveGroupMembers(ctx context.Context, apiKey, orgID, groupID string, userIDs []string) error
	// GroupMembers returns the users among only who are in at least one of the groups.
	GroupMembers(ctx context.Context, apiKey, orgID string, groupIDs, only []string) ([]string, error)

	// DeleteOrganization drops every contact list and group of the organization. Identities
	// stay: they belong to the API key.
	DeleteOrganization(ctx context.Context, apiKey, orgID string) error

	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
}
