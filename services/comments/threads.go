package comments

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// annotationEdit is a checked item of Update Comment Annotations: the fields to set (nil:
// kept) and to clear.
type annotationEdit struct {
	id                           string
	status                       *Status
	priority                     *Priority
	assignedTo                   *User
	context                      *string
	location                     *Location
	clearPriority, clearAssignee bool
	// actor is the acting user, "" for a backend (K) caller.
	actor string
}

// UpdateCommentAnnotations changes threads' status, priority, assignee, context or location;
// each change publishes its event (a status change, a priority change, an assignment, or an
// update for context and location).
func (s *Server) UpdateCommentAnnotations(ctx context.Context, req *commentsv1.UpdateCommentAnnotationsRequest) (*commentsv1.ItemResultsResponse, error) {
	edits, err := checkUpdateAnnotations(req)
	if err != nil {
		return nil, err
	}
	c, err := s.actorFor(ctx, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	if err := s.writes.spend(c); err != nil {
		return nil, err
	}
	if !c.canEdit() {
		return nil, apierr.PermissionDenied(msgNeedsEditor)
	}
	r, err := s.ref(ctx, c.APIKey, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	data := map[string]*commentsv1.ItemResult{}
	for _, e := range edits {
		e.actor = c.id()
		before, after, err := s.change(ctx, r, e.id, s.seen(ctx, c, e.apply))
		res, err := itemResult(e.id, msgItemUpdated, err)
		if err != nil {
			return nil, err
		}
		data[e.id] = res
		if after != nil {
			s.publishEdits(ctx, c, before, after)
		}
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgAnnotationsUpdated, Data: data}, nil
}

// itemResult turns change's outcome into an item's result, or the request's error.
func itemResult(id, ok string, err error) (*commentsv1.ItemResult, error) {
	var ie *itemError
	switch {
	case err == nil, errors.Is(err, errNoChange):
		return &commentsv1.ItemResult{Success: true, Id: id, Message: ok}, nil
	case errors.As(err, &ie):
		return &commentsv1.ItemResult{Id: id, Message: ie.msg}, nil
	}
	return nil, err
}

func (e annotationEdit) apply(a *Annotation) error {
	if e.status != nil {
		a.Status = *e.status
		// Who resolved it: the acting user when one is known (docs/comments.md,
		// "Annotations"); a terminal status set again keeps the first resolver.
		switch {
		case a.Status.Type != statusTerminal:
			a.ResolvedBy = ""
		case a.ResolvedBy == "":
			a.ResolvedBy = e.actor
		}
	}
	switch {
	case e.clearPriority:
		a.Priority = nil
	case e.priority != nil:
		a.Priority = e.priority
	}
	switch {
	case e.clearAssignee:
		a.AssignedTo = nil
	case e.assignedTo != nil:
		a.AssignedTo = e.assignedTo
	}
	if e.context != nil {
		a.Context = *e.context
	}
	if e.location != nil {
		a.Location = e.location
	}
	a.ReadBy = nil
	return nil
}

func checkUpdateAnnotations(req *commentsv1.UpdateCommentAnnotationsRequest) ([]annotationEdit, error) {
	if err := checkDocument(req.GetOrganizationId(), req.GetDocumentId()); err != nil {
		return nil, err
	}
	items := req.GetAnnotations()
	if len(items) == 0 || len(items) > maxItems {
		return nil, apierr.InvalidArgument("annotations must hold 1 to %d annotations.", maxItems)
	}
	out := make([]annotationEdit, 0, len(items))
	for i, it := range items {
		e, err := checkAnnotationEdit(fmt.Sprintf("annotations[%d]", i), it)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(o annotationEdit) bool { return o.id == e.id }) {
			return nil, apierr.InvalidArgument("annotations[%d].annotationId %s is given twice.", i, e.id)
		}
		out = append(out, e)
	}
	return out, nil
}

func checkAnnotationEdit(field string, it *commentsv1.AnnotationUpdate) (annotationEdit, error) {
	e := annotationEdit{id: it.GetAnnotationId()}
	if err := validate.ID(field+".annotationId", e.id); err != nil {
		return e, err
	}
	for _, n := range it.GetNullFields() {
		switch n {
		case "priority":
			e.clearPriority = true
		case "assigned_to":
			e.clearAssignee = true
		default:
			return e, apierr.InvalidArgument("%s: only priority and assignedTo may be null.", field)
		}
	}
	if it.GetStatus() != nil {
		st, err := checkStatus(field+".status", it.GetStatus())
		if err != nil {
			return e, err
		}
		e.status = &st
	}
	var err error
	if e.priority, err = checkPriority(field+".priority", it.GetPriority()); err != nil {
		return e, err
	}
	if it.GetAssignedTo() != nil {
		u, err := checkUser(field+".assignedTo", it.GetAssignedTo(), true)
		if err != nil {
			return e, err
		}
		e.assignedTo = &u
	}
	if it.GetContext() != nil {
		ctx, err := checkContext(field+".context", it.GetContext())
		if err != nil {
			return e, err
		}
		e.context = &ctx
	}
	if e.location, err = checkLocation(field+".location", it.GetLocation()); err != nil {
		return e, err
	}
	if e.status == nil && e.priority == nil && e.assignedTo == nil && e.context == nil && e.location == nil && !e.clearPriority && !e.clearAssignee {
		return e, apierr.InvalidArgument("%s changes nothing: give status, priority, assignedTo, context or location.", field)
	}
	return e, nil
}

func checkDocument(org, doc string) error {
	if err := validate.ID("organizationId", org); err != nil {
		return err
	}
	return validate.ID("documentId", doc)
}

// DeleteCommentAnnotations deletes threads with their comments, reactions and read marks.
func (s *Server) DeleteCommentAnnotations(ctx context.Context, req *commentsv1.DeleteCommentAnnotationsRequest) (*commentsv1.ItemResultsResponse, error) {
	if err := checkDocument(req.GetOrganizationId(), req.GetDocumentId()); err != nil {
		return nil, err
	}
	idList, err := validate.IDs("annotationIds", req.GetAnnotationIds(), true, maxItems)
	if err != nil {
		return nil, err
	}
	c, err := s.actorFor(ctx, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	if err := s.writes.spend(c); err != nil {
		return nil, err
	}
	r, err := s.ref(ctx, c.APIKey, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	asked := slices.Clone(idList)
	if c.user != nil {
		// All or nothing: an end user may delete only their own threads (an admin any), and a
		// thread's author never changes, so the check holds until the deletion. A thread the
		// user may not see is not there for them (left out before the author's check, whose
		// refusal would tell it exists).
		var shown []*Annotation
		if shown, idList, err = s.shownOf(ctx, c, r, idList); err != nil {
			return nil, err
		}
		for _, a := range shown {
			if !c.canChange(a.From.UserID, true) {
				return nil, apierr.PermissionDenied(msgNotYourThread)
			}
		}
	}
	data := map[string]*commentsv1.ItemResult{}
	for _, id := range asked {
		data[id] = &commentsv1.ItemResult{Id: id, Message: msgItemMissing}
	}
	for _, id := range idList {
		gone, err := s.remove(ctx, r, id)
		res, err := itemResult(id, msgItemDeleted, err)
		if err != nil {
			return nil, err
		}
		data[id] = res
		if gone != nil {
			s.publish(ctx, c.Caller, c.who(), eventAnnotationDelete, gone, nil, nil)
		}
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgAnnotationsDeleted, Data: data}, nil
}

// remove deletes the annotation as last read, reading it again when it changed meanwhile.
func (s *Server) remove(ctx context.Context, r Ref, id string) (*Annotation, error) {
	for range maxSwaps {
		got, err := s.store.Get(ctx, r, []string{id})
		if err != nil {
			return nil, fmt.Errorf("read annotation: %w", err)
		}
		a := got[id]
		if a == nil {
			return nil, errMissing
		}
		switch err := s.store.Delete(ctx, a); {
		case err == nil:
			return a, nil
		case errors.Is(err, ErrNotFound):
			return nil, errMissing
		case !errors.Is(err, ErrConflict):
			return nil, fmt.Errorf("delete annotation: %w", err)
		}
	}
	return nil, apierr.New(codes.Aborted, msgBusy)
}

// CountCommentAnnotations counts each document's annotations, and with a user, those the user
// has not read since they last changed.
func (s *Server) CountCommentAnnotations(ctx context.Context, req *commentsv1.CountCommentAnnotationsRequest) (*commentsv1.CountCommentAnnotationsResponse, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	docs, err := validate.IDs("documentIds", req.GetDocumentIds(), true, maxItems)
	if err != nil {
		return nil, err
	}
	statuses, err := validate.IDs("statusIds", req.GetStatusIds(), false, maxItems)
	if err != nil {
		return nil, err
	}
	if err := validate.OptionalID("userId", req.GetUserId()); err != nil {
		return nil, err
	}
	c, err := s.actorFor(ctx, req.GetOrganizationId(), docs...)
	if err != nil {
		return nil, err
	}
	if u := req.GetUserId(); u != "" {
		if _, err := c.as(User{UserID: u}); err != nil {
			return nil, err
		}
	}
	refs, err := s.refs(ctx, c.APIKey, req.GetOrganizationId(), docs)
	if err != nil {
		return nil, err
	}
	total, unread, err := s.store.Count(ctx, refs, statuses, req.GetUserId())
	if err != nil {
		return nil, fmt.Errorf("count annotations: %w", err)
	}
	data := map[string]*commentsv1.AnnotationCount{}
	for i, d := range docs {
		n := &commentsv1.AnnotationCount{Total: float64(total[i])}
		if req.GetUserId() != "" {
			u := float64(unread[i])
			n.Unread = &u
		}
		data[d] = n
	}
	return &commentsv1.CountCommentAnnotationsResponse{Status: statusSuccess, Message: msgAnnotationsCounted, Data: data}, nil
}

// MarkRead records that a user has read threads as they are now (Count's unread).
func (s *Server) MarkRead(ctx context.Context, req *commentsv1.MarkReadRequest) (*commentsv1.ItemResultsResponse, error) {
	if err := checkDocument(req.GetOrganizationId(), req.GetDocumentId()); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("userId", req.GetUserId()); err != nil {
		return nil, err
	}
	idList, err := validate.IDs("annotationIds", req.GetAnnotationIds(), true, maxItems)
	if err != nil {
		return nil, err
	}
	c, err := s.actorFor(ctx, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	if err := s.writes.spend(c); err != nil {
		return nil, err
	}
	reader, err := c.as(User{UserID: req.GetUserId()})
	if err != nil {
		return nil, err
	}
	if reader.UserID == "" {
		return nil, apierr.InvalidArgument("userId is required.")
	}
	r, err := s.ref(ctx, c.APIKey, req.GetOrganizationId(), req.GetDocumentId())
	if err != nil {
		return nil, err
	}
	asked := slices.Clone(idList)
	if c.user != nil {
		// Threads the user may not see are not there for them.
		if _, idList, err = s.shownOf(ctx, c, r, idList); err != nil {
			return nil, err
		}
	}
	found, err := s.store.MarkRead(ctx, r, reader.UserID, idList)
	if err != nil {
		return nil, fmt.Errorf("mark read: %w", err)
	}
	data := map[string]*commentsv1.ItemResult{}
	for _, id := range asked {
		if slices.Contains(found, id) {
			data[id] = &commentsv1.ItemResult{Success: true, Id: id, Message: msgItemRead}
		} else {
			data[id] = &commentsv1.ItemResult{Id: id, Message: msgItemMissing}
		}
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgMarkedRead, Data: data}, nil
}
