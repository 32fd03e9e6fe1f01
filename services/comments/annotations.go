package comments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/validate"
)

// AddCommentAnnotations adds threads, each with its first comments; an id that is taken is
// that item's success: false.
func (s *Server) AddCommentAnnotations(ctx context.Context, req *commentsv1.AddCommentAnnotationsRequest) (*commentsv1.ItemResultsResponse, error) {
	news, err := checkAddAnnotations(req)
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
	if err := c.adopt(req, news); err != nil {
		return nil, err
	}
	gens, err := s.docs.EnsureResources(ctx, &documentsv1.EnsureResourcesRequest{
		ApiKey: c.APIKey, OrganizationId: req.GetOrganizationId(), CreateOrganization: req.GetCreateOrganization(),
		DocumentId: req.GetDocumentId(), CreateDocument: req.GetCreateDocument(),
	})
	if err != nil {
		return nil, err
	}
	r := Ref{APIKey: c.APIKey, OrganizationID: req.GetOrganizationId(), OrgGen: gens.GetOrganizationGeneration(),
		DocumentID: req.GetDocumentId(), DocGen: gens.GetDocumentGeneration()}
	data := map[string]*commentsv1.ItemResult{}
	var added []*Annotation
	for _, a := range news {
		s.stamp(a, r)
		switch err := s.store.Insert(ctx, a, MaxThreadsPerDocument); {
		case errors.Is(err, ErrExists):
			data[a.ID] = &commentsv1.ItemResult{Id: a.ID, Message: msgItemExists}
		case errors.Is(err, ErrFull):
			data[a.ID] = &commentsv1.ItemResult{Id: a.ID, Message: msgTooManyThreads}
		case err != nil:
			return nil, fmt.Errorf("add annotation: %w", err)
		default:
			data[a.ID] = &commentsv1.ItemResult{Success: true, Id: a.ID, Message: msgItemAdded}
			added = append(added, a)
		}
	}
	if err := s.settle(ctx, r); err != nil {
		return nil, err
	}
	for _, a := range added {
		s.publish(ctx, c.Caller, &a.From, eventAnnotationAdd, a, nil, nil)
	}
	return &commentsv1.ItemResultsResponse{Status: statusSuccess, Message: msgAnnotationsAdded, Data: data}, nil
}

// adopt holds new threads to what the actor may do: an end user creates no organization or
// document, writes as themselves, and sets status, priority or assignee only as an editor.
func (a actor) adopt(req *commentsv1.AddCommentAnnotationsRequest, news []*Annotation) error {
	if a.user == nil {
		for i, n := range news {
			if n.From.UserID == "" {
				return apierr.InvalidArgument("commentAnnotations[%d].from is required.", i)
			}
			for j, cm := range n.Comments {
				if cm.From.UserID == "" {
					return apierr.InvalidArgument("commentAnnotations[%d].commentData[%d].from is required.", i, j)
				}
			}
		}
		return nil
	}
	if req.GetCreateOrganization() || req.GetCreateDocument() {
		return apierr.PermissionDenied(msgNoCreate)
	}
	for _, n := range news {
		var err error
		if n.From, err = a.as(n.From); err != nil {
			return err
		}
		for i := range n.Comments {
			if n.Comments[i].From, err = a.as(n.Comments[i].From); err != nil {
				return err
			}
		}
		if (n.Status != defaultStatus || n.Priority != nil || n.AssignedTo != nil) && !a.canEdit() {
			return apierr.PermissionDenied(msgNeedsEditor)
		}
		n.Authors = nil // recomputed by stamp from the adopted authors
	}
	return nil
}

// stamp files a new annotation under the document and gives it and its comments their ids
// and times.
func (s *Server) stamp(a *Annotation, r Ref) {
	now := s.now()
	a.Ref, a.CreatedAt, a.LastUpdated, a.Version = r, now, now, 1
	if a.ID == "" {
		a.ID = "ann_" + ids.Random(20)
	}
	for i := range a.Comments {
		cm := &a.Comments[i]
		if cm.ID == 0 {
			cm.ID = a.LastCommentID + 1
		}
		a.LastCommentID = max(a.LastCommentID, cm.ID)
		cm.CreatedAt, cm.LastUpdated = now, now
		a.Authors = addAuthor(a.Authors, cm.From.UserID)
	}
	a.Authors = addAuthor(a.Authors, a.From.UserID)
	a.Bytes = contentBytes(a)
}

func addAuthor(authors []string, id string) []string {
	if id == "" || slices.Contains(authors, id) {
		return authors
	}
	return append(authors, id)
}

// checkAddAnnotations checks Add Comment Annotations before anything is created or written.
func checkAddAnnotations(req *commentsv1.AddCommentAnnotationsRequest) ([]*Annotation, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	if err := validate.ID("documentId", req.GetDocumentId()); err != nil {
		return nil, err
	}
	items := req.GetCommentAnnotations()
	if len(items) == 0 || len(items) > maxItems {
		return nil, apierr.InvalidArgument("commentAnnotations must hold 1 to %d annotations.", maxItems)
	}
	out := make([]*Annotation, 0, len(items))
	for i, it := range items {
		a, err := checkNewAnnotation(fmt.Sprintf("commentAnnotations[%d]", i), it)
		if err != nil {
			return nil, err
		}
		if a.ID != "" && slices.ContainsFunc(out, func(o *Annotation) bool { return o.ID == a.ID }) {
			return nil, apierr.InvalidArgument("commentAnnotations[%d].annotationId %s is given twice.", i, a.ID)
		}
		out = append(out, a)
	}
	return out, nil
}

func checkNewAnnotation(field string, it *commentsv1.NewAnnotation) (*Annotation, error) {
	a := &Annotation{ID: it.GetAnnotationId(), Status: defaultStatus}
	var err error
	if err = validate.TokenID(field+".annotationId", a.ID); err != nil {
		return nil, err
	}
	// from may be left out by an end user, whose token names them (actor.adopt).
	if a.From, err = checkUser(field+".from", it.GetFrom(), false); err != nil {
		return nil, err
	}
	if a.Location, err = checkLocation(field+".location", it.GetLocation()); err != nil {
		return nil, err
	}
	if a.Context, err = checkContext(field+".context", it.GetContext()); err != nil {
		return nil, err
	}
	if it.GetStatus() != nil {
		if a.Status, err = checkStatus(field+".status", it.GetStatus()); err != nil {
			return nil, err
		}
	}
	if a.Priority, err = checkPriority(field+".priority", it.GetPriority()); err != nil {
		return nil, err
	}
	if it.GetAssignedTo() != nil {
		u, err := checkUser(field+".assignedTo", it.GetAssignedTo(), true)
		if err != nil {
			return nil, err
		}
		a.AssignedTo = &u
	}
	if a.Status.Type == statusTerminal {
		a.ResolvedBy = a.From.UserID
	}
	cs := it.GetCommentData()
	if len(cs) == 0 || len(cs) > maxItems {
		return nil, apierr.InvalidArgument("%s.commentData must hold 1 to %d comments.", field, maxItems)
	}
	var last int64 // the highest id so far: stamp generates the next one
	for j, c := range cs {
		cm, err := checkNewComment(fmt.Sprintf("%s.commentData[%d]", field, j), c)
		if err != nil {
			return nil, err
		}
		if cm.ID != 0 && slices.ContainsFunc(a.Comments, func(o Comment) bool { return o.ID == cm.ID }) {
			return nil, apierr.InvalidArgument("%s.commentData[%d].commentId is given twice.", field, j)
		}
		switch {
		case cm.ID != 0:
			last = max(last, cm.ID)
		case last >= maxCommentID:
			return nil, apierr.InvalidArgument("%s.commentData[%d] needs a commentId: %s", field, j, msgNoCommentIDs)
		default:
			last++
		}
		a.Comments = append(a.Comments, cm)
	}
	if contentBytes(a) > MaxThreadBytes {
		return nil, apierr.InvalidArgument("%s is larger than a comment annotation may be (1 MiB of content).", field)
	}
	return a, nil
}

// tokenPosition is the sealed form of a Position.
type tokenPosition struct {
	LastUpdated int64  `json:"t"`
	ID          string `json:"i"`
}

// GetCommentAnnotations lists a document's (or up to 30 documents') annotations by
// lastUpdated, in keyset pages (docs/comments.md, "Paging").
func (s *Server) GetCommentAnnotations(ctx context.Context, req *commentsv1.GetCommentAnnotationsRequest) (*commentsv1.GetCommentAnnotationsResponse, error) {
	l, err := checkGet(req)
	if err != nil {
		return nil, err
	}
	c, err := s.actorFor(ctx, l.org, l.docs...)
	if err != nil {
		return nil, err
	}
	if l.filter.Documents, err = s.refs(ctx, c.APIKey, l.org, l.docs); err != nil {
		return nil, err
	}
	scope := l.scope(c.APIKey)
	var after *Position
	if tok := req.GetPageToken(); tok != "" {
		var p tokenPosition
		if err := s.pages.Open(tok, scope, &p); err != nil {
			return nil, cursor.Refusal("pageToken", err)
		}
		after = &Position{LastUpdated: p.LastUpdated, ID: p.ID}
	}
	as, err := s.store.List(ctx, l.filter, after, l.desc, l.size+1)
	if err != nil {
		return nil, fmt.Errorf("list annotations: %w", err)
	}
	resp := &commentsv1.GetCommentAnnotationsResponse{Status: statusSuccess, Message: msgAnnotationsFetched, Data: []*commentsv1.CommentAnnotation{}}
	more := len(as) > l.size
	as = as[:min(len(as), l.size)]
	var last *Annotation
	if len(as) > 0 {
		last = as[len(as)-1] // the page's position, also when the end user may not see it
	}
	shown, err := s.visible(ctx, c, l.filter.Documents[0].OrgGen, as)
	if err != nil {
		return nil, err
	}
	for _, a := range shown {
		resp.Data = append(resp.Data, annotationProto(a))
	}
	if more {
		tok, err := s.pages.Seal(scope, tokenPosition{LastUpdated: last.LastUpdated, ID: last.ID})
		if err != nil {
			return nil, err
		}
		resp.PageToken = &tok
	}
	return resp, nil
}

// listing is a checked Get Comment Annotations request.
type listing struct {
	org    string
	docs   []string
	filter Filter
	desc   bool
	size   int
}

const defaultPageSize, maxPageSize = 1000, 1000

func checkGet(req *commentsv1.GetCommentAnnotationsRequest) (*listing, error) {
	l := &listing{org: req.GetOrganizationId(), desc: true, size: defaultPageSize}
	if err := validate.ID("organizationId", l.org); err != nil {
		return nil, err
	}
	docs, err := validate.IDs("documentIds", req.GetDocumentIds(), false, maxItems)
	if err != nil {
		return nil, err
	}
	switch d := req.GetDocumentId(); {
	case d != "" && len(docs) > 0:
		return nil, apierr.InvalidArgument("Give documentId or documentIds, not both.")
	case d != "":
		if err := validate.ID("documentId", d); err != nil {
			return nil, err
		}
		docs = []string{d}
	case len(docs) == 0:
		return nil, apierr.InvalidArgument("documentId or documentIds is required.")
	}
	l.docs = docs
	f := &l.filter
	if f.IDs, err = validate.IDs("annotationIds", req.GetAnnotationIds(), false, maxItems); err != nil {
		return nil, err
	}
	if f.LocationIDs, err = validate.IDs("locationIds", req.GetLocationIds(), false, maxItems); err != nil {
		return nil, err
	}
	if f.UserIDs, err = validate.IDs("userIds", req.GetUserIds(), false, maxItems); err != nil {
		return nil, err
	}
	if f.StatusIDs, err = validate.IDs("statusIds", req.GetStatusIds(), false, maxItems); err != nil {
		return nil, err
	}
	if f.UpdatedAfter, err = millis("updatedAfter", req.UpdatedAfter); err != nil {
		return nil, err
	}
	if f.UpdatedBefore, err = millis("updatedBefore", req.UpdatedBefore); err != nil {
		return nil, err
	}
	switch req.GetOrder() {
	case "", "desc":
	case "asc":
		l.desc = false
	default:
		return nil, apierr.InvalidArgument("order must be asc or desc.")
	}
	if p := req.PageSize; p != nil {
		if *p < 1 || *p > maxPageSize {
			return nil, apierr.InvalidArgument("pageSize must be from 1 to %d.", maxPageSize)
		}
		l.size = int(*p)
	}
	return l, nil
}

// millis checks a time bound in Unix milliseconds; nil is none.
func millis(field string, v *float64) (int64, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 0 || *v > maxCommentID || *v != float64(int64(*v)) {
		return 0, apierr.InvalidArgument("%s must be a time in Unix milliseconds.", field)
	}
	return int64(*v), nil
}

// scope binds a page token to the tenant and the filters it was issued for.
func (l *listing) scope(apiKey string) string {
	sorted := func(v []string) []string {
		c := slices.Clone(v)
		slices.Sort(c)
		return c
	}
	f := l.filter
	b, _ := json.Marshal([]any{"comments", apiKey, l.org, sorted(l.docs), sorted(f.IDs), sorted(f.LocationIDs), sorted(f.UserIDs),
		sorted(f.StatusIDs), f.UpdatedAfter, f.UpdatedBefore, l.desc})
	return string(b)
}
