package comments

import (
	"context"
	"errors"

	"github.com/collab/collab/internal/lifecycle"
)

var (
	// ErrNotFound is returned for an annotation that does not exist (in the generations asked).
	ErrNotFound = errors.New("not found")
	// ErrExists is returned by Insert for an annotation id taken in its organization.
	ErrExists = errors.New("exists")
	// ErrConflict is returned by Swap when the annotation changed since it was read.
	ErrConflict = errors.New("conflict")
	// ErrFull is returned by Insert when the document holds the most annotations it may.
	ErrFull = errors.New("full")
)

// User is a commenter, a mentioned user or an assignee.
type User struct {
	UserID string `bson:"userId"`
	Name   string `bson:"name,omitempty"`
	Email  string `bson:"email,omitempty"`
}

// Location is where in the document a thread sits.
type Location struct {
	ID   string `bson:"id,omitempty"`
	Name string `bson:"name,omitempty"`
}

// Status is a thread's status; Type is default, ongoing or terminal.
type Status struct {
	ID   string `bson:"id"`
	Name string `bson:"name"`
	Type string `bson:"type"`
}

// Priority is a thread's priority.
type Priority struct {
	ID   string `bson:"id"`
	Name string `bson:"name"`
}

// Mention is a user tagged in a comment.
type Mention struct {
	UserID  string `bson:"userId"`
	Contact User   `bson:"contact"`
	Text    string `bson:"text,omitempty"`
}

// Reaction is an emoji and the users who reacted with it, in the order they did.
type Reaction struct {
	Emoji   string   `bson:"emoji"`
	UserIDs []string `bson:"userIds"`
}

// Comment is one comment of a thread. Times are Unix milliseconds.
type Comment struct {
	ID          int64      `bson:"id"`
	Text        string     `bson:"text,omitempty"`
	HTML        string     `bson:"html,omitempty"`
	From        User       `bson:"from"`
	Mentions    []Mention  `bson:"mentions,omitempty"`
	Reactions   []Reaction `bson:"reactions,omitempty"`
	CreatedAt   int64      `bson:"createdAt"`
	LastUpdated int64      `bson:"lastUpdated"`
}

// Ref names a document as the documents service knows it now: its tenant (API key),
// organization and id, and the generations (collab.lifecycle.v1) records are filed under.
type Ref struct {
	APIKey         string `bson:"apiKey"`
	OrganizationID string `bson:"organizationId"`
	OrgGen         string `bson:"orgGen"`
	DocumentID     string `bson:"documentId"`
	DocGen         string `bson:"docGen"`
}

// Annotation is a comment thread. Every change of a thread is one compare-and-swap of its
// record (Swap, on Version), so concurrent writers on any number of processes never lose each
// other's changes and need no transaction (docs/comments.md, "Storage").
type Annotation struct {
	Ref `bson:",inline"`
	ID  string `bson:"id"`

	Location   *Location `bson:"location,omitempty"`
	Context    string    `bson:"context,omitempty"` // JSON object
	From       User      `bson:"from"`
	Status     Status    `bson:"status"`
	Priority   *Priority `bson:"priority,omitempty"`
	AssignedTo *User     `bson:"assignedTo,omitempty"`
	ResolvedBy string    `bson:"resolvedBy,omitempty"`
	// Comments, oldest first.
	Comments []Comment `bson:"comments"`
	// LastCommentID is the highest comment id the thread ever held: generated ids follow it,
	// so a deleted comment's id is never given again.
	LastCommentID int64 `bson:"lastCommentId"`
	// Authors are the user ids of the thread's author and its comments' (the userIds filter).
	Authors []string `bson:"authors,omitempty"`
	// ReadBy are the users who have read the thread since it last changed (MarkRead): a change
	// (Swap) empties it but for its author.
	ReadBy []string `bson:"readBy,omitempty"`
	// Bytes is the size of the thread's content, held under MaxThreadBytes.
	Bytes       int   `bson:"bytes"`
	Version     int64 `bson:"version"`
	CreatedAt   int64 `bson:"createdAt"`
	LastUpdated int64 `bson:"lastUpdated"`
}

// Position is where a listing stopped: the sort key of the last annotation returned.
type Position struct {
	LastUpdated int64
	ID          string
}

// Filter selects annotations of one organization; empty fields and nil slices match
// everything, a slice matches any of its values.
type Filter struct {
	// Documents: at least one, each with its current generation.
	Documents   []Ref
	IDs         []string
	LocationIDs []string
	UserIDs     []string
	StatusIDs   []string
	// UpdatedAfter and UpdatedBefore bound LastUpdated strictly; zero: no bound.
	UpdatedAfter, UpdatedBefore int64
}

// Change is one change of a document's threads in its feed, what the live stream sends
// (docs/comments.md, "Live stream").
type Change struct {
	// Seq is the change's number in the document's feed, from 1, in the order appended.
	Seq          int64  `bson:"seq"`
	Type         string `bson:"type"`
	AnnotationID string `bson:"annotationId"`
	// Data is the event's JSON: its type, the annotation after the change (before it, for a
	// deletion), and the comment's id for comment events.
	Data string `bson:"data"`
	// Access is the thread's context.access as JSON, "" when it has none: the stream shows the
	// change only to users it grants.
	Access string `bson:"access,omitempty"`
	At     int64  `bson:"at"`
}

// FeedWindow is how many of a document's latest changes its feed keeps: a stream resumed with
// a Last-Event-ID older than that is told to read the threads again.
const FeedWindow = 1000

// Store keeps comment annotations and read marks. Annotations are unique by id within their
// tenant, organization and organization generation; they are read under the current
// generations only (Ref). Every write is a single-document operation.
type Store interface {
	// Insert adds the annotation: ErrExists when its id is taken in the organization, ErrFull
	// when its document holds max annotations already (also under concurrent inserts).
	Insert(ctx context.Context, a *Annotation, max int) error
	// Get returns the annotations among ids that exist under the document's generations,
	// keyed by id.
	Get(ctx context.Context, doc Ref, ids []string) (map[string]*Annotation, error)
	// List returns up to limit annotations matching f, ordered by (LastUpdated, ID) ascending,
	// or descending when desc, strictly after `after` when it is not nil. Its cost does not
	// grow with how deep `after` is.
	List(ctx context.Context, f Filter, after *Position, desc bool, limit int) ([]*Annotation, error)
	// Swap replaces the annotation read at version old.Version by next (whose Version is
	// old.Version+1): ErrConflict when it changed meanwhile, ErrNotFound when it is gone.
	Swap(ctx context.Context, old, next *Annotation) error
	// Delete removes the annotation as read (at its Version): ErrConflict when it changed
	// meanwhile, ErrNotFound when it is gone. Its read marks go with it.
	Delete(ctx context.Context, a *Annotation) error
	// DeleteAtLocation removes the document's annotations at the location (by its id, else
	// its name; docID "" for every document of the organization, orgID "" for every
	// organization of the key) and returns them.
	DeleteAtLocation(ctx context.Context, apiKey, orgID, docID string, loc Location) ([]*Annotation, error)
	// Count returns how many annotations each document has (with statusIDs, in those
	// statuses), and with a user, how many of them are not read by the user since they last
	// changed (ReadBy).
	Count(ctx context.Context, docs []Ref, statusIDs []string, userID string) (total, unread []int, err error)
	// MarkRead adds the user to the ReadBy of the document's annotations among ids, without
	// changing them otherwise (their Version stays), and returns the ids it found.
	MarkRead(ctx context.Context, doc Ref, userID string, ids []string) (found []string, err error)

	// AppendChange adds a change to the document's feed and returns its Seq: one more than the
	// feed's last (concurrent appends get distinct numbers, by a unique insert). The feed keeps
	// about the last FeedWindow changes.
	AppendChange(ctx context.Context, doc Ref, c Change) (int64, error)
	// Changes returns up to limit changes of the document's feed after seq, oldest first, and
	// the Seqs of the oldest and the newest change the feed holds (0, 0 when it holds none).
	Changes(ctx context.Context, doc Ref, after int64, limit int) (changes []Change, oldest, newest int64, err error)

	// The annotations follow their organization's and document's deletions and migrations by
	// the generations they were written under (lifecycle.MarkedHandlers, lifecycle.Settle).
	lifecycle.Marked

	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
}
