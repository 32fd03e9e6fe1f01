package notifications

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"

	"github.com/collab/collab/internal/apierr"
)

// Quotas bound the fan-out of each tenant (docs/api.md, "Notifications": Quotas); 0 turns one
// off.
type Quotas struct {
	// RecipientsPerMinute bounds the recipients a workspace's notifications reach in a minute
	// (each notification counts its recipients): per workspace, not per organization, as a
	// workspace makes organizations at will.
	RecipientsPerMinute int
	// InboxSize bounds the notifications a user's inbox in an organization may hold, counted
	// as the organization's notifications to everyone plus those naming the user.
	InboxSize int
}

// DefaultQuotas are generous for normal use: a notification to everyone in an organization of
// 10,000 members every three seconds, and years of notifications per inbox.
var DefaultQuotas = Quotas{RecipientsPerMinute: 200_000, InboxSize: 50_000}

// WithQuotas sets the fan-out quotas (DefaultQuotas without it).
func WithQuotas(q Quotas) Option { return func(s *Server) { s.quotas = q } }

// takeQuotas counts a notification about to be added in its workspace's recipients of this
// minute and in the inboxes it reaches, or refuses it with RESOURCE_EXHAUSTED having counted
// nothing. It counts before the notification is published, so concurrent adds cannot all pass
// a quota that only some fit (the stores' takes are atomic: store.go). giveBack takes the
// counts back when the notification is not published after all. A notification to everyone
// counts the organization's members, before the access filter of verifyUserPermissions: what
// it may reach.
func (s *Server) takeQuotas(ctx context.Context, workspaceID string, org Scope, req *notificationsv1.AddNotificationsRequest) (giveBack func(), err error) {
	all := req.GetNotifyAll()
	named := make([]string, len(req.GetNotifyUsers()))
	for i, u := range req.GetNotifyUsers() {
		named[i] = u.GetUserId()
	}
	minute, recipients := s.clock.Now().Unix()/60, 0
	if limit := s.quotas.RecipientsPerMinute; limit > 0 {
		recipients = len(named)
		if all {
			members, err := s.countMembers(ctx, org)
			if err != nil {
				return nil, err
			}
			recipients += members
		}
		if recipients > limit {
			s.metrics.refusals.WithLabelValues(quotaRecipients).Inc()
			return nil, apierr.ResourceExhausted("This notification would reach %d recipients; the notifications of a workspace may reach at most %d a minute.", recipients, limit)
		}
		ok, err := s.store.TakeRecipients(ctx, workspaceID, minute, recipients, limit)
		if err != nil {
			return nil, fmt.Errorf("take the fan-out quota: %w", err)
		}
		if !ok {
			s.metrics.refusals.WithLabelValues(quotaRecipients).Inc()
			return nil, apierr.ResourceExhausted("The notifications of this workspace may reach at most %d recipients a minute, and this one (to %d) would pass that. Try again after a minute.", limit, recipients)
		}
	}
	returnRecipients := func(ctx context.Context) {
		if recipients > 0 {
			if err := s.store.ReturnRecipients(ctx, workspaceID, minute, recipients); err != nil {
				s.log.ErrorContext(ctx, "notifications: giving back the fan-out quota", "error", err)
			}
		}
	}
	// Counted whether or not the inbox quota is on, so that the counts hold when it is turned
	// on: every notification added counts (Notification.Counted).
	full, err := s.store.TakeInbox(ctx, org, all, named, s.quotas.InboxSize)
	if err != nil || full != nil {
		returnRecipients(context.WithoutCancel(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("take the inbox quota: %w", err)
	}
	if full != nil {
		s.metrics.refusals.WithLabelValues(quotaInbox).Inc()
		if full.UserID == "" {
			return nil, apierr.ResourceExhausted("The inboxes of organization %s hold %d notifications to everyone, the most an inbox may hold (%d). Delete older notifications (Delete Notifications) to make room.",
				org.OrganizationID, full.Count, s.quotas.InboxSize)
		}
		return nil, apierr.ResourceExhausted("The inbox of user %s in organization %s holds %d notifications, the most an inbox may hold (%d). Delete older notifications (Delete Notifications) to make room.",
			full.UserID, org.OrganizationID, full.Count, s.quotas.InboxSize)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if err := s.store.ReturnInbox(ctx, org, all, named); err != nil {
			s.log.ErrorContext(ctx, "notifications: giving back the inbox quota", "error", err)
		}
		returnRecipients(ctx)
	}, nil
}

// countMembers counts the organization's members: CountMembers, or, from a users service of
// the release before it (a rolling upgrade, docs/operations.md, "Upgrading"), the members paged
// through as the fan-out pages them.
func (s *Server) countMembers(ctx context.Context, org Scope) (int, error) {
	res, err := s.peers.Users.CountMembers(ctx, &usersv1.CountMembersRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID})
	if err == nil {
		return int(res.GetCount()), nil
	}
	if status.Code(err) != codes.Unimplemented {
		return 0, apierr.FromPeer("count members", err)
	}
	n, after := 0, ""
	for {
		page, err := s.peers.Users.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID, After: after, Limit: membersPage})
		if err != nil {
			return 0, apierr.FromPeer("count members", err)
		}
		n += len(page.GetMembers())
		if len(page.GetMembers()) == 0 || !page.GetMore() {
			return n, nil
		}
		after = page.GetMembers()[len(page.GetMembers())-1].GetUserId()
	}
}

// takeCommentQuotas counts a comment notification in the quotas as takeQuotas counts an added
// one, but a comment event has no caller to refuse: a recipient whose inbox is full is left out
// of n (that inbox takes no more), and a workspace past its recipients of the minute is
// RESOURCE_EXHAUSTED, which the outbox retries later
// (docs/comments.md, "Notifications and activity"). giveBack takes back what was counted.
func (s *Server) takeCommentQuotas(ctx context.Context, org Scope, n *Notification) (giveBack func(), err error) {
	var named []string
	for {
		if named = userIDs(n.NotifyUsers); len(named) == 0 {
			return func() {}, nil
		}
		full, err := s.store.TakeInbox(ctx, org, false, named, s.quotas.InboxSize)
		if err != nil {
			return nil, fmt.Errorf("take the inbox quota: %w", err)
		}
		if full == nil {
			break
		}
		s.metrics.refusals.WithLabelValues(quotaInbox).Inc()
		s.log.WarnContext(ctx, "notifications: an inbox is full, a comment notification leaves its user out",
			"organization_id", org.OrganizationID, "user_id", full.UserID, "notification_id", n.ID)
		n.NotifyUsers = slices.DeleteFunc(n.NotifyUsers, func(u User) bool { return u.UserID == full.UserID || full.UserID == "" })
	}
	returnInbox := func(ctx context.Context) {
		if err := s.store.ReturnInbox(ctx, org, false, named); err != nil {
			s.log.ErrorContext(ctx, "notifications: giving back the inbox quota", "error", err)
		}
	}
	minute, limit := s.clock.Now().Unix()/60, s.quotas.RecipientsPerMinute
	if limit > 0 && len(named) > limit {
		// It would never pass: no retry can help.
		returnInbox(context.WithoutCancel(ctx))
		s.metrics.refusals.WithLabelValues(quotaRecipients).Inc()
		s.log.WarnContext(ctx, "notifications: a comment notification reaches more than the recipients of a minute, not sent",
			"organization_id", org.OrganizationID, "notification_id", n.ID, "recipients", len(named), "limit", limit)
		n.NotifyUsers = nil
		return func() {}, nil
	}
	if limit > 0 {
		ok, err := s.store.TakeRecipients(ctx, n.WorkspaceID, minute, len(named), limit)
		if err != nil || !ok {
			returnInbox(context.WithoutCancel(ctx))
		}
		if err != nil {
			return nil, fmt.Errorf("take the fan-out quota: %w", err)
		}
		if !ok {
			s.metrics.refusals.WithLabelValues(quotaRecipients).Inc()
			return nil, apierr.ResourceExhausted("The notifications of workspace %s may reach at most %d recipients a minute: the notification of this comment (to %d) waits for the next minute.",
				n.WorkspaceID, limit, len(named))
		}
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		returnInbox(ctx)
		if limit > 0 {
			if err := s.store.ReturnRecipients(ctx, n.WorkspaceID, minute, len(named)); err != nil {
				s.log.ErrorContext(ctx, "notifications: giving back the fan-out quota", "error", err)
			}
		}
	}, nil
}
