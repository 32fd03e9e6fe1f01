package access

import (
	"context"
	"errors"
	"time"
)

// Store errors. Implementations return them (possibly wrapped).
var (
	ErrNotFound  = errors.New("not found")
	ErrKeyExists = errors.New("signing key already exists")
)

// Resource types a grant applies to.
const (
	ResourceOrganization = "organization"
	ResourceFolder       = "folder"
	ResourceDocument     = "document"
)

// Grant gives a user a role on an organization, a folder or a document of one organization.
// It is identified by (API key, OrganizationID, ResourceType, ResourceID, UserID): there is at
// most one grant per identity, and writing one replaces the one before. For an organization
// grant ResourceID is the organization id.
type Grant struct {
	OrganizationID string
	ResourceType   string
	ResourceID     string
	UserID         string
	AccessRole     string
	// ExpiresAt is when the grant lapses by itself; zero for a grant that does not.
	ExpiresAt time.Time
}

// Resource names what a grant can be on: a type and an id (for an organization, its id).
type Resource struct {
	Type string
	ID   string
}

// GrantRef names a grant without its role.
type GrantRef struct {
	OrganizationID string
	ResourceType   string
	ResourceID     string
	UserID         string
}

// Ref returns the identity of g.
func (g Grant) Ref() GrantRef {
	return GrantRef{OrganizationID: g.OrganizationID, ResourceType: g.ResourceType, ResourceID: g.ResourceID, UserID: g.UserID}
}

// inEffect reports whether g has not lapsed at now.
func (g Grant) inEffect(now time.Time) bool { return g.ExpiresAt.IsZero() || g.ExpiresAt.After(now) }

// SigningKey is one Ed25519 key pair of the deployment (not of a tenant). The private key is
// kept only sealed (AES-GCM under a key derived from the master secret, its id as additional
// data), so a copy of the database alone cannot sign tokens.
type SigningKey struct {
	// ID is the JWS "kid": one key per rotation period.
	ID        string
	PublicKey []byte
	// SealedPrivateKey is nonce || AES-GCM ciphertext of the 32-byte Ed25519 seed.
	SealedPrivateKey []byte
	// NotBefore and NotAfter bound the rotation period in which the key signs. Tokens it signed
	// expire at most TokenLifetime after NotAfter, so that long it stays in the key set.
	NotBefore time.Time
	NotAfter  time.Time
	CreatedAt time.Time
}

// Store keeps grants, access context fields and signing keys. Every grant and context method
// takes the tenant (API key), and the organization where it has one, so a handler cannot reach
// another tenant's records. Times are kept with millisecond precision in UTC.
//
// Writes are idempotent: writing what is there or deleting what is not is no error. Methods
// that read grants take now and leave out grants that lapsed at or before it, so an expired
// grant is as if it did not exist.
type Store interface {
	// PutGrants creates or replaces the grants.
	PutGrants(ctx context.Context, apiKey string, grants []Grant) error
	// PutGrantsIfAbsent creates the grants that have no grant in effect at now under their
	// identity, and leaves the others untouched.
	PutGrantsIfAbsent(ctx context.Context, apiKey string, grants []Grant, now time.Time) error
	// DeleteGrants deletes the named grants.
	DeleteGrants(ctx context.Context, apiKey string, refs []GrantRef) error
	// Grants returns every grant in effect at now that the users hold in the organization (on
	// the organization, its folders and its documents), in no particular order. It is one
	// query whatever the number of users.
	Grants(ctx context.Context, apiKey, orgID string, userIDs []string, now time.Time) ([]Grant, error)
	// GrantsOn returns the grants in effect at now that the users hold on the named resources
	// of the organization, in no particular order: Grants narrowed to the resources one
	// decision needs (a document, its folder chain and the organization), so a read for
	// thousands of users does not carry their grants on everything else. It is one query
	// whatever the numbers of users and resources.
	GrantsOn(ctx context.Context, apiKey, orgID string, userIDs []string, on []Resource, now time.Time) ([]Grant, error)
	// DeleteResourceGrants deletes every user's grants on the resources of one type.
	DeleteResourceGrants(ctx context.Context, apiKey, orgID, resourceType string, resourceIDs []string) error
	// MoveDocumentGrants moves the grants in effect on document from to document to: a user
	// who holds a grant in effect on to keeps it; every grant on from is gone afterwards. Run
	// again after a partial run, it finishes the move.
	MoveDocumentGrants(ctx context.Context, apiKey, orgID, from, to string, now time.Time) error

	// SetContextFields replaces the user's access context fields in the organization
	// ("field:value" strings, stored as given); an empty list removes them.
	SetContextFields(ctx context.Context, apiKey, orgID, userID string, fields []string) error
	// ContextFields returns the access context fields of those of the users that have some.
	ContextFields(ctx context.Context, apiKey, orgID string, userIDs []string) (map[string][]string, error)

	// RemoveUsers deletes every grant and the context fields of the users in the organization.
	RemoveUsers(ctx context.Context, apiKey, orgID string, userIDs []string) error
	// DeleteOrganization deletes every grant and context field of the organization.
	DeleteOrganization(ctx context.Context, apiKey, orgID string) error

	// InsertSigningKey stores k unless a key with its ID exists, in which case it returns
	// ErrKeyExists and leaves the stored one as it is. Replicas racing to create the key of a
	// period thus converge on the first one stored.
	InsertSigningKey(ctx context.Context, k *SigningKey) error
	// SigningKey returns the key with that ID, or ErrNotFound.
	SigningKey(ctx context.Context, id string) (*SigningKey, error)
	// SigningKeys returns the keys whose NotAfter is after t, by NotBefore then ID.
	SigningKeys(ctx context.Context, notAfterAfter time.Time) ([]*SigningKey, error)

	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
}

// storeTime is the precision every store keeps.
func storeTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}
