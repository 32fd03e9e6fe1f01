package notifications

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// consumes are the event types the notifications service takes: its own notification.add
// (the fan-out), the comment events that notify (commentEvents), and the lifecycle events its
// records follow.
var consumes = append([]string{eventNotificationAdd, lifecycle.OrganizationDeleted, lifecycle.DocumentDeleted, lifecycle.DocumentMigrated, lifecycle.UsersRemoved},
	commentEvents...)

// Batch sizes of the fan-out.
const (
	membersPage  = 5000
	readersBatch = 10000
	writeBatch   = 1000
	configsBatch = 1000
)

// HandleEvent fans out notification.add and applies the lifecycle events. Idempotent: every
// record the fan-out writes is keyed by what it is about, and a finished fan-out is not run
// again.
func (s *Server) HandleEvent(ctx context.Context, e *lifecyclev1.Event) error {
	_, err := lifecycle.Dispatch(ctx, e, s.lifecycleHandlers())
	return err
}

// lifecycleHandlers are what the service does on each event it consumes.
func (s *Server) lifecycleHandlers() lifecycle.Handlers {
	scopeOf := func(l lifecycle.Scope) Scope {
		return Scope{APIKey: l.APIKey, OrganizationID: l.OrganizationID, OrgGen: l.OrganizationGeneration}
	}
	return lifecycle.Handlers{
		Domain: func(ctx context.Context, d *eventsv1.Event) error {
			if d.GetType() == eventNotificationAdd {
				return s.fanOut(ctx, d)
			}
			if slices.Contains(commentEvents, d.GetType()) {
				return s.notifyComment(ctx, d)
			}
			return nil
		},
		OrganizationDeleted: func(ctx context.Context, l lifecycle.Scope) error {
			return s.store.DeleteOrganization(ctx, scopeOf(l))
		},
		DocumentsDeleted: func(ctx context.Context, l lifecycle.Scope, docs []lifecycle.Incarnation) error {
			for _, d := range docs {
				if err := s.store.DeleteDocument(ctx, scopeOf(l).withDoc(d.ID, d.Generation)); err != nil {
					return err
				}
			}
			return nil
		},
		DocumentMigrated: func(ctx context.Context, l lifecycle.Scope, m lifecycle.Migration) error {
			return s.store.MoveDocument(ctx, scopeOf(l).withDoc(m.From, m.Generation), m.To)
		},
		UsersRemoved: func(ctx context.Context, l lifecycle.Scope, r *lifecyclev1.UsersRemoved) error {
			if r.GetFolderId() != "" && r.GetDocumentId() == "" {
				return nil // a folder's grants: nothing of ours
			}
			scope := scopeOf(l)
			if r.GetDocumentId() != "" {
				scope = scope.withDoc(r.GetDocumentId(), r.GetDocumentGeneration())
			}
			return s.store.RemoveUsers(ctx, scope, r.GetUserIds())
		},
	}
}

// recipient is one resolved recipient.
type recipient struct {
	user     User
	involved bool // named in notifyUsers, of a notification that is not Incidental
}

// fanOut stores the notification, resolves its recipients once, and writes what each one's
// config asks for: an inbox entry, an email, a line of the Slack post.
func (s *Server) fanOut(ctx context.Context, e *eventsv1.Event) error {
	var req notificationsv1.AddNotificationsRequest
	raw, err := protojson.Marshal(e.GetData())
	if err == nil {
		err = protojson.Unmarshal(raw, &req)
	}
	if err != nil {
		return lifecycle.Invalid(lifecycle.Domain(e), "notification in its data")
	}
	org := Scope{APIKey: e.GetApiKey(), OrganizationID: e.GetOrganizationId(), OrgGen: e.GetOrganizationGeneration()}
	doc := org.withDoc(e.GetDocumentId(), e.GetDocumentGeneration())
	n := &Notification{
		APIKey: org.APIKey, OrganizationID: org.OrganizationID, OrgGen: org.OrgGen, ID: req.GetNotificationId(),
		DocumentID: doc.DocumentID, DocGen: doc.DocGen, WorkspaceID: e.GetWorkspaceId(),
		ActionUser:       userOf(req.GetActionUser()),
		HeadlineTemplate: req.GetDisplayHeadlineMessageTemplate(), Body: req.GetDisplayBodyMessage(),
		HeadlineData:  jsonOf(req.GetDisplayHeadlineMessageTemplateData(), req.DisplayHeadlineMessageTemplateData == nil),
		Source:        req.GetNotificationSource(),
		SourceData:    jsonOf(req.GetNotificationSourceData(), req.NotificationSourceData == nil),
		ContextAccess: jsonOf(req.GetContext().GetAccess(), req.GetContext().GetAccess() == nil),
		ResolverUsed:  req.GetIsNotificationResolverUsed(), NotifyAll: req.GetNotifyAll(), VerifyAccess: req.GetVerifyUserPermissions(),
		Timestamp: int64(e.GetTimestamp()),
		// Add Notifications counted it in the inbox quota before publishing (takeQuotas).
		Counted: true,
	}
	for _, u := range req.GetNotifyUsers() {
		n.NotifyUsers = append(n.NotifyUsers, userOf(u))
	}
	// The organization (or document) may have gone since the event was published: then the
	// notification goes with it, unsent.
	if gone, err := s.gone(ctx, org, doc); err != nil || gone {
		return err
	}
	n, _, err = s.addOrResume(ctx, org, n)
	if err != nil || n == nil {
		return err
	}
	return s.fanOutStored(ctx, n, org, doc)
}

// addOrResume stores n, or, when its id is taken (a redelivery of its event), returns the
// stored notification to finish its fan-out: nil when that fan-out is done. added reports
// whether this call stored it.
func (s *Server) addOrResume(ctx context.Context, org Scope, n *Notification) (_ *Notification, added bool, err error) {
	err = s.store.AddNotification(ctx, n)
	if err == nil {
		return n, true, nil
	}
	if !errors.Is(err, ErrExists) {
		return nil, false, err
	}
	stored, err := s.store.Notification(ctx, org, n.ID)
	if err != nil {
		return nil, false, err
	}
	if stored.FannedOut {
		return nil, false, nil // delivered before
	}
	return stored, false, nil
}

// fanOutStored resolves the recipients of a stored notification once, writes what each one's
// config asks for, records the fan-out as done, and drops it all when the organization or
// document went meanwhile.
func (s *Server) fanOutStored(ctx context.Context, n *Notification, org, doc Scope) error {
	recipients, err := s.recipients(ctx, n)
	if status.Code(err) == codes.NotFound {
		return nil // the organization or document went meanwhile: its deletion removes the record
	}
	if err != nil {
		return err
	}
	if err := s.deliver(ctx, n, doc, recipients); err != nil {
		return err
	}
	ids := make([]string, len(recipients))
	for i, r := range recipients {
		ids[i] = r.user.UserID
	}
	if err := s.store.FinishFanOut(ctx, org, n.ID, ids); err != nil {
		return err
	}
	// Confirmed after writing: a deletion that came meanwhile may have run before our writes,
	// so what they left under its generation goes now, queued mail included.
	if gone, err := s.gone(ctx, org, doc); err != nil {
		return err
	} else if gone {
		if doc.DocGen != "" {
			return s.store.DeleteDocument(ctx, doc)
		}
		return s.store.DeleteOrganization(ctx, org)
	}
	s.wakeWorker()
	return nil
}

// gone reports whether the organization's (or, when it has one, the document's) generation is
// no longer the current one.
func (s *Server) gone(ctx context.Context, org, doc Scope) (bool, error) {
	req := &documentsv1.ResolveResourcesRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID}
	if doc.DocumentID != "" {
		req.DocumentIds = []string{doc.DocumentID}
	}
	res, err := s.peers.Documents.ResolveResources(ctx, req)
	if err != nil {
		return false, fmt.Errorf("resolve %s: %w", org.OrganizationID, err)
	}
	if !res.GetOrganizationExists() || res.GetOrganizationGeneration() != org.OrgGen {
		return true, nil
	}
	if doc.DocGen != "" {
		d := res.GetDocuments()[doc.DocumentID]
		return !d.GetExists() || d.GetGeneration() != doc.DocGen, nil
	}
	return false, nil
}

func userOf(u *notificationsv1.NotificationUser) User {
	return User{UserID: u.GetUserId(), Name: u.GetName(), Email: u.GetEmail()}
}

// fillFrom takes a directory entry's name and email where the caller named the user without
// them: the caller's words win.
func (u *User) fillFrom(m *usersv1.UserInfo) {
	if u.Name == "" {
		u.Name = m.GetName()
	}
	if u.Email == "" {
		u.Email = m.GetEmail()
	}
}

// recipients are the named users, then (notifyAll) every member of the organization, without
// the acting user, (verifyUserPermissions) only those who can read the document, and (a
// context) only those whose access context grants it.
func (s *Server) recipients(ctx context.Context, n *Notification) ([]recipient, error) {
	var out []recipient
	index := map[string]int{}
	for _, u := range n.NotifyUsers {
		index[u.UserID] = len(out)
		out = append(out, recipient{user: u, involved: !n.Incidental})
	}
	var err error
	if n.NotifyAll {
		out, err = s.addMembers(ctx, n, out, index)
	} else {
		err = s.fillNamed(ctx, n, out, index)
	}
	if err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, func(r recipient) bool { return r.user.UserID == n.ActionUser.UserID })
	if n.VerifyAccess && len(out) > 0 {
		if out, err = s.readersAmong(ctx, n, out); err != nil {
			return nil, err
		}
	}
	if access := contextOf(n); access != nil && len(out) > 0 {
		return s.grantedByContext(ctx, n, access, out)
	}
	return out, nil
}

// addMembers adds every member of the organization to the recipients (index: their positions
// by user id), page by page; a named user who is a member gets the directory's name and email
// where the caller gave none.
func (s *Server) addMembers(ctx context.Context, n *Notification, out []recipient, index map[string]int) ([]recipient, error) {
	after := ""
	for {
		page, err := s.peers.Users.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: n.APIKey, OrganizationId: n.OrganizationID, After: after, Limit: membersPage})
		if err != nil {
			return nil, fmt.Errorf("list members: %w", err)
		}
		for _, m := range page.GetMembers() {
			if i, ok := index[m.GetUserId()]; ok {
				out[i].user.fillFrom(m)
				continue
			}
			index[m.GetUserId()] = len(out)
			out = append(out, recipient{user: User{UserID: m.GetUserId(), Name: m.GetName(), Email: m.GetEmail()}})
		}
		if len(page.GetMembers()) == 0 || !page.GetMore() {
			return out, nil // an empty page cannot move the position on
		}
		after = page.GetMembers()[len(page.GetMembers())-1].GetUserId()
	}
}

// fillNamed looks up the named users the caller gave no name or address for: the directory
// fills the gaps.
func (s *Server) fillNamed(ctx context.Context, n *Notification, out []recipient, index map[string]int) error {
	var missing []string
	for _, r := range out {
		if r.user.Email == "" || r.user.Name == "" {
			missing = append(missing, r.user.UserID)
		}
	}
	for start := 0; start < len(missing); start += membersPage {
		page, err := s.peers.Users.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: n.APIKey, OrganizationId: n.OrganizationID,
			UserIds: missing[start:min(start+membersPage, len(missing))]})
		if err != nil {
			return fmt.Errorf("look up named users: %w", err)
		}
		for _, m := range page.GetMembers() {
			if i, ok := index[m.GetUserId()]; ok {
				out[i].user.fillFrom(m)
			}
		}
	}
	return nil
}

// readersAmong keeps the recipients who can read the notification's document
// (verifyUserPermissions), asking the access service in batches.
func (s *Server) readersAmong(ctx context.Context, n *Notification, out []recipient) ([]recipient, error) {
	return keepAllowed(out, readersBatch, func(userIDs []string) ([]string, error) {
		res, err := s.peers.Access.FilterReaders(ctx, &accessv1.FilterReadersRequest{ApiKey: n.APIKey, OrganizationId: n.OrganizationID, DocumentId: n.DocumentID, UserIds: userIDs})
		if err != nil {
			return nil, fmt.Errorf("filter readers: %w", err)
		}
		return res.GetUserIds(), nil
	})
}

// keepAllowed keeps the recipients allowed answers for: it asks about batch recipients at a
// time (the peer's bound) and keeps those whose ids any answer named.
func keepAllowed(out []recipient, batch int, allowed func(userIDs []string) ([]string, error)) ([]recipient, error) {
	keep := make(map[string]bool, len(out))
	for start := 0; start < len(out); start += batch {
		part := out[start:min(start+batch, len(out))]
		userIDs := make([]string, len(part))
		for i, r := range part {
			userIDs[i] = r.user.UserID
		}
		ids, err := allowed(userIDs)
		if err != nil {
			return nil, err
		}
		for _, u := range ids {
			keep[u] = true
		}
	}
	return slices.DeleteFunc(out, func(r recipient) bool { return !keep[r.user.UserID] }), nil
}

func allows(v string, involved bool) bool { return v == All || v == Mine && involved }

// deliver writes the inbox entries and queues the emails and the Slack post the recipients'
// configs ask for. A notification whose content the caller's resolver supplies goes to inboxes
// only: the record holds no text and no addresses to send. Entries and emails refer to the
// notification, whose content is rendered for each reader when read or sent (issue 20): a
// notification to 10,000 users stores its content once.
func (s *Server) deliver(ctx context.Context, n *Notification, doc Scope, recipients []recipient) error {
	var (
		entries    []*InboxEntry
		mails      []*Delivery
		slackNames []string
	)
	created := now(s.clock)
	for start := 0; start < len(recipients); start += configsBatch {
		batch := recipients[start:min(start+configsBatch, len(recipients))]
		userIDs := make([]string, len(batch))
		for i, r := range batch {
			userIDs[i] = r.user.UserID
		}
		configs, err := s.store.Configs(ctx, doc, userIDs)
		if err != nil {
			return fmt.Errorf("read configs: %w", err)
		}
		for _, r := range batch {
			cfg, ok := configs[r.user.UserID]
			if !ok {
				cfg = defaultConfig
			}
			if allows(cfg.Inbox, r.involved) {
				entries = append(entries, &InboxEntry{
					APIKey: n.APIKey, OrganizationID: n.OrganizationID, OrgGen: n.OrgGen, UserID: r.user.UserID, NotificationID: n.ID,
					DocumentID: n.DocumentID, Timestamp: n.Timestamp,
				})
			}
			if n.ResolverUsed {
				continue
			}
			if allows(cfg.Email, r.involved) && r.user.Email != "" {
				mails = append(mails, &Delivery{
					ID: deliveryID(n, r.user.UserID, ChannelEmail), APIKey: n.APIKey, WorkspaceID: n.WorkspaceID, OrganizationID: n.OrganizationID,
					OrgGen: n.OrgGen, NotificationID: n.ID, DocumentID: n.DocumentID, UserID: r.user.UserID, Channel: ChannelEmail,
					To: r.user.Email, Name: r.user.Name,
					State: StatePending, NextAttempt: created, CreatedAt: created,
				})
			}
			if allows(cfg.Slack, r.involved) {
				name := r.user.Name
				if name == "" {
					name = r.user.UserID
				}
				slackNames = append(slackNames, name)
			}
		}
	}
	for start := 0; start < len(entries); start += writeBatch {
		if err := s.store.AddInboxEntries(ctx, entries[start:min(start+writeBatch, len(entries))]); err != nil {
			return fmt.Errorf("write inbox entries: %w", err)
		}
	}
	for start := 0; start < len(mails); start += writeBatch {
		if err := s.store.QueueDeliveries(ctx, mails[start:min(start+writeBatch, len(mails))]); err != nil {
			return fmt.Errorf("queue emails: %w", err)
		}
	}
	if len(slackNames) == 0 {
		return nil
	}
	hook, err := s.peers.Workspace.GetSlackWebhook(ctx, &workspacev1.GetSlackWebhookRequest{WorkspaceId: n.WorkspaceID})
	if err != nil {
		return fmt.Errorf("slack webhook: %w", err)
	}
	if hook.GetUrl() == "" {
		return nil // no Slack for this workspace
	}
	headline := render(n.HeadlineTemplate, headlineValues(n, User{Name: strings.Join(slackNames, ", ")}))
	msg, err := slackMessage(headline, n.Body, slackNames)
	if err != nil {
		return fmt.Errorf("slack message: %w", err)
	}
	return s.store.QueueDeliveries(ctx, []*Delivery{{
		ID: deliveryID(n, "", ChannelSlack), APIKey: n.APIKey, WorkspaceID: n.WorkspaceID, OrganizationID: n.OrganizationID,
		OrgGen: n.OrgGen, NotificationID: n.ID, Channel: ChannelSlack, Text: msg,
		State: StatePending, NextAttempt: created, CreatedAt: created,
	}})
}

// deliveryID names what a delivery delivers, so queueing it twice stores it once.
func deliveryID(n *Notification, userID, channel string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{n.APIKey, n.OrganizationID, n.OrgGen, n.ID, userID, channel}, "\x1f")))
	return "dlv_" + hex.EncodeToString(sum[:16])
}
