package webhooks

import (
	"context"
	"errors"
	"math"
	"time"
)

var (
	// ErrNotFound is returned for an endpoint, message or delivery that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when a record's id is taken.
	ErrExists = errors.New("already exists")
	// ErrLimit is returned by CreateEndpoint when the tenant has MaxEndpoints already.
	ErrLimit = errors.New("endpoint limit reached")
	// ErrLeaseLost is returned by FinishLeased when the delivery's lease is no longer the one
	// the worker took: it ran out and another worker took it, or a resend changed it.
	ErrLeaseLost = errors.New("lease lost")
	// ErrChanged is SwapSecrets' answer when the endpoint's secrets are no longer those read.
	ErrChanged = errors.New("changed since read")
)

// MaxEndpoints is how many endpoints one tenant (API key) may have: every event is fanned out
// to each of them.
const MaxEndpoints = 100

// Config is a tenant's advanced webhook config; a tenant that never set one has the zero
// Config (defaults in docs/webhooks.md, "Switches").
type Config struct {
	Enabled        bool      `bson:"isEnabled"`
	EncryptData    bool      `bson:"encryptData"`
	EncodeData     bool      `bson:"encodeData"`
	PublicKey      string    `bson:"publicKey"`
	DataProtection bool      `bson:"enableDataProtection"`
	UpdatedAt      time.Time `bson:"updatedAt"`
}

// ConfigPatch sets the fields that are not nil.
type ConfigPatch struct {
	Enabled, EncryptData, EncodeData, DataProtection *bool
	PublicKey                                        *string
}

// BasicConfig is the tenant's basic webhook config: every event also goes to RawURL.
type BasicConfig struct {
	UseWebhookService bool      `bson:"useWebhookService"`
	AuthToken         string    `bson:"authToken"`
	RawURL            string    `bson:"rawNotificationUrl"`
	ProcessedURL      string    `bson:"processedNotificationUrl"`
	Triggers          string    `bson:"triggers"` // JSON object, "" absent
	UpdatedAt         time.Time `bson:"updatedAt"`
}

// BasicConfigPatch sets the fields that are not nil.
type BasicConfigPatch struct {
	UseWebhookService               *bool
	AuthToken, RawURL, ProcessedURL *string
	Triggers                        *string
}

// Secret is one signing secret of an endpoint. The current one has a zero ExpiresAt; after a
// rotation the previous one signs beside it until it expires.
type Secret struct {
	Value     string    `bson:"value"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// Endpoint is a webhook endpoint of a tenant. Nil pointers and slices are unset optionals.
type Endpoint struct {
	APIKey      string   `bson:"apiKey"`
	ID          string   `bson:"id"`
	WorkspaceID string   `bson:"workspaceId"`
	URL         string   `bson:"url"`
	Description *string  `bson:"description,omitempty"`
	FilterTypes []string `bson:"filterTypes,omitempty"` // nil: every type
	Channels    []string `bson:"channels,omitempty"`    // nil: every channel
	Disabled    bool     `bson:"disabled"`
	// DisabledReason says why the service disabled it (410, failing for 5 days); "" when the
	// tenant did, or when it is enabled.
	DisabledReason string            `bson:"disabledReason"`
	RateLimit      *int              `bson:"rateLimit,omitempty"`
	UID            *string           `bson:"uid,omitempty"`
	Metadata       map[string]string `bson:"metadata,omitempty"`
	Secrets        []Secret          `bson:"secrets"`
	// FailingSince is when its current run of failures began; zero while it succeeds.
	FailingSince time.Time `bson:"failingSince"`
	CreatedAt    time.Time `bson:"createdAt"`
	UpdatedAt    time.Time `bson:"updatedAt"`
}

// EndpointPatch sets the fields that are set (FilterTypes/Channels/Metadata when non-nil, an
// empty one unsetting it) and unsets those Clear names; it leaves the others as they are.
type EndpointPatch struct {
	URL         *string
	Description *string
	FilterTypes []string
	Channels    []string
	Disabled    *bool
	RateLimit   *int
	UID         *string
	Metadata    map[string]string
	// Clear unsets optional fields (an API null), which a nil above cannot say. A field both
	// set and cleared is cleared (the server refuses such a request). See docs/webhooks.md,
	// "Clearing endpoint fields".
	Clear EndpointFields
}

// EndpointFields names the optional fields of an endpoint, those that can be unset.
type EndpointFields struct {
	Description, FilterTypes, Channels, RateLimit, UID, Metadata bool
}

// Message is one event as sent to a tenant's endpoints.
type Message struct {
	APIKey    string    `bson:"apiKey"`
	ID        string    `bson:"id"`
	EventType string    `bson:"eventType"`
	Channel   string    `bson:"channel"`
	Payload   string    `bson:"payload"` // JSON, before encoding or encryption
	CreatedAt time.Time `bson:"createdAt"`
}

// Delivery states.
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailed  = "failed"
)

// Delivery is one message to one endpoint: its id is fixed by both (DeliveryID), so fanning a
// message out twice queues it once.
type Delivery struct {
	ID     string `bson:"_id"`
	APIKey string `bson:"apiKey"`
	// WorkspaceID is the workspace of the API key: the tenant the engine shares its workers
	// between (docs/webhooks.md, "Workers and fairness"). "" on deliveries queued before it was
	// kept, which share one turn.
	WorkspaceID string    `bson:"workspaceId"`
	MessageID   string    `bson:"messageId"`
	EndpointID  string    `bson:"endpointId"`
	State       string    `bson:"state"`
	Attempts    int       `bson:"attempts"`
	NextAttempt time.Time `bson:"next"`
	// LeaseUntil: the worker that claimed it sends it until then; after that another may.
	LeaseUntil time.Time `bson:"leaseUntil"`
	CreatedAt  time.Time `bson:"createdAt"`
	UpdatedAt  time.Time `bson:"updatedAt"`
}

// DeliveryID is the id of the delivery of a message to an endpoint.
func DeliveryID(apiKey, messageID, endpointID string) string {
	return apiKey + "\x1f" + messageID + "\x1f" + endpointID
}

// Room bounds what DueDeliveries returns to what the caller can send now: at most
// Endpoints[id] deliveries of an endpoint and Workspaces[id] of a workspace (0: none of them),
// and PerEndpoint and PerWorkspace of the others (0: no bound). A full workspace or endpoint
// is passed over, so that a deep backlog does not fill the answer.
type Room struct {
	Endpoints, Workspaces     map[string]int // by endpoint id, by workspace id
	PerEndpoint, PerWorkspace int
}

func (r Room) endpoint(id string) int { return roomOf(r.Endpoints, id, r.PerEndpoint) }

func (r Room) workspace(id string) int { return roomOf(r.Workspaces, id, r.PerWorkspace) }

func roomOf(m map[string]int, id string, per int) int {
	if n, ok := m[id]; ok {
		return max(n, 0)
	}
	if per > 0 {
		return per
	}
	return math.MaxInt
}

// Ref names a tenant's endpoint or message: its API key and id.
type Ref struct{ APIKey, ID string }

// Outcome is what a worker records after an attempt: the attempt (nil when none was made:
// the message waits for a rate slot or the store) and, when Finish, the delivery's new state,
// written only while its lease is still LeaseUntil.
type Outcome struct {
	Attempt    *Attempt
	Finish     bool
	DeliveryID string
	LeaseUntil time.Time
	State      string
	Attempts   int
	Next       time.Time
}

// Attempt is one try of a delivery.
type Attempt struct {
	APIKey     string    `bson:"apiKey"`
	ID         string    `bson:"id"`
	MessageID  string    `bson:"messageId"`
	EndpointID string    `bson:"endpointId"`
	StatusCode int       `bson:"statusCode"`
	Response   string    `bson:"response"` // the first KiB of the answer, or the error
	DurationMs float64   `bson:"durationMs"`
	Status     string    `bson:"status"` // success, pending (will be retried), failed
	Timestamp  time.Time `bson:"ts"`
}

// AttemptFilter selects attempts; empty fields match all.
type AttemptFilter struct {
	MessageID, EndpointID, Status string
}

// Store keeps configs, endpoints, messages, deliveries and attempts. Tenant methods take the
// API key; the delivery queue's work across tenants. Every write is a single-document
// operation (or an idempotent batch of them), so it runs on any MongoDB-wire server without
// transactions. Listings page by id order with an exclusive "after" id; ids of endpoints,
// messages and attempts are generated in increasing order (time first), so id order is age
// order.
type Store interface {
	Config(ctx context.Context, apiKey string) (*Config, error) // zero Config when never set
	UpdateConfig(ctx context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error)
	BasicConfig(ctx context.Context, apiKey string) (*BasicConfig, error) // zero when never set
	UpdateBasicConfig(ctx context.Context, apiKey string, p BasicConfigPatch, now time.Time) (*BasicConfig, error)

	// CreateEndpoint stores a new endpoint (ErrExists for a taken id), or returns ErrLimit when
	// the tenant has MaxEndpoints: under concurrent creations too, on any MongoDB-wire server.
	CreateEndpoint(ctx context.Context, e *Endpoint) error
	// Endpoint returns one endpoint, or ErrNotFound.
	Endpoint(ctx context.Context, apiKey, id string) (*Endpoint, error)
	// UpdateEndpoint applies the patch and returns the endpoint after it, or ErrNotFound.
	// Enabling an endpoint (Disabled false) clears DisabledReason and FailingSince.
	UpdateEndpoint(ctx context.Context, apiKey, id string, p EndpointPatch, now time.Time) (*Endpoint, error)
	// DeleteEndpoint removes it and its pending deliveries, or returns ErrNotFound.
	DeleteEndpoint(ctx context.Context, apiKey, id string) error
	// ListEndpoints returns up to limit endpoints with ids after `after` ("" from the first),
	// ascending (the oldest first).
	ListEndpoints(ctx context.Context, apiKey, after string, limit int) ([]*Endpoint, error)
	// Endpoints returns every endpoint of the tenant (the fan-out; tenants have tens). What it
	// and EndpointsByRef return is read-only: the memory store shares its own records (no copy
	// per delivery), so a caller must not change them.
	Endpoints(ctx context.Context, apiKey string) ([]*Endpoint, error)
	// EndpointsByRef returns the endpoints that exist of those named, by reference.
	EndpointsByRef(ctx context.Context, refs []Ref) (map[Ref]*Endpoint, error)
	// SwapSecrets replaces the endpoint's secrets with secrets if they are still old (the
	// secrets the caller read), or returns ErrChanged: two rotations at once must not both be
	// told their secret is current while one overwrites the other.
	SwapSecrets(ctx context.Context, apiKey, id string, old, secrets []Secret, now time.Time) error
	// SetSecrets replaces the endpoint's secrets.
	SetSecrets(ctx context.Context, apiKey, id string, secrets []Secret, now time.Time) error
	// SetFailing records the start of a run of failures (only when none is recorded); ClearFailing
	// ends it.
	SetFailing(ctx context.Context, apiKey, id string, since time.Time) error
	ClearFailing(ctx context.Context, apiKey, id string) error
	// DisableEndpoint disables it with the reason.
	DisableEndpoint(ctx context.Context, apiKey, id, reason string, now time.Time) error

	// AddMessage stores a message (ErrExists when its id is taken: a repeated event).
	AddMessage(ctx context.Context, m *Message) error
	// Message returns one message, or ErrNotFound.
	Message(ctx context.Context, apiKey, id string) (*Message, error)
	// Messages returns the messages that exist of those named, by reference.
	Messages(ctx context.Context, refs []Ref) (map[Ref]*Message, error)
	// ListMessages returns up to limit messages after `after`, newest first ("" from the newest),
	// of the event types (all when nil), and when endpointID is set only those queued to it.
	ListMessages(ctx context.Context, apiKey, endpointID string, types []string, after string, limit int) ([]*Message, error)

	// QueueDeliveries stores deliveries that are not there yet (by ID).
	QueueDeliveries(ctx context.Context, ds []*Delivery) error
	// Delivery returns one delivery, or ErrNotFound.
	Delivery(ctx context.Context, id string) (*Delivery, error)
	// DueDeliveries returns up to limit pending deliveries whose next attempt and lease are not
	// after now, oldest next attempt first, within room. It may return fewer than limit while
	// more are due (those past their room).
	DueDeliveries(ctx context.Context, now time.Time, limit int, room Room) ([]*Delivery, error)
	// ClaimDelivery leases a due pending delivery until `until`; false when another has it.
	ClaimDelivery(ctx context.Context, id string, now, until time.Time) (bool, error)
	// ClaimDeliveries is ClaimDelivery for many at once: it returns the ids it leased (those
	// another worker has, or that are no longer due, are left out), each one leased by one
	// caller only, under concurrent claims too.
	ClaimDeliveries(ctx context.Context, ids []string, now, until time.Time) ([]string, error)
	// FinishDelivery records an attempt's outcome (success; pending again at next; failed) and
	// releases the lease.
	FinishDelivery(ctx context.Context, id, state string, attempts int, next, now time.Time) error
	// FinishLeased is FinishDelivery for the worker that claimed the delivery until leaseUntil:
	// it writes only while the delivery's lease is still that one, else ErrLeaseLost (nothing
	// written), so a worker that outlived its lease never overwrites another's outcome.
	FinishLeased(ctx context.Context, id string, leaseUntil time.Time, state string, attempts int, next, now time.Time) error
	// Requeue makes deliveries pending again, due now, with their attempts reset (a leased one
	// after its lease, which it moves on by a millisecond so the worker sending it cannot finish
	// it over the requeue): the one of
	// (message, endpoint) (resend), or every failed one of an endpoint whose message was created
	// in [since, until) (recover). It reports how many.
	Requeue(ctx context.Context, ids []string, now time.Time) (int, error)
	FailedDeliveries(ctx context.Context, apiKey, endpointID string, since, until time.Time) ([]string, error)

	// RecordOutcomes records the outcomes of many attempts: every attempt, then every finish
	// (FinishLeased's, at now), and returns how many finishes were not written because their
	// lease was lost or their delivery is gone. An outcome written is never lost to a concurrent
	// claim, finish or requeue.
	RecordOutcomes(ctx context.Context, outs []Outcome, now time.Time) (lost int, err error)

	// AddAttempt records an attempt; ListAttempts returns up to limit of them, newest first,
	// after `after`.
	AddAttempt(ctx context.Context, a *Attempt) error
	ListAttempts(ctx context.Context, apiKey string, f AttemptFilter, after string, limit int) ([]*Attempt, error)

	// TakeSlot counts a delivery to the endpoint within the given second and reports whether it
	// stays within limit: the rate limit shared by every worker of every process.
	TakeSlot(ctx context.Context, endpointKey string, second int64, limit int) (bool, error)

	// Prune removes messages, finished deliveries and attempts created before the time
	// (retention); pending deliveries stay.
	Prune(ctx context.Context, before time.Time) error

	Ping(ctx context.Context) error
}
