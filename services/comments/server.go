package comments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
	"github.com/collab/collab/internal/wakeup"
)

const statusSuccess = "success"

// Messages the caller sees (docs/comments.md, "Operations").
const (
	msgAnnotationsAdded   = "Comment annotation(s) added successfully."
	msgAnnotationsFetched = "Annotations fetched successfully."
	msgAnnotationsUpdated = "Comment annotation(s) updated successfully."
	msgAnnotationsDeleted = "Comment annotation(s) deleted successfully."
	msgAnnotationsCounted = "Comment annotations counted successfully."
	msgCommentsAdded      = "Comment(s) added successfully."
	msgCommentsFetched    = "Comments fetched successfully."
	msgCommentsUpdated    = "Comment updated successfully."
	msgCommentsDeleted    = "Comment(s) deleted successfully."
	msgReactionAdded      = "Reaction added successfully."
	msgReactionDeleted    = "Reaction deleted successfully."
	msgMarkedRead         = "Comment annotation(s) marked as read."

	msgItemAdded      = "Comment annotation added."
	msgItemExists     = "A comment annotation with this id already exists."
	msgItemUpdated    = "Comment annotation updated."
	msgItemDeleted    = "Comment annotation deleted."
	msgItemMissing    = "Comment annotation does not exist in this document."
	msgItemRead       = "Marked as read."
	msgCommentMissing = "Comment does not exist in this annotation."
	msgCommentUpdated = "Comment updated."
	msgCommentDeleted = "Comment deleted."
	msgOrgMissing     = "Organization does not exist."
	msgDocMissing     = "Document does not exist."
	msgTooManyThreads = "The document holds the most comment annotations it may (100000)."
	msgThreadFull     = "The comment annotation holds the most comments it may (500) or its content is at its size limit (1 MiB)."
	msgBusy           = "The comment annotation is changing too fast; try again."
	msgReactionNoop   = "Nothing changed: the reaction was already so."
	msgLastComment    = "A comment annotation keeps at least one comment: delete the annotation instead."
	msgCommentIDTaken = "commentId is taken in this annotation."
	msgNoCommentIDs   = "the annotation has held a comment of the largest commentId (2^53-1), so none can be generated."
)

// Publisher stores domain events in the service's outbox.
type Publisher interface {
	PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
}

var (
	_ commentsv1.CommentsServiceServer = (*Server)(nil)
	_ lifecycle.Handler                = (*Server)(nil)
)

// Server implements the comments service.
type Server struct {
	commentsv1.UnimplementedCommentsServiceServer

	store  Store
	docs   documentsv1.DocumentsServiceClient
	access accessv1.AccessServiceClient
	events Publisher
	pages  *cursor.Sealer
	clock  clock.Clock
	log    *slog.Logger
	// bus wakes the live streams of every process when a document's feed grows (feed.go);
	// poll is how often a stream's document reads its feed all the same.
	bus  wakeup.Bus
	poll time.Duration
	// writes are the end users' write budgets (budget.go).
	writes writeBudgets
	// recheck is how often an open stream checks its token and role again.
	recheck time.Duration
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithWakeups sets the bus the live streams are woken on, and how often a document with
// streams reads its feed all the same (the safety poll; default DefaultStreamPoll).
func WithWakeups(bus wakeup.Bus, poll time.Duration) Option {
	return func(s *Server) {
		s.bus = bus
		if poll > 0 {
			s.poll = poll
		}
	}
}

// WithStreamRecheck sets how often an open live stream checks its token and role again
// (default DefaultStreamRecheck).
func WithStreamRecheck(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.recheck = d
		}
	}
}

// New returns a Server on store. docs resolves organizations and documents to their
// generations; access verifies end users' tokens and roles; events publishes the changes;
// secret keys the page tokens.
func New(store Store, docs documentsv1.DocumentsServiceClient, access accessv1.AccessServiceClient, events Publisher, secret []byte, opts ...Option) (*Server, error) {
	if store == nil || docs == nil || access == nil || events == nil {
		return nil, errors.New("comments: a store, documents and access clients and an outbox are required")
	}
	s := &Server{store: store, docs: docs, access: access, events: events, clock: clock.Real(), log: slog.Default(), poll: DefaultStreamPoll, recheck: DefaultStreamRecheck}
	for _, o := range opts {
		o(s)
	}
	key, err := cursor.DeriveKey(secret, "comments.annotations")
	if err != nil {
		return nil, err
	}
	if s.pages, err = cursor.NewSealer(key, s.clock); err != nil {
		return nil, err
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() int64 { return s.clock.Now().UnixMilli() }

// refs resolves documents of an organization to their current generations: NOT_FOUND for an
// unknown organization or document.
func (s *Server) refs(ctx context.Context, apiKey, org string, docs []string) ([]Ref, error) {
	res, err := s.docs.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org, DocumentIds: docs})
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", org, err)
	}
	if !res.GetOrganizationExists() {
		return nil, apierr.NotFound(msgOrgMissing)
	}
	out := make([]Ref, len(docs))
	for i, d := range docs {
		r := res.GetDocuments()[d]
		if !r.GetExists() {
			return nil, apierr.NotFound("Document %s does not exist in organization %s.", d, org)
		}
		out[i] = Ref{APIKey: apiKey, OrganizationID: org, OrgGen: res.GetOrganizationGeneration(), DocumentID: d, DocGen: r.GetGeneration()}
	}
	return out, nil
}

func (s *Server) ref(ctx context.Context, apiKey, org, doc string) (Ref, error) {
	refs, err := s.refs(ctx, apiKey, org, []string{doc})
	if err != nil {
		return Ref{}, err
	}
	return refs[0], nil
}

// settle runs after an annotation was written under the generations (lifecycle.Settle): a
// deletion that came meanwhile sweeps it, and the caller is told what is gone.
func (s *Server) settle(ctx context.Context, r Ref) error {
	switch gone, err := lifecycle.Settle(ctx, s.store, r.APIKey, r.OrganizationID, r.OrgGen, r.DocumentID, r.DocGen); {
	case err != nil:
		return err
	case gone == lifecycle.OrganizationGone:
		return apierr.NotFound(msgOrgMissing)
	case gone == lifecycle.DocumentGone:
		return apierr.NotFound(msgDocMissing)
	}
	return nil
}

// maxSwaps bounds the retries of a change racing other changes of the same thread.
const maxSwaps = 16

// change applies edit to the annotation by compare-and-swap, reading it again when another
// writer came first. edit returns an *itemError for a refusal of this item (nothing written),
// or errNoChange when there is nothing to write. It returns the annotation before and after.
func (s *Server) change(ctx context.Context, r Ref, id string, edit func(a *Annotation) error) (before, after *Annotation, err error) {
	for range maxSwaps {
		got, err := s.store.Get(ctx, r, []string{id})
		if err != nil {
			return nil, nil, fmt.Errorf("read annotation: %w", err)
		}
		old := got[id]
		if old == nil {
			return nil, nil, errMissing
		}
		next := old.clone()
		if err := edit(next); err != nil {
			return old, nil, err
		}
		next.Version = old.Version + 1
		next.LastUpdated = max(s.now(), old.LastUpdated)
		next.Bytes = contentBytes(next)
		if next.Bytes > MaxThreadBytes || len(next.Comments) > MaxCommentsPerThread {
			return old, nil, errFull
		}
		switch err := s.store.Swap(ctx, old, next); {
		case err == nil:
			return old, next, nil
		case errors.Is(err, ErrNotFound):
			return nil, nil, errMissing
		case !errors.Is(err, ErrConflict):
			return nil, nil, fmt.Errorf("write annotation: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, apierr.New(codes.Aborted, msgBusy)
}

// Item refusals of change: each becomes the item's success: false with its message.
var (
	errMissing  = &itemError{msgItemMissing}
	errFull     = &itemError{msgThreadFull}
	errNoChange = &itemError{msgReactionNoop}
)

// itemError is a refusal of one item of a request, answered inside success.
type itemError struct{ msg string }

func (e *itemError) Error() string { return e.msg }

// contentBytes is the size a thread counts against MaxThreadBytes.
func contentBytes(a *Annotation) int {
	n := len(a.Context)
	for _, c := range a.Comments {
		n += len(c.Text) + len(c.HTML) + len(c.From.UserID) + len(c.From.Name) + len(c.From.Email)
		for _, m := range c.Mentions {
			n += len(m.UserID) + len(m.Contact.UserID) + len(m.Contact.Name) + len(m.Contact.Email) + len(m.Text)
		}
		for _, r := range c.Reactions {
			n += len(r.Emoji)
			for _, u := range r.UserIDs {
				n += len(u)
			}
		}
	}
	return n
}
