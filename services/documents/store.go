package documents

import (
	"context"
	"errors"
	"time"

	"github.com/collab/collab/internal/lifecycle"
)

// Store errors. Implementations return them (possibly wrapped) so the server can tell the caller
// what happened.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// Store keeps organizations, folders and documents. Every method takes the tenant (API key)
// and, below organizations, the organization: one tenant never reaches another's records, and
// an organization's folders and documents are never reached through another organization.
//
// Listings return records in (CreatedAt, id) order, starting after the position when it is not
// nil, at most limit of them (limit <= 0: all). Positions of deleted records still work, and a
// record created later than the position appears after it, so paging holds under concurrent
// writes. Times are kept with millisecond precision; callers pass them truncated (storeTime) so
// every implementation returns exactly what it was given.
//
// Every write is a single-record atomic operation; deleting an organization is several, ordered
// so that running it again finishes it.
type Store interface {
	// CreateOrganization stores o, or returns ErrExists.
	CreateOrganization(ctx context.Context, o *Organization) error
	// Organization returns the organization, or ErrNotFound.
	Organization(ctx context.Context, apiKey, id string) (*Organization, error)
	// ListOrganizations lists the tenant's organizations; ids, when not empty, keeps only those.
	ListOrganizations(ctx context.Context, apiKey string, ids []string, after *Position, limit int) ([]*Organization, error)
	// RenameOrganization sets the organization's name, or returns ErrNotFound.
	RenameOrganization(ctx context.Context, apiKey, id, name string) error
	// DeleteOrganization removes the given generation of the organization with its folders and
	// documents (those whose OrgGeneration it is): an organization of another generation and
	// its contents stay. Removing what is not there is no error.
	DeleteOrganization(ctx context.Context, apiKey, id, generation string) error

	// CreateFolder stores f, or returns ErrExists. It does not check the parent.
	CreateFolder(ctx context.Context, f *Folder) error
	// ListFolders lists the organization's folders that match filter.
	ListFolders(ctx context.Context, apiKey, orgID string, filter FolderFilter, after *Position, limit int) ([]*Folder, error)
	// UpdateFolder applies the patch and returns the folder after it, or ErrNotFound.
	UpdateFolder(ctx context.Context, apiKey, orgID, id string, patch FolderPatch) (*Folder, error)
	// DeleteFolder removes the given generation of the folder (not its contents). Removing what
	// is not there is no error.
	DeleteFolder(ctx context.Context, apiKey, orgID, id, generation string) error

	// CreateDocument stores d, or returns ErrExists. It does not check the folder.
	CreateDocument(ctx context.Context, d *Document) error
	// ListDocuments lists the organization's documents that match filter.
	ListDocuments(ctx context.Context, apiKey, orgID string, filter DocumentFilter, after *Position, limit int) ([]*Document, error)
	// UpdateDocument applies the patch and returns the document after it, or ErrNotFound.
	UpdateDocument(ctx context.Context, apiKey, orgID, id string, patch DocumentPatch) (*Document, error)
	// DeleteDocuments removes the documents named that exist in the generation named.
	DeleteDocuments(ctx context.Context, apiKey, orgID string, docs []lifecycle.Incarnation) error

	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
}

// storeTime is the precision every store keeps.
func storeTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
