package documents

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
)

const statusSuccess = "success"

// Limits. Every request is checked whole before anything is written, so a refused request
// leaves no trace.
const (
	maxItems         = 100  // organizations, folders or documents per add / update
	maxIDs           = 30   // ids per get, delete and access update (docs/api.md, "Documents, folders and organizations")
	maxV1DocumentIDs = 1000 // documentIds of Get Documents v1
	// maxV1Documents bounds the answer of Get Documents v1, which the spec does not page.
	maxV1Documents        = 50000
	maxResolveIDs         = 1000 // folder and document ids of ResolveResources, each
	defaultPageSize       = 1000 // docs/api.md, "Documents, folders and organizations"
	maxPageSize           = 1000
	maxNameLength         = 200 // organization, folder and location names
	maxDocumentNameLength = 500
	// maxFolderDepth bounds nesting, so chain walks (one store query per level) stay cheap.
	maxFolderDepth = 64
)

// Event types this service publishes (Module().Publishes).
const (
	eventOrganizationDeleted = lifecycle.OrganizationDeleted
	eventDocumentsDeleted    = lifecycle.DocumentDeleted
	eventFolderDeleted       = lifecycle.FolderDeleted
	eventDocumentMigrated    = lifecycle.DocumentMigrated
	eventLocationDataDeleted = lifecycle.LocationDataDeleted
)

// Messages the caller sees.
const (
	msgOrgMissing      = "Organization does not exist."
	msgOrgExists       = "Organization already exists."
	msgOrgAdded        = "Organization added."
	msgOrgUpdated      = "Organization updated."
	msgOrgDeleted      = "Organization deleted."
	msgFolderMissing   = "Folder does not exist."
	msgFolderExists    = "Folder already exists."
	msgFolderAdded     = "Folder added."
	msgFolderUpdated   = "Folder updated."
	msgFolderDeleted   = "Folder deleted."
	msgFolderNotEmpty  = "Folder is not empty."
	msgParentMissing   = "Parent folder does not exist."
	msgFolderIntoSelf  = "A folder cannot be moved into itself or its subfolders."
	msgDocumentMissing = "Document does not exist."
	msgDocumentExists  = "Document already exists."
	msgDocumentAdded   = "Document added."
	msgDocumentUpdated = "Document updated."
	msgDocumentDeleted = "Document deleted."
	msgV1TooMany       = "This organization has more documents than Get Documents v1 answers at once (at most 50000, within 8 MiB). Use Get Documents v2 (/v2/organizations/documents/get), which pages."
	msgMigrationAbsent = "Migration not found."
	msgAdvancedQueries = "Advanced queries are not enabled for this workspace. Turn them on with Update Workspace Settings (advancedQueries)."
)

var msgTooDeep = fmt.Sprintf("Folders can be nested at most %d levels deep.", maxFolderDepth)

// Publisher stores an event durably and delivers it to every subscribing service, this one
// first (*outbox.Outbox).
type Publisher interface {
	// Publish stores the event and tries to deliver it before returning.
	Publish(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
	// PublishAsync stores the event and leaves its delivery to the relay.
	PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
	// Get returns an event's record, or outbox.ErrNotFound.
	Get(ctx context.Context, id string) (*outbox.Record, error)
}

var (
	_ documentsv1.DocumentsServiceServer = (*Server)(nil)
	_ lifecycle.Handler                  = (*Server)(nil)
	_ Publisher                          = (*outbox.Outbox)(nil)
	_ Store                              = (*MemoryStore)(nil)
	_ Store                              = (*MongoStore)(nil)
)

// Server implements the documents service and applies lifecycle events to its data.
type Server struct {
	documentsv1.UnimplementedDocumentsServiceServer

	store  Store
	events Publisher
	clock  clock.Clock
	log    *slog.Logger

	orgPages, folderPages, documentPages *cursor.Sealer

	// structure serialises changes of an organization's folder tree (adds and moves) within
	// this process, so two concurrent moves cannot build a cycle between them. Striped rather
	// than per organization, so it never grows. Readers do not rely on it: chain walks stop at
	// a repeated folder and at maxFolderDepth whatever is stored.
	structure [64]sync.Mutex
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server on store. secret keys its page tokens; events carries deletions and
// migrations to every service, this one included.
func New(store Store, secret []byte, events Publisher, opts ...Option) (*Server, error) {
	switch {
	case store == nil:
		return nil, errors.New("documents: a store is required")
	case events == nil:
		return nil, errors.New("documents: an event publisher is required")
	}
	s := &Server{store: store, events: events, clock: clock.Real(), log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	// After the options: page tokens are dated by the injected clock.
	for purpose, sealer := range map[string]**cursor.Sealer{
		"documents.organizations": &s.orgPages,
		"documents.folders":       &s.folderPages,
		"documents.documents":     &s.documentPages,
	} {
		key, err := cursor.DeriveKey(secret, purpose)
		if err != nil {
			return nil, err
		}
		if *sealer, err = cursor.NewSealer(key, s.clock); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() time.Time { return storeTime(s.clock.Now()) }

// lockStructure holds the folder-tree lock of an organization until the returned func runs.
func (s *Server) lockStructure(apiKey, org string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(apiKey + "\x00" + org))
	m := &s.structure[h.Sum32()%uint32(len(s.structure))]
	m.Lock()
	return m.Unlock
}

// requireOrg answers NOT_FOUND unless the tenant has the organization, and returns its
// generation.
func (s *Server) requireOrg(ctx context.Context, apiKey, org string) (string, error) {
	return s.ensureOrg(ctx, apiKey, org, false)
}

// ensureOrg is requireOrg, or with create makes the organization (nameless) when it is missing.
func (s *Server) ensureOrg(ctx context.Context, apiKey, org string, create bool) (string, error) {
	for range 2 {
		o, err := s.store.Organization(ctx, apiKey, org)
		switch {
		case err == nil:
			return o.Generation, nil
		case !errors.Is(err, ErrNotFound):
			return "", fmt.Errorf("read organization: %w", err)
		case !create:
			return "", apierr.NotFound(msgOrgMissing)
		}
		o = &Organization{APIKey: apiKey, ID: org, Generation: lifecycle.NewGeneration(), CreatedAt: s.now()}
		err = s.store.CreateOrganization(ctx, o)
		if err == nil {
			return o.Generation, nil
		}
		if !errors.Is(err, ErrExists) {
			return "", fmt.Errorf("create organization: %w", err)
		}
		// Another request made it meanwhile: that one is as good; read its generation.
	}
	return "", apierr.NotFound(msgOrgMissing)
}

// confirmOrg runs after a request has written folders or documents of the organization's
// generation gen. When that generation was deleted meanwhile, its deletion may have swept the
// organization before these writes landed: the sweep runs again, which removes them, and the
// caller learns that the organization does not exist, as if the deletion had come first. The
// sweep goes after the organization record, so one of the two always sees the other.
func (s *Server) confirmOrg(ctx context.Context, apiKey, org, gen string) error {
	o, err := s.store.Organization(ctx, apiKey, org)
	switch {
	case err == nil && o.Generation == gen:
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("read organization: %w", err)
	}
	if err := s.store.DeleteOrganization(context.WithoutCancel(ctx), apiKey, org, gen); err != nil {
		return fmt.Errorf("remove what was written to a deleted organization: %w", err)
	}
	s.log.InfoContext(ctx, "documents: organization deleted during a write; the write is undone", "organization_id", org)
	return apierr.NotFound(msgOrgMissing)
}

// createRootFolder makes a folder at the root with no access type of its own, for the
// create-folder flags, and returns its generation; one that appeared meanwhile is as good.
func (s *Server) createRootFolder(ctx context.Context, apiKey, org, orgGen, id string) (string, error) {
	f := &Folder{APIKey: apiKey, OrganizationID: org, ID: id, Generation: lifecycle.NewGeneration(), OrgGeneration: orgGen, CreatedAt: s.now()}
	err := s.store.CreateFolder(ctx, f)
	switch {
	case err == nil:
		return f.Generation, nil
	case !errors.Is(err, ErrExists):
		return "", fmt.Errorf("create folder: %w", err)
	}
	found, err := s.foldersByID(ctx, apiKey, org, []string{id})
	if err != nil {
		return "", err
	}
	if found[id] == nil {
		return "", apierr.NotFound(msgFolderMissing)
	}
	return found[id].Generation, nil
}

// event returns a new event of one generation of the tenant's organization.
func (s *Server) event(apiKey, org, orgGen, typ string) *lifecyclev1.Event {
	return &lifecyclev1.Event{Type: typ, ApiKey: apiKey, OrganizationId: org, OrganizationGeneration: orgGen, CreatedAt: float64(s.now().UnixMilli())}
}

func itemResult(id string, ok bool, msg string) *documentsv1.ItemResult {
	return &documentsv1.ItemResult{Success: ok, Id: id, Message: msg}
}
