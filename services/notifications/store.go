package notifications

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound is returned for a notification, delivery or config that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned by AddNotification for an id that is taken in its organization.
	ErrExists = errors.New("already exists")
)

// Config values of each channel (docs/api.md "Notifications").
const (
	All  = "ALL"
	Mine = "MINE"
	None = "NONE"
)

// Config is one user's notification config for one document.
type Config struct {
	Inbox string `bson:"inbox"`
	Email string `bson:"email"`
	Slack string `bson:"slack"`
}

// Scope names an organization and document incarnation: the ids and generations
// (collab.lifecycle.v1) records are filed under. Readers look records up under the current
// generations only, so records a racing writer left under a deleted one are never read.
type Scope struct {
	APIKey         string
	OrganizationID string
	OrgGen         string
	DocumentID     string
	DocGen         string // "" for a document the documents service does not know
}

// User is a recipient or the acting user.
type User struct {
	UserID string `bson:"userId"`
	Name   string `bson:"name"`
	Email  string `bson:"email"`
}

// Notification is one added notification. JSON-valued fields hold JSON text ("" absent);
// timestamps are Unix milliseconds.
type Notification struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	ID             string `bson:"id"`
	DocumentID     string `bson:"documentId"`
	DocGen         string `bson:"docGen"`
	WorkspaceID    string `bson:"workspaceId"`

	ActionUser       User   `bson:"actionUser"`
	HeadlineTemplate string `bson:"headlineTemplate"`
	HeadlineData     string `bson:"headlineData"` // JSON object
	Body             string `bson:"body"`
	Source           string `bson:"source"`
	SourceData       string `bson:"sourceData"`    // JSON object
	ContextAccess    string `bson:"contextAccess"` // JSON object
	ResolverUsed     bool   `bson:"resolverUsed"`
	NotifyUsers      []User `bson:"notifyUsers"` // as named by the caller
	NotifyAll        bool   `bson:"notifyAll"`
	// Incidental: the notification does not involve the users it names (a reply to a comment
	// thread they took part in), so a MINE config leaves it out.
	Incidental   bool `bson:"incidental,omitempty"`
	VerifyAccess bool `bson:"verifyAccess"`
	// Recipients are the resolved user ids, set once the fan-out is done (FannedOut).
	Recipients []string `bson:"recipients"`
	FannedOut  bool     `bson:"fannedOut"`
	Timestamp  int64    `bson:"ts"`
	// Counted: the notification is in the inbox quota's counts (store.go, TakeInbox), which its
	// deletion takes it out of. Notifications stored before the quota existed are not.
	Counted bool `bson:"counted,omitempty"`
}

// InboxEntry is one recipient's reference to a notification, with what is theirs: whether they
// read it. The notification's content is stored once, in the notification; the headline is
// rendered for the reader when read (docs/api.md "Notifications"). DocumentID and Timestamp are
// the notification's, kept here so that an inbox lists and a document's removal finds its
// entries without reading the notifications.
type InboxEntry struct {
	APIKey         string
	OrganizationID string
	OrgGen         string
	UserID         string
	NotificationID string
	DocumentID     string
	Read           bool
	Timestamp      int64
}

// Position is where a listing stopped: the sort key of the last item returned.
type Position struct {
	Timestamp int64
	ID        string // notification id
}

// Listing selects notifications of an organization (under its generation): all of them, a
// document's (DocumentID set), or the named ones (IDs set).
type Listing struct {
	DocumentID string
	IDs        []string
}

// Delivery channels.
const (
	ChannelEmail = "email"
	ChannelSlack = "slack"
)

// Delivery is one message to send: an email to one recipient, or a Slack post for one
// notification. Its id is fixed by what it delivers (notification, recipient, channel), so a
// fan-out that runs twice queues it once.
type Delivery struct {
	ID             string `bson:"_id"`
	APIKey         string `bson:"apiKey"`
	WorkspaceID    string `bson:"workspaceId"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	NotificationID string `bson:"notificationId"`
	DocumentID     string `bson:"documentId"`
	UserID         string `bson:"userId"` // "" for Slack
	Channel        string `bson:"channel"`
	// Email: the recipient's address and name. The mail is rendered from the notification when
	// it is sent, so its content is stored once; Subject, Text and HTML are set only in
	// deliveries queued before that (they are sent as they are). Slack: Text is the message JSON.
	To      string `bson:"to"`
	Name    string `bson:"name"`
	Subject string `bson:"subject"`
	Text    string `bson:"text"`
	HTML    string `bson:"html"`

	// State: pending until sent or given up (failed).
	State       string    `bson:"state"`
	Attempts    int       `bson:"attempts"`
	NextAttempt time.Time `bson:"next"`
	LastError   string    `bson:"lastError"`
	// LeaseUntil: a worker that claimed it sends it until then; after that another may.
	LeaseUntil time.Time `bson:"leaseUntil"`
	CreatedAt  time.Time `bson:"createdAt"`
	SentAt     time.Time `bson:"sentAt"`
}

// Delivery states.
const (
	StatePending = "pending"
	StateSent    = "sent"
	StateFailed  = "failed"
)

// Store keeps configs, notifications, inbox entries and deliveries. Every method takes the
// tenant (API key) and organization (with its generation) except the delivery queue's, which
// works across tenants. Every write is a single-document operation or a batch of them, so it
// runs on any MongoDB-wire server without transactions; batches are idempotent (a repeat writes
// nothing twice).
type Store interface {
	// SetConfigs stores cfg for every (document, user) pair of the scope's organization, where
	// docs are the documents' incarnations (DocumentID, DocGen of each Scope; the organization
	// fields of the first apply to all).
	SetConfigs(ctx context.Context, docs []Scope, userIDs []string, cfg Config) error
	// Configs returns the stored configs of the users for one document incarnation, keyed by
	// user id; users without one are absent.
	Configs(ctx context.Context, doc Scope, userIDs []string) (map[string]Config, error)

	// AddNotification stores a notification, or returns ErrExists when its id is taken in the
	// organization incarnation.
	AddNotification(ctx context.Context, n *Notification) error
	// Notification returns one notification, or ErrNotFound.
	Notification(ctx context.Context, org Scope, id string) (*Notification, error)
	// Notifications returns notifications by id (those that exist), keyed by id.
	Notifications(ctx context.Context, org Scope, ids []string) (map[string]*Notification, error)
	// ListNotifications returns up to limit notifications of the organization matching l,
	// ordered by (Timestamp, ID), descending when desc, strictly after `after` when set. Cost
	// does not grow with depth.
	ListNotifications(ctx context.Context, org Scope, l Listing, after *Position, desc bool, limit int) ([]*Notification, error)
	// FinishFanOut records the resolved recipients and marks the fan-out done.
	FinishFanOut(ctx context.Context, org Scope, id string, recipients []string) error
	// DeleteNotifications removes notifications by id with their inbox entries and pending
	// deliveries; deleted names those that existed.
	DeleteNotifications(ctx context.Context, org Scope, ids []string) (deleted []string, err error)

	// AddInboxEntries stores entries; an entry that exists (same user and notification) is left
	// as it is.
	AddInboxEntries(ctx context.Context, entries []*InboxEntry) error
	// Inbox returns up to limit of a user's entries in the organization, ordered like
	// ListNotifications.
	Inbox(ctx context.Context, org Scope, userID string, after *Position, desc bool, limit int) ([]*InboxEntry, error)
	// InboxEntries returns the entries of the notifications for userID (those that exist),
	// keyed by notification id.
	InboxEntries(ctx context.Context, org Scope, userID string, notificationIDs []string) (map[string]*InboxEntry, error)
	// ReadBy returns, per notification id, the users who have read it.
	ReadBy(ctx context.Context, org Scope, notificationIDs []string) (map[string][]string, error)
	// SetRead marks the users' entries of a notification read or unread; users without an entry
	// are skipped. It reports how many entries it changed or found already so.
	SetRead(ctx context.Context, org Scope, notificationID string, userIDs []string, read bool) (int, error)

	// DeleteOrganization removes every record of the organization incarnation (configs of it,
	// notifications, inbox entries, pending deliveries).
	DeleteOrganization(ctx context.Context, org Scope) error
	// DeleteDocument removes every record of the document incarnation.
	DeleteDocument(ctx context.Context, doc Scope) error
	// MoveDocument gives the records of document incarnation doc the id to. Idempotent.
	MoveDocument(ctx context.Context, doc Scope, to string) error
	// RemoveUsers removes the users' configs, inbox entries and unsent deliveries in the
	// organization, or only those about the document when doc.DocumentID is set.
	RemoveUsers(ctx context.Context, scope Scope, userIDs []string) error

	// QueueDeliveries stores deliveries that are not there yet (by ID).
	QueueDeliveries(ctx context.Context, ds []*Delivery) error
	// DueDeliveries returns up to limit pending deliveries whose next attempt and lease are not
	// after now, oldest first.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]*Delivery, error)
	// ClaimDelivery leases a due pending delivery until `until`; false when it is not pending,
	// not due, or leased by another.
	ClaimDelivery(ctx context.Context, id string, now, until time.Time) (bool, error)
	// FinishDelivery records an attempt's outcome: sent, retried at d.NextAttempt (pending),
	// or failed for good; it releases the lease.
	FinishDelivery(ctx context.Context, id, state string, attempts int, next time.Time, lastErr string, now time.Time) error
	// Delivery returns one delivery, or ErrNotFound.
	Delivery(ctx context.Context, id string) (*Delivery, error)
	// Deliveries returns a notification's deliveries (tests, operators).
	Deliveries(ctx context.Context, apiKey, notificationID string) ([]*Delivery, error)
	// PruneDeliveries removes the sent and failed deliveries created before `before` and
	// returns how many went; pending ones stay whatever their age.
	PruneDeliveries(ctx context.Context, before time.Time) (int64, error)

	// TakeRecipients adds n to the recipients the workspace's notifications reach in minute (a
	// Unix minute), unless the total would pass limit: then it adds nothing and reports false.
	TakeRecipients(ctx context.Context, workspaceID string, minute int64, n, limit int) (bool, error)
	// ReturnRecipients takes n back off the minute's total (a notification taken for and then not
	// added).
	ReturnRecipients(ctx context.Context, workspaceID string, minute int64, n int) error
	// TakeInbox counts one more notification in the inboxes it reaches in the organization
	// incarnation: everyone's when all, else the users'. A user's count is the organization's
	// notifications to everyone plus those naming the user. When that would put a count past
	// limit it counts nothing and returns the inbox that is full.
	TakeInbox(ctx context.Context, org Scope, all bool, userIDs []string, limit int) (*InboxFull, error)
	// ReturnInbox takes back what TakeInbox counted (a notification taken for and then not
	// added). DeleteNotifications and DeleteDocument take back the count of each notification
	// they delete, DeleteOrganization every count of the organization.
	ReturnInbox(ctx context.Context, org Scope, all bool, userIDs []string) error
	// InboxCount returns a user's count in the organization incarnation (see TakeInbox).
	InboxCount(ctx context.Context, org Scope, userID string) (int, error)

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}

// InboxFull names the inbox TakeInbox found full: a user's, or everyone's (UserID "") when the
// organization's notifications to everyone fill every inbox; Count is what it holds.
type InboxFull struct {
	UserID string
	Count  int
}
