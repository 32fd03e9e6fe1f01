package notifications

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"

	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/validate"
)

// The comment events that notify (docs/comments.md, "Notifications and activity").
const (
	eventCommentAdd    = "comment.add"
	eventCommentUpdate = "comment.update"
	eventThreadAdd     = "comment_annotation.add"
	eventThreadAssign  = "comment_annotation.assign"
)

var commentEvents = []string{eventCommentAdd, eventCommentUpdate, eventThreadAdd, eventThreadAssign}

// Why a comment notification was sent: its notificationSourceData.reason.
const (
	reasonMention = "mention"
	reasonReply   = "reply"
	reasonAssign  = "assign"
)

const (
	// maxCommentBody is the most of a comment's text a notification's body holds, in
	// characters.
	maxCommentBody = 1000
	// maxThreadComments is the most comments of a new thread whose mentions notify: Add
	// Comment Annotations adds at most 30 with a thread.
	maxThreadComments = 30
	// maxCommentID is the largest comment id (docs/comments.md, "Annotations").
	maxCommentID = 1<<53 - 1
)

// The comments service's event data (docs/comments.md, "Events"), as far as notifications read
// it.
type (
	commentUser struct {
		UserID string `json:"userId"`
		Name   string `json:"name"`
		Email  string `json:"email"`
	}
	commentMention struct {
		UserID  string       `json:"userId"`
		Contact *commentUser `json:"contact"`
	}
	commentItem struct {
		CommentID   float64          `json:"commentId"`
		CommentText string           `json:"commentText"`
		CommentHTML string           `json:"commentHtml"`
		From        commentUser      `json:"from"`
		Mentions    []commentMention `json:"taggedUserContacts"`
	}
	commentThread struct {
		AnnotationID string        `json:"annotationId"`
		From         commentUser   `json:"from"`
		AssignedTo   *commentUser  `json:"assignedTo"`
		Comments     []commentItem `json:"comments"`
	}
	commentData struct {
		Annotation      *commentThread `json:"annotation"`
		Comment         *commentItem   `json:"comment"`
		PreviousComment *commentItem   `json:"previousComment"`
	}
)

// notice is one notification a comment event makes: to whom, on whose act, about which comment
// (its text is the body), and why.
type notice struct {
	reason  string
	key     string // the notification id's suffix, unique among the event's notices
	actor   User
	to      []User
	comment *commentItem
}

// notifyComment sends the notifications of one comment event: to the users a comment mentions
// (comment.add, and comment.update for mentions that are new), to a new assignee
// (comment_annotation.assign, and comment_annotation.add with one), and on a reply to the
// thread's earlier participants; never to the actor. Each goes the way of Add Notifications'
// fan-out, under the recipients' configs and the quotas, with an id derived from the event's:
// a redelivered event sends nothing twice. An event without the comments service's data (a
// product's own comment.add through Publish Event) notifies no one.
func (s *Server) notifyComment(ctx context.Context, e *eventsv1.Event) error {
	d, ok := commentDataOf(e)
	if !ok {
		return nil // not the comments service's data: nothing of ours
	}
	notices := commentNotices(e, d)
	if len(notices) == 0 {
		return nil
	}
	if e.GetWorkspaceId() == "" {
		return lifecycle.Invalid(lifecycle.Domain(e), "workspace")
	}
	access, err := threadAccess(e)
	if err != nil {
		return lifecycle.Invalid(lifecycle.Domain(e), "valid context.access in its annotation: "+err.Error())
	}
	org := Scope{APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), OrgGen: e.GetOrganizationGeneration()}
	doc := org.withDoc(e.GetDocumentId(), e.GetDocumentGeneration())
	for _, nt := range notices {
		n := commentNotification(e, d, nt)
		n.ContextAccess = access
		if err := s.notifyOnce(ctx, org, doc, n); err != nil {
			return fmt.Errorf("notify %s of %s: %w", nt.reason, e.GetType(), err)
		}
	}
	return nil
}

// commentDataOf reads the event's data as the comments service writes it; false for data of
// another shape.
func commentDataOf(e *eventsv1.Event) (*commentData, bool) {
	var d commentData
	raw, err := protojson.Marshal(e.GetData())
	if err != nil || json.Unmarshal(raw, &d) != nil || d.Annotation == nil || d.Annotation.AnnotationID == "" {
		return nil, false
	}
	return &d, true
}

// commentNotices are the notifications an event makes.
func commentNotices(e *eventsv1.Event, d *commentData) []notice {
	a := d.Annotation
	switch e.GetType() {
	case eventCommentAdd:
		if d.Comment == nil {
			return nil
		}
		actor := actorOf(e, d.Comment.From)
		mentioned := mentions(d.Comment)
		out := []notice{{reason: reasonMention, key: reasonMention, actor: actor, to: people(mentioned, actor.UserID), comment: d.Comment}}
		// The thread's author and the authors of the comments before this one: by position
		// (ids may be given out of order), else, for a comment the thread does not hold, by id.
		earlier := []commentUser{a.From}
		at := slices.IndexFunc(a.Comments, func(c commentItem) bool { return c.CommentID == d.Comment.CommentID })
		for i, c := range a.Comments {
			if at >= 0 && i < at || at < 0 && c.CommentID < d.Comment.CommentID {
				earlier = append(earlier, c.From)
			}
		}
		except := append([]string{actor.UserID}, userIDs(people(mentioned))...)
		return append(out, notice{reason: reasonReply, key: reasonReply, actor: actor, to: people(earlier, except...), comment: d.Comment})
	case eventCommentUpdate:
		if d.Comment == nil || d.PreviousComment == nil {
			return nil // without the comment as it was, the new mentions are unknown
		}
		actor := actorOf(e, d.Comment.From)
		except := append([]string{actor.UserID}, userIDs(people(mentions(d.PreviousComment)))...)
		return []notice{{reason: reasonMention, key: reasonMention, actor: actor, to: people(mentions(d.Comment), except...), comment: d.Comment}}
	case eventThreadAdd:
		actor := actorOf(e, a.From) // a backend's add: the author started the thread
		out := assignment(a, actor)
		for i := range a.Comments[:min(len(a.Comments), maxThreadComments)] {
			c := &a.Comments[i]
			if c.CommentID < 1 || c.CommentID > maxCommentID || c.CommentID != math.Trunc(c.CommentID) {
				continue // not the comments service's: its ids are whole numbers, keys of the notices
			}
			author := userOfComment(c.From)
			out = append(out, notice{reason: reasonMention, key: fmt.Sprintf("%s%d", reasonMention, int64(c.CommentID)), actor: author,
				to: people(mentions(c), author.UserID), comment: c})
		}
		return out
	case eventThreadAssign:
		return assignment(a, actionUserOf(e.GetActionUser()))
	}
	return nil
}

// assignment notifies the thread's assignee, unless they assigned themself.
func assignment(a *commentThread, actor User) []notice {
	if a.AssignedTo == nil {
		return nil
	}
	var first *commentItem
	if len(a.Comments) > 0 {
		first = &a.Comments[0]
	}
	return []notice{{reason: reasonAssign, key: reasonAssign, actor: actor, to: people([]commentUser{*a.AssignedTo}, actor.UserID), comment: first}}
}

// actorOf is the event's acting user, else fallback (who wrote what the event is about).
func actorOf(e *eventsv1.Event, fallback commentUser) User {
	if u := actionUserOf(e.GetActionUser()); u.UserID != "" {
		return u
	}
	return userOfComment(fallback)
}

func actionUserOf(u *eventsv1.ActionUser) User {
	return cleanUser(User{UserID: u.GetUserId(), Name: u.GetName(), Email: u.GetEmail()})
}

func userOfComment(u commentUser) User { return cleanUser(User(u)) }

// cleanUser drops a name or an email that Add Notifications would refuse: the event's data
// may be a product's.
func cleanUser(u User) User {
	if validate.Name("name", u.Name, maxNameLength) != nil {
		u.Name = ""
	}
	if u.Email != "" && !validate.IsEmail(u.Email) {
		u.Email = ""
	}
	return u
}

// mentions are the users a comment mentions, with what its contacts say of them.
func mentions(c *commentItem) []commentUser {
	out := make([]commentUser, 0, len(c.Mentions))
	for _, m := range c.Mentions {
		u := commentUser{UserID: m.UserID}
		if m.Contact != nil && (m.Contact.UserID == "" || m.Contact.UserID == m.UserID) {
			u.Name, u.Email = m.Contact.Name, m.Contact.Email
		}
		out = append(out, u)
	}
	return out
}

// people are the users, each once and with a valid id, except those named, and at most
// maxNotifyUsers of them (Add Notifications' bound).
func people(users []commentUser, except ...string) []User {
	var out []User
	for _, u := range users {
		if validate.ID("userId", u.UserID) != nil || slices.Contains(except, u.UserID) ||
			slices.ContainsFunc(out, func(o User) bool { return o.UserID == u.UserID }) {
			continue
		}
		if out = append(out, userOfComment(u)); len(out) == maxNotifyUsers {
			break
		}
	}
	return out
}

func userIDs(us []User) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.UserID
	}
	return out
}

// threadAccess is the JSON of the thread's context.access, which limits who is notified as
// Add Notifications' context does; "" without one.
func threadAccess(e *eventsv1.Event) (string, error) {
	ctxValue := e.GetData().GetFields()["annotation"].GetStructValue().GetFields()["context"]
	access, ok := ctxValue.GetStructValue().GetFields()["access"]
	if !ok {
		return "", nil
	}
	st := access.GetStructValue()
	if st == nil {
		return "", fmt.Errorf("context.access must be an object")
	}
	if err := checkContext(st); err != nil {
		return "", err
	}
	return jsonOf(st, false), nil
}

// commentNotification is the notification of one notice: headline, body (the comment's text,
// cut), notificationSource comment with the thread, the comment and the reason as its data.
func commentNotification(e *eventsv1.Event, d *commentData, nt notice) *Notification {
	sum := sha256.Sum256([]byte(e.GetApiKey() + "\x1f" + e.GetId()))
	source := map[string]any{"annotationId": d.Annotation.AnnotationID, "reason": nt.reason}
	body := ""
	if nt.comment != nil {
		source["commentId"] = nt.comment.CommentID
		body = commentBody(nt.comment)
	}
	st, _ := structpb.NewStruct(source) // strings and a number
	n := &Notification{
		APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), OrgGen: e.GetOrganizationGeneration(),
		ID:         "ntc_" + hex.EncodeToString(sum[:12]) + "_" + nt.key,
		DocumentID: e.GetDocumentId(), DocGen: e.GetDocumentGeneration(), WorkspaceID: e.GetWorkspaceId(),
		ActionUser: nt.actor, HeadlineTemplate: commentHeadline(nt), Body: body,
		Source: "comment", SourceData: jsonOf(st, false), NotifyUsers: nt.to,
		Incidental: nt.reason == reasonReply, Timestamp: int64(e.GetTimestamp()), Counted: true,
	}
	return n
}

// commentHeadline is a notice's headline template; {{actionUser}} is the actor's name, else
// email, else id.
func commentHeadline(nt notice) string {
	switch nt.reason {
	case reasonMention:
		return "{{actionUser}} mentioned you in a comment"
	case reasonReply:
		return "{{actionUser}} replied to a comment thread"
	}
	if nt.actor.UserID == "" {
		return "A comment thread was assigned to you"
	}
	return "{{actionUser}} assigned you a comment thread"
}

// commentBody is a comment's text (or, for a comment of HTML only, the HTML's text, a line per
// block), cut at maxCommentBody characters.
func commentBody(c *commentItem) string {
	text := c.CommentText
	if strings.TrimSpace(text) == "" {
		text = htmlText(c.CommentHTML)
	}
	if utf8.RuneCountInString(text) > maxCommentBody {
		text = string([]rune(text)[:maxCommentBody-1]) + "…"
	}
	return text
}

// htmlText is the text of an HTML fragment, blocks and line breaks ending lines.
func htmlText(s string) string {
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(b.String())
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "p", "br", "li", "blockquote", "pre", "ul", "ol":
				if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
					b.WriteByte('\n')
				}
			}
		}
	}
}

// notifyOnce adds a comment notification and fans it out, counting it in the quotas first, or
// finishes the fan-out of the one a delivery before added. Nothing is sent when the
// organization or document went since the event, or when no recipient is left.
func (s *Server) notifyOnce(ctx context.Context, org, doc Scope, n *Notification) error {
	if len(n.NotifyUsers) == 0 {
		return nil
	}
	if gone, err := s.gone(ctx, org, doc); err != nil || gone {
		return err
	}
	stored, err := s.store.Notification(ctx, org, n.ID)
	switch {
	case err == nil:
		if stored.FannedOut {
			return nil
		}
		return s.fanOutStored(ctx, stored, org, doc) // counted when it was added
	case !errors.Is(err, ErrNotFound):
		return err
	}
	giveBack, err := s.takeCommentQuotas(ctx, org, n)
	if err != nil || len(n.NotifyUsers) == 0 {
		return err
	}
	n, added, err := s.addOrResume(ctx, org, n)
	if !added {
		giveBack() // another delivery added it, counted
	}
	if err != nil || n == nil {
		return err
	}
	return s.fanOutStored(ctx, n, org, doc)
}
