package notifications

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/outbox"
)

const statusSuccess = "success"

// Messages the caller sees (docs/api.md, "Notifications").
const (
	msgConfigFetched   = "User config fetched successfully."
	msgConfigSet       = "User config set successfully."
	msgAdded           = "Notification added successfully."
	msgExists          = "A notification with this id already exists."
	msgRetrieved       = "Notifications retrieved successfully."
	msgUpdated         = "Notifications updated successfully."
	msgDeleted         = "Notifications deleted successfully."
	msgItemUpdated     = "Notification updated."
	msgItemDeleted     = "Notification deleted."
	msgItemMissing     = "Notification does not exist."
	msgOrgMissing      = "Organization does not exist."
	msgDocMissing      = "Document does not exist."
	msgUserMissing     = "User does not exist."
	msgFeatureDisabled = "Notifications are not enabled for this workspace. Turn them on with Update Workspace Settings (notifications)."
)

// eventNotificationAdd is the type of the event Add Notifications publishes: the service's
// own handler fans it out, then the other consumers (webhooks) get it.
const eventNotificationAdd = "notification.add"

// Publisher stores an event durably and relays it (*outbox.Outbox); PublishAsync leaves the
// delivery to the relay. ErrDuplicate for an id stored before.
type Publisher interface {
	PublishAsync(ctx context.Context, e *lifecyclev1.Event) (*outbox.Record, error)
}

var (
	_ notificationsv1.NotificationsServiceServer = (*Server)(nil)
	_ lifecycle.Handler                          = (*Server)(nil)
	_ Publisher                                  = (*outbox.Outbox)(nil)
)

// Peers are the services the notifications service calls.
type Peers struct {
	Documents documentsv1.DocumentsServiceClient
	Users     usersv1.UsersServiceClient
	Access    accessv1.AccessServiceClient
	Workspace workspacev1.WorkspaceServiceClient
}

// Server implements the notifications service, fans notifications out and delivers them.
type Server struct {
	notificationsv1.UnimplementedNotificationsServiceServer

	store  Store
	peers  Peers
	events Publisher
	mail   email.Sender
	http   *http.Client
	pages  *cursor.Sealer
	clock  clock.Clock
	log    *slog.Logger

	wake    chan struct{} // the delivery worker
	metrics *sendMetrics
	quotas  Quotas
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option       { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option     { return func(s *Server) { s.log = l } }
func WithHTTPClient(c *http.Client) Option { return func(s *Server) { s.http = c } }

// WithSlackPrivateTargets lets the Slack webhook be a loopback, private or link-local address
// (local runs, tests); without it such addresses are refused when dialled (internal/egress).
func WithSlackPrivateTargets(allow bool) Option {
	return func(s *Server) { s.http = egress.Client(allow, sendTimeout, 4) }
}
func WithMail(m email.Sender) Option { return func(s *Server) { s.mail = m } }

// New returns a Server on store. secret keys the page tokens.
func New(store Store, peers Peers, events Publisher, secret []byte, opts ...Option) (*Server, error) {
	if store == nil || events == nil || peers.Documents == nil || peers.Users == nil || peers.Access == nil || peers.Workspace == nil {
		return nil, errors.New("notifications: a store, an outbox and every peer are required")
	}
	s := &Server{store: store, peers: peers, events: events, http: egress.Client(false, sendTimeout, 4), clock: clock.Real(), log: slog.Default(), wake: make(chan struct{}, 1), metrics: newSendMetrics(), quotas: DefaultQuotas}
	for _, o := range opts {
		o(s)
	}
	if s.mail == nil {
		s.mail = email.Log{Logger: s.log}
	}
	key, err := cursor.DeriveKey(secret, "notifications.list")
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

// caller returns the key-level caller of a notification config operation, refusing while the
// workspace's notifications switch is off: the spec puts the console switch on Get and Set
// Notification Config only (docs/api.md, "Notifications"); adding, reading, updating and
// deleting notifications work whatever it says.
func caller(ctx context.Context) (authn.Caller, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return c, err
	}
	if !c.Settings.Notifications {
		return c, apierr.FailedPrecondition(msgFeatureDisabled)
	}
	return c, nil
}

// resolve returns the scope of an organization and, when doc is set, a document, under their
// current generations: NOT_FOUND for an unknown organization; an unknown document has the
// empty generation.
func (s *Server) resolve(ctx context.Context, apiKey, org string, docs ...string) (Scope, map[string]string, error) {
	res, err := s.peers.Documents.ResolveResources(ctx, &documentsv1.ResolveResourcesRequest{ApiKey: apiKey, OrganizationId: org, DocumentIds: docs})
	if err != nil {
		return Scope{}, nil, fmt.Errorf("resolve %s: %w", org, err)
	}
	if !res.GetOrganizationExists() {
		return Scope{}, nil, apierr.NotFound(msgOrgMissing)
	}
	gens := map[string]string{}
	for _, d := range docs {
		if r := res.GetDocuments()[d]; r.GetExists() {
			gens[d] = r.GetGeneration()
		} else {
			gens[d] = ""
		}
	}
	return Scope{APIKey: apiKey, OrganizationID: org, OrgGen: res.GetOrganizationGeneration()}, gens, nil
}

// documentsExist refuses a config operation on a document the documents service does not know
// (resolve gives it the empty generation): its settings would be kept for nothing and read
// back as if it were there.
func documentsExist(docs []string, gens map[string]string) error {
	for _, d := range docs {
		if gens[d] == "" {
			return apierr.NotFound(msgDocMissing)
		}
	}
	return nil
}

// members returns those of userIDs who are members of the organization (the users service's
// MembersAmong: one indexed read of the users named), or, from a users service of the release
// before it (a rolling upgrade, docs/operations.md, "Upgrading"), ListMembers of those users.
// A config belongs to a member: Get Notification Config of anyone else is NOT_FOUND, and Set
// answers success: false for them (docs/api.md, "Notifications").
func (s *Server) members(ctx context.Context, org Scope, userIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(userIDs))
	res, err := s.peers.Users.MembersAmong(ctx, &usersv1.MembersAmongRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID, UserIds: userIDs})
	if err == nil {
		for _, u := range res.GetUserIds() {
			out[u] = true
		}
		return out, nil
	}
	if status.Code(err) != codes.Unimplemented {
		return nil, apierr.FromPeer("members among", err)
	}
	page, err := s.peers.Users.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID, UserIds: userIDs})
	if err != nil {
		return nil, apierr.FromPeer("members among", err)
	}
	for _, m := range page.GetMembers() {
		out[m.GetUserId()] = true
	}
	return out, nil
}

func (o Scope) withDoc(doc, gen string) Scope {
	o.DocumentID, o.DocGen = doc, gen
	return o
}

// ---- Config ----

func (s *Server) GetNotificationConfig(ctx context.Context, req *notificationsv1.GetNotificationConfigRequest) (*notificationsv1.GetNotificationConfigResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	docs, err := checkGetConfig(req)
	if err != nil {
		return nil, err
	}
	org, gens, err := s.resolve(ctx, c.APIKey, req.GetOrganizationId(), docs...)
	if err != nil {
		return nil, err
	}
	if err := documentsExist(docs, gens); err != nil {
		return nil, err
	}
	if member, err := s.members(ctx, org, []string{req.GetUserId()}); err != nil {
		return nil, err
	} else if !member[req.GetUserId()] {
		return nil, apierr.NotFound(msgUserMissing)
	}
	out := &notificationsv1.GetNotificationConfigResponse{Status: statusSuccess, Message: msgConfigFetched, Data: []*notificationsv1.DocumentConfig{}}
	for _, d := range docs {
		got, err := s.store.Configs(ctx, org.withDoc(d, gens[d]), []string{req.GetUserId()})
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		cfg, ok := got[req.GetUserId()]
		if !ok {
			cfg = defaultConfig
		}
		out.Data = append(out.Data, &notificationsv1.DocumentConfig{
			Config:   &notificationsv1.ConfigValues{Inbox: cfg.Inbox, Email: cfg.Email},
			Metadata: &notificationsv1.ConfigMetadata{OrganizationId: org.OrganizationID, ApiKey: c.APIKey, DocumentId: d, UserId: req.GetUserId()},
		})
	}
	return out, nil
}

func (s *Server) SetNotificationConfig(ctx context.Context, req *notificationsv1.SetNotificationConfigRequest) (*notificationsv1.SetNotificationConfigResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	docs, users, cfg, err := checkSetConfig(req)
	if err != nil {
		return nil, err
	}
	org, gens, err := s.resolve(ctx, c.APIKey, req.GetOrganizationId(), docs...)
	if err != nil {
		return nil, err
	}
	if err := documentsExist(docs, gens); err != nil {
		return nil, err
	}
	member, err := s.members(ctx, org, users)
	if err != nil {
		return nil, err
	}
	var members []string
	data := map[string]*notificationsv1.ConfigResult{}
	for _, u := range users {
		r := &notificationsv1.ConfigResult{UserId: u, DocumentId: strings.Join(docs, ","), Message: msgUserMissing}
		if member[u] {
			members = append(members, u)
			r.Success, r.Message = true, msgConfigSet
		}
		data[u] = r
	}
	scopes := make([]Scope, len(docs))
	for i, d := range docs {
		scopes[i] = org.withDoc(d, gens[d])
	}
	if len(members) > 0 {
		if err := s.store.SetConfigs(ctx, scopes, members, cfg); err != nil {
			return nil, fmt.Errorf("set config: %w", err)
		}
		gone, err := s.membersGone(ctx, scopes, members)
		if err != nil {
			return nil, err
		}
		for _, u := range gone {
			data[u].Success, data[u].Message = false, msgUserMissing
		}
	}
	return &notificationsv1.SetNotificationConfigResponse{Status: statusSuccess, Message: msgConfigSet, Data: data}, nil
}

// membersGone runs after configs of members are written: a user removed from the organization
// meanwhile may have had their records removed (users.removed) before the configs landed, so
// theirs go again, and they are answered as if the removal had come first. It returns them.
func (s *Server) membersGone(ctx context.Context, scopes []Scope, members []string) ([]string, error) {
	still, err := s.members(ctx, scopes[0], members)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, u := range members {
		if !still[u] {
			gone = append(gone, u)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	tidy := context.WithoutCancel(ctx)
	for _, doc := range scopes {
		if err := s.store.RemoveUsers(tidy, doc, gone); err != nil {
			return nil, fmt.Errorf("remove configs of removed users: %w", err)
		}
	}
	return gone, nil
}

// ---- Add ----

// AddNotifications checks the notification, makes the organization and document when asked,
// counts it in the fan-out quotas (takeQuotas: RESOURCE_EXHAUSTED past one, nothing counted or
// stored) and stores its notification.add event: the one write of the notification, whose
// counts are given back when it fails. The service's own handler of the event resolves the
// recipients and fans it out, so the answer does not wait for them.
func (s *Server) AddNotifications(ctx context.Context, req *notificationsv1.AddNotificationsRequest) (*notificationsv1.AddNotificationsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkAdd(req); err != nil {
		return nil, err
	}
	gens, err := s.peers.Documents.EnsureResources(ctx, &documentsv1.EnsureResourcesRequest{
		ApiKey: c.APIKey, OrganizationId: req.GetOrganizationId(), CreateOrganization: req.GetCreateOrganization(),
		DocumentId: req.GetDocumentId(), CreateDocument: req.GetCreateDocument(),
	})
	if err != nil {
		return nil, err
	}
	n := proto.Clone(req).(*notificationsv1.AddNotificationsRequest)
	n.CreateOrganization, n.CreateDocument = false, false
	if n.NotificationId == "" {
		n.NotificationId = "ntf_" + ids.Random(24)
	}
	if n.NotifyAll == nil {
		n.NotifyAll = proto.Bool(true)
	}
	if n.GetIsNotificationResolverUsed() {
		stripPersonalData(n)
	}
	data, err := toStruct(n)
	if err != nil {
		return nil, err
	}
	org := Scope{APIKey: c.APIKey, OrganizationID: n.GetOrganizationId(), OrgGen: gens.GetOrganizationGeneration()}
	giveBack, err := s.takeQuotas(ctx, c.WorkspaceID, org, n)
	if err != nil {
		return nil, err
	}
	e := &eventsv1.Event{
		Id: n.GetNotificationId(), Type: eventNotificationAdd, WorkspaceId: c.WorkspaceID, ApiKey: c.APIKey,
		OrganizationId: n.GetOrganizationId(), DocumentId: n.GetDocumentId(),
		ActionUser: &eventsv1.ActionUser{UserId: n.GetActionUser().GetUserId(), Name: n.GetActionUser().GetName(), Email: n.GetActionUser().GetEmail()},
		Timestamp:  float64(s.clock.Now().UnixMilli()), TargetEntityId: n.GetNotificationId(), Data: data,
		OrganizationGeneration: gens.GetOrganizationGeneration(), DocumentGeneration: gens.GetDocumentGeneration(),
	}
	env := lifecycle.Domain(e)
	// Notification ids are unique per organization.
	env.Id = lifecycle.DomainKey(c.APIKey, "notification\x1f"+n.GetOrganizationId()+"\x1f"+n.GetNotificationId())
	resp := &notificationsv1.AddNotificationsResponse{Status: statusSuccess, Message: msgAdded,
		Data: &notificationsv1.AddResult{Success: true, Message: msgAdded, NotificationId: n.GetNotificationId()}}
	if _, err := s.events.PublishAsync(ctx, env); err != nil {
		giveBack() // not added: it counts for nothing
		if errors.Is(err, outbox.ErrDuplicate) {
			resp.Data.Success, resp.Data.Message = false, msgExists
			return resp, nil
		}
		return nil, fmt.Errorf("add notification: %w", err)
	}
	return resp, nil
}

// stripPersonalData leaves ids only: the caller's resolver supplies names, emails and text at
// read time.
func stripPersonalData(n *notificationsv1.AddNotificationsRequest) {
	n.ActionUser = &notificationsv1.NotificationUser{UserId: n.GetActionUser().GetUserId()}
	for i, u := range n.GetNotifyUsers() {
		n.NotifyUsers[i] = &notificationsv1.NotificationUser{UserId: u.GetUserId()}
	}
	n.DisplayHeadlineMessageTemplate, n.DisplayBodyMessage, n.DisplayHeadlineMessageTemplateData = "", "", nil
}

func toStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("notification as JSON: %w", err)
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("notification as JSON: %w", err)
	}
	return st, nil
}

func jsonOf(m proto.Message, isNil bool) string {
	if isNil {
		return ""
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}

// ---- Read and change ----

type tokenPosition struct {
	Timestamp int64  `json:"t"`
	ID        string `json:"i"`
}

func (s *Server) GetNotifications(ctx context.Context, req *notificationsv1.GetNotificationsRequest) (*notificationsv1.GetNotificationsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	l, err := checkGet(req)
	if err != nil {
		return nil, err
	}
	org, _, err := s.resolve(ctx, c.APIKey, l.org)
	if err != nil {
		return nil, err
	}
	resp := &notificationsv1.GetNotificationsResponse{Status: statusSuccess, Message: msgRetrieved, Data: []*notificationsv1.Notification{}}
	if len(l.ids) > 0 {
		return resp, s.byIDs(ctx, org, l, resp)
	}
	scope := l.scope(c.APIKey)
	var after *Position
	if tok := req.GetPageToken(); tok != "" {
		var p tokenPosition
		if err := s.pages.Open(tok, scope, &p); err != nil {
			return nil, cursor.Refusal("pageToken", err)
		}
		after = &Position{Timestamp: p.Timestamp, ID: p.ID}
	}
	page := s.inboxPage
	if l.user == "" {
		page = s.listingPage
	}
	last, more, err := page(ctx, org, l, after, resp)
	if err != nil {
		return nil, err
	}
	if more && last != nil {
		tok, err := s.pages.Seal(scope, tokenPosition{Timestamp: last.Timestamp, ID: last.ID})
		if err != nil {
			return nil, fmt.Errorf("seal page token: %w", err)
		}
		resp.PageToken = &tok
	}
	return resp, nil
}

// inboxPage appends a page of the user's inbox after a position to resp, each notification
// with the user's headline and read flag, and returns the position of its last entry and
// whether more follow.
func (s *Server) inboxPage(ctx context.Context, org Scope, l *listing, after *Position, resp *notificationsv1.GetNotificationsResponse) (*Position, bool, error) {
	entries, err := s.store.Inbox(ctx, org, l.user, after, l.desc, l.size+1)
	if err != nil {
		return nil, false, fmt.Errorf("read inbox: %w", err)
	}
	more := len(entries) > l.size
	if more {
		entries = entries[:l.size]
	}
	nids := make([]string, len(entries))
	for i, e := range entries {
		nids[i] = e.NotificationID
	}
	ns, err := s.store.Notifications(ctx, org, nids)
	if err != nil {
		return nil, false, fmt.Errorf("read notifications: %w", err)
	}
	if err := s.dropHidden(ctx, org, l.user, ns); err != nil {
		return nil, false, err
	}
	headline, err := s.headlines(ctx, org, l.user, ns)
	if err != nil {
		return nil, false, err
	}
	var last *Position
	for _, e := range entries {
		// An entry shows once its notification's fan-out is done: until then the
		// notification's recipients (notifyUserIds) are not known.
		if n, ok := ns[e.NotificationID]; ok && n.FannedOut {
			m := toProto(n)
			m.Read, m.DisplayHeadlineMessage = proto.Bool(e.Read), proto.String(headline(n))
			resp.Data = append(resp.Data, m)
		}
		last = &Position{Timestamp: e.Timestamp, ID: e.NotificationID}
	}
	return last, more, nil
}

// listingPage appends a page of the organization's (or a document's) notifications after a
// position to resp, and returns the position of its last one and whether more follow.
func (s *Server) listingPage(ctx context.Context, org Scope, l *listing, after *Position, resp *notificationsv1.GetNotificationsResponse) (*Position, bool, error) {
	ns, err := s.store.ListNotifications(ctx, org, Listing{DocumentID: l.doc}, after, l.desc, l.size+1)
	if err != nil {
		return nil, false, fmt.Errorf("list notifications: %w", err)
	}
	more := len(ns) > l.size
	if more {
		ns = ns[:l.size]
	}
	if err := s.appendWithReaders(ctx, org, ns, resp); err != nil {
		return nil, false, err
	}
	if len(ns) == 0 {
		return nil, more, nil
	}
	return &Position{Timestamp: ns[len(ns)-1].Timestamp, ID: ns[len(ns)-1].ID}, more, nil
}

// byIDs answers notificationIds: the notifications that exist, in the order asked; with a
// userId, that user's headline and read flag, and only notifications in their inbox.
func (s *Server) byIDs(ctx context.Context, org Scope, l *listing, resp *notificationsv1.GetNotificationsResponse) error {
	ns, err := s.store.Notifications(ctx, org, l.ids)
	if err != nil {
		return fmt.Errorf("read notifications: %w", err)
	}
	if l.user != "" {
		entries, err := s.store.InboxEntries(ctx, org, l.user, l.ids)
		if err != nil {
			return fmt.Errorf("read inbox: %w", err)
		}
		inInbox := map[string]*Notification{}
		for id, n := range ns {
			if entries[id] != nil {
				inInbox[id] = n
			}
		}
		if err := s.dropHidden(ctx, org, l.user, inInbox); err != nil {
			return err
		}
		headline, err := s.headlines(ctx, org, l.user, inInbox)
		if err != nil {
			return err
		}
		for _, id := range l.ids {
			n, e := inInbox[id], entries[id]
			if n == nil {
				continue
			}
			m := toProto(n)
			m.Read, m.DisplayHeadlineMessage = proto.Bool(e.Read), proto.String(headline(n))
			resp.Data = append(resp.Data, m)
		}
		return nil
	}
	var list []*Notification
	for _, id := range l.ids {
		if n := ns[id]; n != nil {
			list = append(list, n)
		}
	}
	return s.appendWithReaders(ctx, org, list, resp)
}

// dropHidden takes out of ns, a reader's inbox, the notifications whose context the reader's
// access context does not grant now (hiddenByContext).
func (s *Server) dropHidden(ctx context.Context, org Scope, userID string, ns map[string]*Notification) error {
	hidden, err := s.hiddenByContext(ctx, org, userID, ns)
	if err != nil {
		return err
	}
	for id := range hidden {
		delete(ns, id)
	}
	return nil
}

// headlines returns the headline of each of ns as the reader userID reads it, rendered now
// (issue 20: the content is stored once). It asks the users service for the reader's name and
// email once, and only when a headline names its reader and the caller did not name them in
// full; a reader the contact list does not have is named by the caller's words, else their id.
func (s *Server) headlines(ctx context.Context, org Scope, userID string, ns map[string]*Notification) (func(*Notification) string, error) {
	hs := make(map[*Notification]*headliner, len(ns))
	block := make([]headliner, len(ns))
	vars := map[string][][]int{} // a template's variables, found once per template
	lookup := false
	for _, n := range ns {
		v, ok := vars[n.HeadlineTemplate]
		if !ok {
			v = variable.FindAllStringSubmatchIndex(n.HeadlineTemplate, -1)
			vars[n.HeadlineTemplate] = v
		}
		h := &block[len(hs)]
		h.init(n, v)
		hs[n] = h
		lookup = lookup || h.needsDirectory(userID)
	}
	dir := User{UserID: userID}
	if lookup {
		res, err := s.peers.Users.ListMembers(ctx, &usersv1.ListMembersRequest{ApiKey: org.APIKey, OrganizationId: org.OrganizationID, UserIds: []string{userID}})
		switch {
		case status.Code(err) == codes.NotFound: // the organization went meanwhile
		case err != nil:
			return nil, fmt.Errorf("look up the reader: %w", err)
		default:
			for _, m := range res.GetMembers() {
				if m.GetUserId() == userID {
					dir.Name, dir.Email = m.GetName(), m.GetEmail()
				}
			}
		}
	}
	return func(n *Notification) string {
		h := hs[n]
		return h.For(h.readerAs(dir))
	}, nil
}

func (s *Server) appendWithReaders(ctx context.Context, org Scope, ns []*Notification, resp *notificationsv1.GetNotificationsResponse) error {
	nids := make([]string, len(ns))
	for i, n := range ns {
		nids[i] = n.ID
	}
	readers, err := s.store.ReadBy(ctx, org, nids)
	if err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	for _, n := range ns {
		m := toProto(n)
		m.ReadByUserIds = append([]string{}, readers[n.ID]...)
		resp.Data = append(resp.Data, m)
	}
	return nil
}

func (s *Server) UpdateNotifications(ctx context.Context, req *notificationsv1.UpdateNotificationsRequest) (*notificationsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUpdate(req); err != nil {
		return nil, err
	}
	org, _, err := s.resolve(ctx, c.APIKey, req.GetOrganizationId())
	if err != nil {
		return nil, err
	}
	data := map[string]*notificationsv1.ItemResult{}
	for _, u := range req.GetNotifications() {
		if _, err := s.store.Notification(ctx, org, u.GetId()); errors.Is(err, ErrNotFound) {
			data[u.GetId()] = &notificationsv1.ItemResult{Message: msgItemMissing}
			continue
		} else if err != nil {
			return nil, fmt.Errorf("update notification: %w", err)
		}
		for _, change := range []struct {
			users []string
			read  bool
		}{{u.GetReadByUserIds(), true}, {u.GetUnreadByUserIds(), false}} {
			if len(change.users) == 0 {
				continue
			}
			if _, err := s.store.SetRead(ctx, org, u.GetId(), change.users, change.read); err != nil {
				return nil, fmt.Errorf("update notification: %w", err)
			}
		}
		data[u.GetId()] = &notificationsv1.ItemResult{Success: true, Message: msgItemUpdated}
	}
	return &notificationsv1.ItemResultsResponse{Status: statusSuccess, Message: msgUpdated, Data: data}, nil
}

func (s *Server) DeleteNotifications(ctx context.Context, req *notificationsv1.DeleteNotificationsRequest) (*notificationsv1.ItemResultsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	nids, err := checkDelete(req)
	if err != nil {
		return nil, err
	}
	org, _, err := s.resolve(ctx, c.APIKey, req.GetOrganizationId())
	if err != nil {
		return nil, err
	}
	deleted, err := s.store.DeleteNotifications(ctx, org, nids)
	if err != nil {
		return nil, fmt.Errorf("delete notifications: %w", err)
	}
	data := map[string]*notificationsv1.ItemResult{}
	for _, id := range nids {
		data[id] = &notificationsv1.ItemResult{Message: msgItemMissing}
	}
	for _, id := range deleted {
		data[id] = &notificationsv1.ItemResult{Success: true, Message: msgItemDeleted}
	}
	return &notificationsv1.ItemResultsResponse{Status: statusSuccess, Message: msgDeleted, Data: data}, nil
}

// toProto is a notification as callers see it. n is the caller's copy (the stores copy records
// out), so the answer takes its recipients without copying them again: a notification to
// everyone lists every member.
func toProto(n *Notification) *notificationsv1.Notification {
	recipients := n.Recipients
	if recipients == nil {
		recipients = []string{}
	}
	m := &notificationsv1.Notification{
		Id: n.ID, OrganizationId: n.OrganizationID, DocumentId: n.DocumentID,
		ActionUser:                     &notificationsv1.NotificationUser{UserId: n.ActionUser.UserID, Name: n.ActionUser.Name, Email: n.ActionUser.Email},
		DisplayHeadlineMessageTemplate: n.HeadlineTemplate, DisplayBodyMessage: n.Body, NotificationSource: n.Source,
		IsNotificationResolverUsed: n.ResolverUsed, Timestamp: float64(n.Timestamp),
		NotifyUserIds: recipients, ReadByUserIds: []string{},
	}
	m.DisplayHeadlineMessageTemplateData = structOf(n.HeadlineData)
	m.NotificationSourceData = structOf(n.SourceData)
	m.ContextAccess = structOf(n.ContextAccess)
	return m
}

func structOf(text string) *structpb.Struct {
	if text == "" {
		return nil
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(text), st); err != nil {
		return nil // written by us from a Struct
	}
	return st
}

func now(c clock.Clock) time.Time { return c.Now().UTC().Truncate(time.Millisecond) }
