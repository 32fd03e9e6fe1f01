package comments

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/validate"
)

// Refusals of end users (docs/comments.md, "End users").
const (
	msgNoCaller      = "Send the API key and auth token headers, or an end user's token as Authorization: Bearer."
	msgOtherOrg      = "The token is for another organization."
	msgNoAccess      = "You do not have access to this document."
	msgNeedsEditor   = "Changing a comment annotation's status, priority, assignee, context or location needs the editor role."
	msgNotYours      = "You may change only your own comments."
	msgNotYourThread = "You may delete only your own comment annotations."
	msgNotYou        = "An end user acts as the token's user: from, user and userId must name that user."
	msgNoCreate      = "Only a backend (API key headers) may create organizations and documents."
)

// actor is who makes a call: a backend (K headers), or an end user (the token's user, with
// their role on the document).
type actor struct {
	authn.Caller
	// user is nil for a backend.
	user *endUser
}

type endUser struct {
	User
	admin bool
	// role is editor or viewer on the document of the call.
	role string
}

// id is the acting user's id, "" for a backend.
func (a actor) id() string {
	if a.user == nil {
		return ""
	}
	return a.user.UserID
}

// canEdit reports whether the actor may change a thread's status, priority, assignee, context
// or location: a backend, or an editor.
func (a actor) canEdit() bool { return a.user == nil || a.user.role == validate.RoleEditor }

// canChange reports whether the actor may edit or delete a comment (or, deleting, a thread) by
// author: a backend, its author, or (deleting) an admin.
func (a actor) canChange(author string, deleting bool) bool {
	return a.user == nil || a.user.UserID == author || deleting && a.user.admin
}

// as checks a user the request names as acting (from, user, userId) against the end user and
// returns the user to record: the token's, for an end user (an empty one is filled in).
func (a actor) as(u User) (User, error) {
	if a.user == nil {
		return u, nil
	}
	if u.UserID != "" && u.UserID != a.user.UserID {
		return User{}, apierr.PermissionDenied(msgNotYou)
	}
	return a.user.User, nil
}

// actorFor authenticates the call for the documents it acts on: a backend's caller as the
// interceptor checked it, or an end user's token verified by the access service (signature,
// expiry, the API key's auth-token generation), for the organization it was made for, with a
// role on every document.
func (s *Server) actorFor(ctx context.Context, org string, docs ...string) (actor, error) {
	if c, ok := authn.CallerFrom(ctx); ok {
		return actor{Caller: c}, nil
	}
	token, ok := authn.UserToken(ctx)
	if !ok {
		return actor{}, apierr.PermissionDenied(msgNoCaller)
	}
	claims, err := s.access.VerifyToken(ctx, &accessv1.VerifyTokenRequest{Token: token})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unauthenticated {
			return actor{}, apierr.PermissionDenied("%s", st.Message())
		}
		return actor{}, fmt.Errorf("verify token: %w", err)
	}
	if claims.GetOrganizationId() != "" && claims.GetOrganizationId() != org {
		return actor{}, apierr.PermissionDenied(msgOtherOrg)
	}
	a := actor{Caller: authn.Caller{APIKey: claims.GetApiKey(), WorkspaceID: claims.GetWorkspaceId()},
		user: &endUser{User: User{UserID: claims.GetUserId(), Name: claims.GetName(), Email: claims.GetEmail()}, admin: claims.GetIsAdmin(), role: validate.RoleEditor}}
	for _, d := range docs {
		res, err := s.access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: a.APIKey, OrganizationId: org, DocumentId: d, UserIds: []string{a.user.UserID}})
		if err != nil {
			if st, ok := status.FromError(err); ok && st.Code() == codes.NotFound {
				return actor{}, apierr.NotFound("%s", st.Message())
			}
			return actor{}, fmt.Errorf("check access: %w", err)
		}
		role := res.GetRoles()[a.user.UserID]
		if role != validate.RoleEditor && role != validate.RoleViewer {
			return actor{}, apierr.PermissionDenied(msgNoAccess)
		}
		if role == validate.RoleViewer {
			a.user.role = role // the lowest role over the documents
		}
	}
	return a, nil
}

// visible keeps the threads an end user may see: those without context.access, and those whose
// context.access the user's access context grants (docs/comments.md, "End users"), asked of the
// access service once for the page.
func (s *Server) visible(ctx context.Context, a actor, orgGen string, as []*Annotation) ([]*Annotation, error) {
	if a.user == nil {
		return as, nil
	}
	var contexts []*structpb.Struct
	var guarded []int
	for i, an := range as {
		if c := accessOf(an); c != nil {
			contexts = append(contexts, c)
			guarded = append(guarded, i)
		}
	}
	if len(contexts) == 0 {
		return as, nil
	}
	res, err := s.access.MatchContexts(ctx, &accessv1.MatchContextsRequest{ApiKey: a.APIKey, OrganizationId: as[0].OrganizationID,
		OrganizationGeneration: orgGen, UserIds: []string{a.user.UserID}, Contexts: contexts})
	if err != nil {
		return nil, fmt.Errorf("match contexts: %w", err)
	}
	granted := map[int]bool{}
	for _, m := range res.GetMatches() {
		for _, c := range m.GetContexts() {
			granted[guarded[c]] = true
		}
	}
	out := as[:0:0]
	for i, an := range as {
		if accessOf(an) == nil || granted[i] {
			out = append(out, an)
		}
	}
	return out, nil
}

// hidden reports whether the thread is one the end user may not see (its context.access).
func (s *Server) hidden(ctx context.Context, a actor, an *Annotation) (bool, error) {
	if a.user == nil || accessOf(an) == nil {
		return false, nil
	}
	shown, err := s.visible(ctx, a, an.OrgGen, []*Annotation{an})
	return len(shown) == 0, err
}

// shownOf reads the threads of ids for an end user's operation on several of them and keeps
// those the user may see, asking the access service once for them all: shown are the visible
// threads, kept the ids less the hidden threads' (an id without a thread stays, for the
// operation to answer as missing, so a hidden thread and a missing one look alike).
func (s *Server) shownOf(ctx context.Context, a actor, r Ref, ids []string) (shown []*Annotation, kept []string, err error) {
	got, err := s.store.Get(ctx, r, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("read annotations: %w", err)
	}
	var found []*Annotation
	for _, id := range ids {
		if an := got[id]; an != nil && !slices.Contains(found, an) {
			found = append(found, an)
		}
	}
	if shown, err = s.visible(ctx, a, r.OrgGen, found); err != nil {
		return nil, nil, err
	}
	kept = slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		an := got[id]
		return an != nil && !slices.Contains(shown, an)
	})
	return shown, kept, nil
}

// seen guards a change of a thread (Server.change) by an end user: a thread they may not see
// is not there for them (errMissing), so no operation writes to it or tells it exists. It is
// checked on the version the change writes over.
func (s *Server) seen(ctx context.Context, a actor, edit func(*Annotation) error) func(*Annotation) error {
	return func(an *Annotation) error {
		switch h, err := s.hidden(ctx, a, an); {
		case err != nil:
			return err
		case h:
			return errMissing
		}
		return edit(an)
	}
}

// accessOf is a thread's context.access, nil when it has none.
func accessOf(a *Annotation) *structpb.Struct {
	if a.Context == "" {
		return nil
	}
	var c structpb.Struct
	if err := protojson.Unmarshal([]byte(a.Context), &c); err != nil {
		return nil
	}
	acc := c.GetFields()["access"].GetStructValue()
	if len(acc.GetFields()) == 0 {
		return nil
	}
	return acc
}
