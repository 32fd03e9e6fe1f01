package documents

import "time"

// Organization is one organization of a tenant (API key).
type Organization struct {
	APIKey string `bson:"apiKey"`
	ID     string `bson:"organizationId"`
	// Generation tells this organization from one deleted or created later under the same id
	// (collab.lifecycle.v1); empty for one made before generations.
	Generation string    `bson:"generation"`
	Name       string    `bson:"name"`
	CreatedAt  time.Time `bson:"createdAt"`
}

// Folder is a folder of an organization. Folders nest through ParentID only; ancestors are
// walked at read time, so a move is one write.
type Folder struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	ID             string `bson:"folderId"`
	// Generation is the folder's; OrgGeneration its organization's, so deleting one generation
	// of an organization removes only its own folders.
	Generation    string `bson:"generation"`
	OrgGeneration string `bson:"orgGeneration"`
	Name          string `bson:"name"`
	// ParentID is empty for a folder at the organization's root.
	ParentID string `bson:"parentFolderId"`
	// AccessType is the folder's own access type; empty means inherited (see effective).
	AccessType string    `bson:"accessType"`
	CreatedAt  time.Time `bson:"createdAt"`
}

// Document is a document of an organization.
type Document struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	ID             string `bson:"documentId"`
	// Generation is the document's (kept by a migration); OrgGeneration its organization's.
	Generation    string `bson:"generation"`
	OrgGeneration string `bson:"orgGeneration"`
	Name          string `bson:"name"`
	// FolderID is empty for a document outside any folder.
	FolderID string `bson:"folderId"`
	// AccessType is the document's own access type; empty means inherited from its folder.
	AccessType string    `bson:"accessType"`
	Disabled   bool      `bson:"disabled"`
	CreatedAt  time.Time `bson:"createdAt"`
	// MigrationID marks a document created by a migration, so a redelivered migration can tell
	// its own half-finished copy from a document that was in the way.
	MigrationID string `bson:"migrationId"`
}

// Position is a place in a listing: records are ordered by CreatedAt, then by id.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// FolderFilter narrows a folder listing. Empty fields do not filter.
type FolderFilter struct {
	// IDs keeps only these folders.
	IDs []string
	// ParentIDs keeps only the direct children of these folders ("" is the root).
	ParentIDs []string
}

// DocumentFilter narrows a document listing. Empty fields do not filter.
type DocumentFilter struct {
	// IDs keeps only these documents.
	IDs []string
	// FolderID keeps only the documents directly in this folder.
	FolderID string
}

// FolderPatch changes the fields that are not nil.
type FolderPatch struct {
	Name       *string
	ParentID   *string
	AccessType *string
}

// DocumentPatch changes the fields that are not nil.
type DocumentPatch struct {
	Name       *string
	FolderID   *string
	Disabled   *bool
	AccessType *string
}

func (p FolderPatch) apply(f *Folder) {
	if p.Name != nil {
		f.Name = *p.Name
	}
	if p.ParentID != nil {
		f.ParentID = *p.ParentID
	}
	if p.AccessType != nil {
		f.AccessType = *p.AccessType
	}
}

func (p DocumentPatch) apply(d *Document) {
	if p.Name != nil {
		d.Name = *p.Name
	}
	if p.FolderID != nil {
		d.FolderID = *p.FolderID
	}
	if p.Disabled != nil {
		d.Disabled = *p.Disabled
	}
	if p.AccessType != nil {
		d.AccessType = *p.AccessType
	}
}

// positionBefore reports whether a sorts before b in listing order.
func positionBefore(a, b Position) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

func comparePositions(a, b Position) int {
	switch {
	case positionBefore(a, b):
		return -1
	case positionBefore(b, a):
		return 1
	}
	return 0
}

func (o *Organization) position() Position { return Position{o.CreatedAt, o.ID} }
func (f *Folder) position() Position       { return Position{f.CreatedAt, f.ID} }
func (d *Document) position() Position     { return Position{d.CreatedAt, d.ID} }
