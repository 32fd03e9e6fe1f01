package notifications

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/apierr"
)

// contextBatch is the recipients of one MatchContexts call of the fan-out: the access service
// takes at most 10,000 users times contexts, and the fan-out asks about one context.
const contextBatch = 10000

// contextOf returns the notification's context.access, nil when it has none (docs/api.md,
// "Notifications", "Context").
func contextOf(n *Notification) *structpb.Struct {
	c := structOf(n.ContextAccess)
	if len(c.GetFields()) == 0 {
		return nil
	}
	return c
}

// grantedByContext keeps the recipients whose access context (the access service's
// MatchContexts) grants the notification's context, asking once per contextBatch recipients.
// An error, an older access service's included, is returned for the fan-out to be retried:
// delivering without the filter would reach whom the context excludes.
func (s *Server) grantedByContext(ctx context.Context, n *Notification, access *structpb.Struct, out []recipient) ([]recipient, error) {
	return keepAllowed(out, contextBatch, func(userIDs []string) ([]string, error) {
		res, err := s.peers.Access.MatchContexts(ctx, &accessv1.MatchContextsRequest{ApiKey: n.APIKey, OrganizationId: n.OrganizationID,
			OrganizationGeneration: n.OrgGen, UserIds: userIDs, Contexts: []*structpb.Struct{access}})
		if err != nil {
			return nil, fmt.Errorf("match contexts: %w", err)
		}
		granted := make([]string, 0, len(res.GetMatches()))
		for _, m := range res.GetMatches() {
			granted = append(granted, m.GetUserId())
		}
		return granted, nil
	})
}

// hiddenByContext returns the notifications of ns that carry a context the reader's access
// context does not grant now, keyed by id: one MatchContexts call for a page, whatever its
// size, with each distinct context once. A reader whose context changed since the fan-out sees
// what it now allows (docs/api.md, "Notifications", "Context"). While the access service is of
// the release before (a rolling upgrade) every notification with a context is hidden: shown
// again once it answers, never shown to whom the context excludes.
func (s *Server) hiddenByContext(ctx context.Context, org Scope, userID string, ns map[string]*Notification) (map[string]bool, error) {
	var (
		contexts []*structpb.Struct
		index    = map[string]int{} // a context's text to its place in contexts
		with     = map[string]int{} // a notification's id to its context's place
	)
	for id, n := range ns {
		if n.ContextAccess == "" {
			continue
		}
		i, ok := index[n.ContextAccess]
		if !ok {
			c := contextOf(n)
			if c == nil {
				continue // an empty context names nothing to hold
			}
			i = len(contexts)
			index[n.ContextAccess] = i
			contexts = append(contexts, c)
		}
		with[id] = i
	}
	hidden := make(map[string]bool, len(with))
	if len(contexts) == 0 {
		return hidden, nil
	}
	res, err := s.peers.Access.MatchContexts(ctx, &accessv1.MatchContextsRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID,
		OrganizationGeneration: org.OrgGen, UserIds: []string{userID}, Contexts: contexts})
	granted := map[int]bool{}
	switch {
	case status.Code(err) == codes.Unimplemented:
		s.log.WarnContext(ctx, "notifications: the access service cannot match contexts yet; notifications with a context are hidden", "error", err)
	case err != nil:
		return nil, apierr.FromPeer("match contexts", err)
	default:
		for _, m := range res.GetMatches() {
			if m.GetUserId() != userID {
				continue
			}
			for _, i := range m.GetContexts() {
				granted[int(i)] = true
			}
		}
	}
	for id, i := range with {
		if !granted[i] {
			hidden[id] = true
		}
	}
	return hidden, nil
}
