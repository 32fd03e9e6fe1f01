package activity

import (
	"context"
	"errors"
	"time"

	"github.com/collab/collab/internal/lifecycle"
)

var (
	// ErrNotFound is returned for an activity or config that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrImmutable is returned by Update for a record written while the config was immutable.
	ErrImmutable = errors.New("immutable")
)

// User is who did what an activity reports.
type User struct {
	UserID string `bson:"userId"`
	Name   string `bson:"name"`
	Email  string `bson:"email"`
}

// Record is one activity. JSON-valued fields hold JSON text; "" means absent. Timestamps are
// Unix milliseconds.
type Record struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	ID             string `bson:"id"`
	// The generations (collab.lifecycle.v1) of the organization and document the record was
	// written under; "" when the documents service did not know them.
	OrganizationGeneration string `bson:"orgGen"`
	DocumentID             string `bson:"documentId"`
	DocumentGeneration     string `bson:"docGen"`

	FeatureType                string `bson:"featureType"`
	ActionType                 string `bson:"actionType"`
	ActionUser                 User   `bson:"actionUser"`
	TargetEntityID             string `bson:"targetEntityId"`
	DisplayMessageTemplate     string `bson:"template"`
	DisplayMessageTemplateData string `bson:"templateData"` // JSON object
	Changes                    string `bson:"changes"`      // JSON object
	EntityData                 string `bson:"entityData"`   // any JSON
	EntityTargetData           string `bson:"entityTargetData"`
	ActionIcon                 string `bson:"actionIcon"`
	Immutable                  bool   `bson:"immutable"`
	Timestamp                  int64  `bson:"ts"`
}

// Position is where a listing stopped: the sort key of the last record returned.
type Position struct {
	Timestamp int64
	ID        string
}

// Filter selects records; empty fields and nil slices match everything, and a field set
// matches records whose value equals it (one of the values, for slices).
type Filter struct {
	DocumentID     string
	TargetEntityID string
	UserID         string // actionUser.userId
	FeatureTypes   []string
	ActionTypes    []string
	IDs            []string
}

// Patch sets the updatable fields that are not nil.
type Patch struct {
	Changes                    *string
	EntityData                 *string
	EntityTargetData           *string
	DisplayMessageTemplate     *string
	DisplayMessageTemplateData *string
	ActionIcon                 *string
}

// Config is a tenant's activity service config.
type Config struct {
	Enabled bool `bson:"isEnabled"`
	// Immutable is nil until set.
	Immutable *bool `bson:"immutable,omitempty"`
	// Triggers, feature then action (e.g. "add"), say whether events of that type are recorded;
	// an absent trigger records. Nil until set.
	Triggers  map[string]map[string]bool `bson:"triggers,omitempty"`
	UpdatedAt time.Time                  `bson:"updatedAt"`
}

// ConfigPatch sets the config fields that are not nil; Triggers replaces the triggers whole.
type ConfigPatch struct {
	Enabled   *bool
	Immutable *bool
	Triggers  map[string]map[string]bool
}

// Kinds of buried generations: lifecycle.Settle and MarkedHandlers name them.
const (
	KindOrganization = lifecycle.KindOrganization
	KindDocument     = lifecycle.KindDocument
)

// Store keeps activity records and configs. Records are scoped by tenant (API key) and
// organization and unique by id within them. Every write is a single-document operation, so
// the store runs on any MongoDB-wire server without transactions.
type Store interface {
	// Insert adds the records one by one, skipping any whose id exists in its tenant and
	// organization; existing names the ids skipped. An error may leave the records before the
	// failing one written.
	Insert(ctx context.Context, recs []*Record) (existing []string, err error)
	// List returns up to limit records (limit <= 0: all) of the organization matching f,
	// ordered by (Timestamp, ID) ascending, or descending when desc, starting strictly after
	// `after` when it is not nil. Its cost does not grow with how deep `after` is.
	List(ctx context.Context, apiKey, orgID string, f Filter, after *Position, desc bool, limit int) ([]*Record, error)
	// Get returns the records among ids that exist, keyed by id.
	Get(ctx context.Context, apiKey, orgID string, ids []string) (map[string]*Record, error)
	// Update applies the patch: ErrNotFound when the record does not exist, ErrImmutable when
	// it is immutable (nothing written).
	Update(ctx context.Context, apiKey, orgID, id string, p Patch) error

	// The records follow their organization's and document's deletions and migrations by the
	// generations they were written under (lifecycle.MarkedHandlers, lifecycle.Settle).
	lifecycle.Marked

	// Config returns the tenant's config, or ErrNotFound when it was never set.
	Config(ctx context.Context, apiKey string) (*Config, error)
	// UpdateConfig applies the patch atomically, creating the config when missing (disabled,
	// the rest unset), and returns the config after the write.
	UpdateConfig(ctx context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error)

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
