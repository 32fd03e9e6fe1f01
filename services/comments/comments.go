package comments

import (
	"context"
	"errors"
	"fmt"
	"slices"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// threadRequest is the part every comment operation shares: the thread it acts on.
type threadRequest interface {
	GetOrganizationId() string
	GetDocumentId() string
	GetAnnotationId() string
}

// thread checks the thread's ids, authenticates the actor for its document (and, for a write,
// takes one from an end user's budget) and resolves the document.
func (s *Server) thread(ctx context.Context, req threadRequest, write bool) (actor, Ref, error) {
	if err := checkDocument(req.GetOrganizationId(), req.GetDocumentId()); err != nil {
		return actor{}, Ref{}, err
	}
	if err := validate.ID("annotationId", req.GetAnnotationId()); err != nil {
		return actor{}, Ref{}, err
	}
	c, err := s.actorFor(ctx, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return actor{}, Ref{}, err
	}
	if write {
		if err := s.writes.spend(c); err != nil {
			return actor{}, Ref{}, err
		}
	}
	r, err := s.ref(ctx, c.APIKey, req.GetOrganizationId(), req.GetDocumentId())
	return c, r, err
}

// missing turns a thread-level refusal into the request's NOT_FOUND: the comment operations
// act on one thread, so its absence is not an item's.
func missing(err error) error {
	if errors.Is(err, errMissing) {
		return apierr.NotFound(msgItemMissing)
	}
	if errors.Is(err, errFull) {
		return apierr.FailedPrecondition(msgThreadFull)
	}
	return err
}

// AddComments adds comments to a thread and returns their ids.
func (s *Server) AddComments(ctx context.Context, req *commentsv1.AddCommentsRequest) (*commentsv1.AddCommentsResponse, error) {
	cs := req.GetCommentData()
	if len(cs) == 0 || len(cs) > maxItems {
		return nil, apierr.InvalidArgument("commentData must hold 1 to %d comments.", maxItems)
	}
	news := make([]Comment, 0, len(cs))
	for i, c := range cs {
		cm, err := checkNewComment(fmt.Sprintf("commentData[%d]", i), c)
		if err != nil {
			return nil, err
		}
		if cm.ID != 0 && slices.ContainsFunc(news, func(o Comment) bool { return o.ID == cm.ID }) {
			return nil, apierr.InvalidArgument("commentData[%d].commentId is given twice.", i)
		}
		news = append(news, cm)
	}
	c, r, err := s.thread(ctx, req, true)
	if err != nil {
		return nil, err
	}
	for i := range news {
		if news[i].From, err = c.as(news[i].From); err != nil {
			return nil, err
		}
		if news[i].From.UserID == "" {
			return nil, apierr.InvalidArgument("commentData[%d].from is required.", i)
		}
	}
	var added []Comment
	_, after, err := s.change(ctx, r, req.GetAnnotationId(), s.seen(ctx, c, func(a *Annotation) error {
		now := s.now()
		added = added[:0]
		for _, cm := range news {
			if cm.ID == 0 {
				if a.LastCommentID >= maxCommentID {
					return errNoIDs // past it, a JSON number names no comment exactly
				}
				cm.ID = a.LastCommentID + 1
			} else if slices.ContainsFunc(a.Comments, func(o Comment) bool { return o.ID == cm.ID }) {
				return errIDTaken
			}
			a.LastCommentID = max(a.LastCommentID, cm.ID)
			cm.CreatedAt, cm.LastUpdated = now, now
			a.Comments = append(a.Comments, cm)
			a.Authors = addAuthor(a.Authors, cm.From.UserID)
			added = append(added, cm)
		}
		a.ReadBy = nil
		return nil
	}))
	if errors.Is(err, errIDTaken) {
		return nil, apierr.AlreadyExists(msgCommentIDTaken)
	}
	if errors.Is(err, errNoIDs) {
		return nil, apierr.FailedPrecondition("Give commentIds: %s", msgNoCommentIDs)
	}
	if err != nil {
		return nil, missing(err)
	}
	resp := &commentsv1.AddCommentsResponse{Status: statusSuccess, Message: msgCommentsAdded}
	for i := range added {
		resp.Data = append(resp.Data, float64(added[i].ID))
		s.publish(ctx, c.Caller, c.whoWrote(&added[i]), eventCommentAdd, after, &added[i], nil)
	}
	return resp, nil
}

var (
	errIDTaken = &itemError{msgCommentIDTaken}
	errNoIDs   = &itemError{msgNoCommentIDs}
)

// GetComments returns a thread's comments, oldest first, or those among commentIds.
func (s *Server) GetComments(ctx context.Context, req *commentsv1.GetCommentsRequest) (*commentsv1.GetCommentsResponse, error) {
	want, err := commentIDs("commentIds", req.GetCommentIds(), false)
	if err != nil {
		return nil, err
	}
	c, r, err := s.thread(ctx, req, false)
	if err != nil {
		return nil, err
	}
	got, err := s.store.Get(ctx, r, []string{req.GetAnnotationId()})
	if err != nil {
		return nil, fmt.Errorf("read annotation: %w", err)
	}
	a := got[req.GetAnnotationId()]
	if a != nil {
		// A thread an end user may not see is not there for them.
		shown, err := s.visible(ctx, c, r.OrgGen, []*Annotation{a})
		if err != nil {
			return nil, err
		}
		if len(shown) == 0 {
			a = nil
		}
	}
	if a == nil {
		return nil, apierr.NotFound(msgItemMissing)
	}
	resp := &commentsv1.GetCommentsResponse{Status: statusSuccess, Message: msgCommentsFetched, Data: []*commentsv1.Comment{}}
	for i := range a.Comments {
		if len(want) == 0 || slices.Contains(want, a.Comments[i].ID) {
			resp.Data = append(resp.Data, commentProto(&a.Comments[i]))
		}
	}
	return resp, nil
}

// commentEdit is a checked updatedData of Update Comments.
type commentEdit struct {
	text, html  *string
	mentions    []Mention
	setMentions bool
	clearText   bool
	clearHTML   bool
}

func checkCommentEdit(d *commentsv1.CommentChanges) (commentEdit, error) {
	var e commentEdit
	if d == nil {
		return e, apierr.InvalidArgument("updatedData is required.")
	}
	for _, n := range d.GetNullFields() {
		switch n {
		case "comment_text":
			e.clearText = true
		case "comment_html":
			e.clearHTML = true
		default:
			return e, apierr.InvalidArgument("updatedData: only commentText and commentHtml may be null.")
		}
	}
	if d.CommentText != nil || d.CommentHtml != nil {
		text, html, err := checkContent("updatedData", d.GetCommentText(), d.GetCommentHtml())
		if err != nil {
			return e, err
		}
		if d.CommentText != nil {
			e.text = &text
		}
		if d.CommentHtml != nil {
			e.html = &html
		}
	}
	if l := d.GetTaggedUserContacts(); l != nil {
		ms, err := mentionsOf("updatedData.taggedUserContacts", l)
		if err != nil {
			return e, err
		}
		e.mentions, e.setMentions = ms, true
	}
	if e.text == nil && e.html == nil && !e.setMentions && !e.clearText && !e.clearHTML {
		return e, apierr.InvalidArgument("updatedData changes nothing: give commentText, commentHtml or taggedUserContacts.")
	}
	return e, nil
}

func (e commentEdit) apply(c *Comment) error {
	switch {
	case e.clearText:
		c.Text = ""
	case e.text != nil:
		c.Text = *e.text
	}
	switch {
	case e.clearHTML:
		c.HTML = ""
	case e.html != nil:
		c.HTML = *e.html
	}
	if e.setMentions {
		c.Mentions = e.mentions
	}
	if c.Text == "" && c.HTML == "" {
		return errEmptyComment
	}
	return nil
}

var errEmptyComment = &itemError{"A comment keeps a commentText or a commentHtml."}

// UpdateComments changes comments' text, HTML or mentions; each changed comment publishes
// comment.update.
func (s *Server) UpdateComments(ctx context.Context, req *commentsv1.UpdateCommentsRequest) (*commentsv1.ItemResultsResponse, error) {
	idList, err := commentIDs("commentIds", req.GetCommentIds(), true)
	if err != nil {
		return nil, err
	}
	edit, err := checkCommentEdit(req.GetUpdatedData())
	if err != nil {
		return nil, err
	}
	c, r, err := s.thread(ctx, req, true)
	if err != nil {
		return nil, err
	}
	data := map[string]*commentsv1.ItemResult{}
	var changed []int64
	before, after, err := s.change(ctx, r, req.GetAnnotationId(), s.seen(ctx, c, func(a *Annotation) error {
		changed = changed[:0]
		now := s.now()
		for _, id := range idList {
			i := slices.IndexFunc(a.Comments, func(o Comment) bool { return o.ID == id })
			if i < 0 {
				continue
			}
			if !c.canChange(a.Comments[i].From.UserID, false) {
				return errNotYours
			}
			if err := edit.apply(&a.Comments[i]); err != nil {
				return err
			}
			a.Comments[i].LastUpdated = now
			changed = append(changed, id)
		}
		if len(changed) == 0 {
			return errNoComments
		}
		a.ReadBy = nil
		return nil
	}))
	switch {
	case errors.Is(err, errNotYours):
		return nil, apierr.PermissionDenied(msgNotYours)
	case errors.Is(err, errEmptyComment):
		return nil, apierr.InvalidArgument("%s", errEmptyComment.msg)
	case errors.Is(err, errNoComments):
		changed = nil
	case err != nil:
		return nil, missing(err)
	}
	for _, id := range idList {
		key := fmt.Sprint(id)
		if slices.Contains(changed, id) {
			data[key] = &commentsv1.ItemResult{Success: true, Id: key, Message: msgCommentUpdated}
		} else {
			data[key] = &commentsv1.ItemResult{Id: key, Message: msgCommentMissing}
		}
	}
	for _, id := range changed {
		s.publish(ctx, c.Caller, c.whoWrote(after.comment(id)), eventCommentUpdate, after, after.comment(id), previousComment(before.comment(id)))
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgCommentsUpdated, Data: data}, nil
}

var errNoComments = &itemError{msgCommentMissing}

// comment returns the thread's comment with the id, or nil.
func (a *Annotation) comment(id int64) *Comment {
	for i := range a.Comments {
		if a.Comments[i].ID == id {
			return &a.Comments[i]
		}
	}
	return nil
}

// DeleteComments deletes comments of a thread; a thread keeps at least one (delete the
// annotation to remove the last).
func (s *Server) DeleteComments(ctx context.Context, req *commentsv1.DeleteCommentsRequest) (*commentsv1.ItemResultsResponse, error) {
	idList, err := commentIDs("commentIds", req.GetCommentIds(), true)
	if err != nil {
		return nil, err
	}
	c, r, err := s.thread(ctx, req, true)
	if err != nil {
		return nil, err
	}
	var gone []Comment
	before, after, err := s.change(ctx, r, req.GetAnnotationId(), s.seen(ctx, c, func(a *Annotation) error {
		gone = gone[:0]
		for _, o := range a.Comments {
			if slices.Contains(idList, o.ID) && !c.canChange(o.From.UserID, true) {
				return errNotYours
			}
		}
		a.Comments = slices.DeleteFunc(a.Comments, func(o Comment) bool {
			if slices.Contains(idList, o.ID) {
				gone = append(gone, o)
				return true
			}
			return false
		})
		switch {
		case len(gone) == 0:
			return errNoComments
		case len(a.Comments) == 0:
			return errLastComment
		}
		a.Authors = authorsOf(a)
		a.ReadBy = nil // a change: unread again (docs/comments.md, "Annotations")
		return nil
	}))
	switch {
	case errors.Is(err, errNotYours):
		return nil, apierr.PermissionDenied(msgNotYours)
	case errors.Is(err, errLastComment):
		return nil, apierr.FailedPrecondition(msgLastComment)
	case errors.Is(err, errNoComments):
		gone = nil
	case err != nil:
		return nil, missing(err)
	}
	_ = before
	data := map[string]*commentsv1.ItemResult{}
	for _, id := range idList {
		key := fmt.Sprint(id)
		if slices.ContainsFunc(gone, func(o Comment) bool { return o.ID == id }) {
			data[key] = &commentsv1.ItemResult{Success: true, Id: key, Message: msgCommentDeleted}
		} else {
			data[key] = &commentsv1.ItemResult{Id: key, Message: msgCommentMissing}
		}
	}
	for i := range gone {
		s.publish(ctx, c.Caller, c.whoWrote(&gone[i]), eventCommentDelete, after, &gone[i], nil)
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgCommentsDeleted, Data: data}, nil
}

var (
	errTooManyKinds = &itemError{"A comment holds at most 50 different reactions."}
	errLastComment  = &itemError{msgLastComment}
	errNotYours     = &itemError{msgNotYours}
)

// authorsOf recomputes the thread's authors from its author and comments.
func authorsOf(a *Annotation) []string {
	out := addAuthor(nil, a.From.UserID)
	for _, c := range a.Comments {
		out = addAuthor(out, c.From.UserID)
	}
	return out
}

// AddReaction adds a user's reaction to a comment; adding it twice changes nothing.
func (s *Server) AddReaction(ctx context.Context, req *commentsv1.AddReactionRequest) (*commentsv1.ReactionResponse, error) {
	return s.react(ctx, req, true)
}

// DeleteReaction removes a user's reaction from a comment.
func (s *Server) DeleteReaction(ctx context.Context, req *commentsv1.DeleteReactionRequest) (*commentsv1.ReactionResponse, error) {
	return s.react(ctx, req, false)
}

// reactionRequest is what Add and Delete Reaction share.
type reactionRequest interface {
	threadRequest
	GetCommentId() float64
	GetEmoji() string
	GetUser() *commentsv1.User
}

func (s *Server) react(ctx context.Context, req reactionRequest, add bool) (*commentsv1.ReactionResponse, error) {
	id, err := commentID("commentId", req.GetCommentId())
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, apierr.InvalidArgument("commentId is required.")
	}
	if err := checkEmoji(req.GetEmoji()); err != nil {
		return nil, err
	}
	user, err := checkUser("user", req.GetUser(), false)
	if err != nil {
		return nil, err
	}
	c, r, err := s.thread(ctx, req, true)
	if err != nil {
		return nil, err
	}
	if user, err = c.as(user); err != nil {
		return nil, err
	}
	if user.UserID == "" {
		return nil, apierr.InvalidArgument("user is required.")
	}
	_, after, err := s.change(ctx, r, req.GetAnnotationId(), s.seen(ctx, c, func(a *Annotation) error {
		cm := a.comment(id)
		if cm == nil {
			return errNoComments
		}
		changed, err := toggle(cm, req.GetEmoji(), user.UserID, add)
		if err != nil {
			return err
		}
		if !changed {
			return errNoChange
		}
		a.ReadBy = nil // a change: unread again (docs/comments.md, "Annotations")
		return nil
	}))
	msg, event := msgReactionAdded, eventReactionAdd
	if !add {
		msg, event = msgReactionDeleted, eventReactionDelete
	}
	key := fmt.Sprint(id)
	switch {
	case errors.Is(err, errNoComments):
		return nil, apierr.NotFound(msgCommentMissing)
	case errors.Is(err, errTooManyKinds):
		return nil, apierr.FailedPrecondition("%s", errTooManyKinds.msg)
	case errors.Is(err, errNoChange):
		return &commentsv1.ReactionResponse{Status: statusSuccess, Message: msg, Data: &commentsv1.ItemResult{Success: true, Id: key, Message: msgReactionNoop}}, nil
	case err != nil:
		return nil, missing(err)
	}
	s.publish(ctx, c.Caller, &user, event, after, after.comment(id), map[string]any{"emoji": req.GetEmoji(), "userId": user.UserID})
	return &commentsv1.ReactionResponse{Status: statusSuccess, Message: msg, Data: &commentsv1.ItemResult{Success: true, Id: key, Message: msg}}, nil
}

// toggle adds or removes the user's reaction; false when it was already so.
func toggle(c *Comment, emoji, user string, add bool) (bool, error) {
	i := slices.IndexFunc(c.Reactions, func(r Reaction) bool { return r.Emoji == emoji })
	if add {
		if i < 0 && len(c.Reactions) >= maxReactionKinds {
			return false, errTooManyKinds
		}
		if i < 0 {
			c.Reactions = append(c.Reactions, Reaction{Emoji: emoji, UserIDs: []string{user}})
			return true, nil
		}
		if slices.Contains(c.Reactions[i].UserIDs, user) {
			return false, nil
		}
		c.Reactions[i].UserIDs = append(c.Reactions[i].UserIDs, user)
		return true, nil
	}
	if i < 0 || !slices.Contains(c.Reactions[i].UserIDs, user) {
		return false, nil
	}
	c.Reactions[i].UserIDs = slices.DeleteFunc(c.Reactions[i].UserIDs, func(u string) bool { return u == user })
	if len(c.Reactions[i].UserIDs) == 0 {
		c.Reactions = slices.Delete(c.Reactions, i, i+1)
	}
	return true, nil
}
