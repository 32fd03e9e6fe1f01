package notifications

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// Limits (docs/api.md "Notifications"). Every request is checked whole before anything is
// written or any service is called.
const (
	maxDocumentIDs      = 30
	maxConfigUsers      = 100
	maxNotifyUsers      = 1000
	maxNotificationIDs  = 30
	maxReadUsers        = 1000
	maxContextFields    = 20
	maxTemplateLength   = 1000
	maxBodyLength       = 10000
	maxNameLength       = 200
	maxJSONBytes        = 64 << 10
	defaultPageSize     = 50
	maxPageSize         = 1000
	maxContextValueSize = 256
	// maxHeadlineBytes bounds a headline filled in with its data, for any reader: headlines are
	// rendered when read (a page of 1,000 at most 16 MiB) and when mailed.
	maxHeadlineBytes = 16 << 10
	// maxReaderField is more than any name, email or id of a reader can be, in bytes.
	maxReaderField = 4 * validate.MaxIDLength
)

var configValues = []string{All, Mine, None}

// Notification sources (docs/api.md, "Notifications"): custom goes through the caller's resolver.
var sources = []string{"custom", "comment", "huddle", "crdt"}

// Defaults of a user who never set a config (docs/api.md): every notification in the inbox,
// email only for those that involve them, no Slack.
var defaultConfig = Config{Inbox: All, Email: Mine, Slack: None}

func checkConfigValue(field, v string) error {
	if v == "" {
		return apierr.InvalidArgument("%s is required.", field)
	}
	if !slices.Contains(configValues, v) {
		return apierr.InvalidArgument("%s must be one of ALL, MINE, NONE.", field)
	}
	return nil
}

func checkDocumentIDs(ids []string) ([]string, error) {
	return validate.IDs("documentIds", ids, true, maxDocumentIDs)
}

func checkGetConfig(req *notificationsv1.GetNotificationConfigRequest) ([]string, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	docs, err := checkDocumentIDs(req.GetDocumentIds())
	if err != nil {
		return nil, err
	}
	return docs, validate.ID("userId", req.GetUserId())
}

func checkSetConfig(req *notificationsv1.SetNotificationConfigRequest) (docs, users []string, cfg Config, err error) {
	if err = validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return
	}
	if docs, err = checkDocumentIDs(req.GetDocumentIds()); err != nil {
		return
	}
	if users, err = validate.IDs("userIds", req.GetUserIds(), true, maxConfigUsers); err != nil {
		return
	}
	if req.GetConfig() == nil {
		err = apierr.InvalidArgument("config is required.")
		return
	}
	c := req.GetConfig()
	cfg = Config{Inbox: c.GetInbox(), Email: c.GetEmail(), Slack: c.GetSlack()}
	for _, f := range []struct{ name, v string }{{"config.inbox", cfg.Inbox}, {"config.email", cfg.Email}, {"config.slack", cfg.Slack}} {
		if err = checkConfigValue(f.name, f.v); err != nil {
			return
		}
	}
	return
}

func checkUser(field string, u *notificationsv1.NotificationUser, idRequired bool) error {
	if idRequired {
		if err := validate.ID(field+".userId", u.GetUserId()); err != nil {
			return err
		}
	}
	if err := validate.Name(field+".name", u.GetName(), maxNameLength); err != nil {
		return err
	}
	if e := u.GetEmail(); e != "" && !validate.IsEmail(e) {
		return apierr.InvalidArgument("%s.email must be a valid email address.", field)
	}
	return nil
}

func jsonSize(field string, m proto.Message) error {
	if proto.Size(m) > maxJSONBytes {
		return apierr.InvalidArgument("%s must be at most %d KiB.", field, maxJSONBytes>>10)
	}
	return nil
}

// checkAdd checks Add Notifications before anything is created or written.
func checkAdd(req *notificationsv1.AddNotificationsRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	if err := validate.ID("documentId", req.GetDocumentId()); err != nil {
		return err
	}
	if req.GetActionUser() == nil {
		return apierr.InvalidArgument("actionUser is required.")
	}
	if err := checkUser("actionUser", req.GetActionUser(), true); err != nil {
		return err
	}
	if err := validate.TokenID("notificationId", req.GetNotificationId()); err != nil {
		return err
	}
	if err := checkDisplay(req); err != nil {
		return err
	}
	if err := checkNotifyUsers(req); err != nil {
		return err
	}
	if s := req.GetNotificationSource(); s != "" && !slices.Contains(sources, s) {
		return apierr.InvalidArgument("notificationSource must be one of custom, comment, huddle, crdt.")
	}
	if d := req.GetNotificationSourceData(); d != nil {
		if err := jsonSize("notificationSourceData", d); err != nil {
			return err
		}
	}
	if c := req.GetContext(); c != nil {
		return checkContext(c.GetAccess())
	}
	return nil
}

// checkDisplay checks what a notification shows: the headline template and body (required
// unless the caller's resolver supplies them), the template's data, and the headline's size
// once filled in.
func checkDisplay(req *notificationsv1.AddNotificationsRequest) error {
	if !req.GetIsNotificationResolverUsed() {
		if strings.TrimSpace(req.GetDisplayHeadlineMessageTemplate()) == "" {
			return apierr.InvalidArgument("displayHeadlineMessageTemplate is required unless isNotificationResolverUsed is true.")
		}
		if strings.TrimSpace(req.GetDisplayBodyMessage()) == "" {
			return apierr.InvalidArgument("displayBodyMessage is required unless isNotificationResolverUsed is true.")
		}
	}
	if err := validate.Name("displayHeadlineMessageTemplate", req.GetDisplayHeadlineMessageTemplate(), maxTemplateLength); err != nil {
		return err
	}
	if err := validate.MaxLength("displayBodyMessage", req.GetDisplayBodyMessage(), maxBodyLength); err != nil {
		return err
	}
	if d := req.GetDisplayHeadlineMessageTemplateData(); d != nil {
		if err := jsonSize("displayHeadlineMessageTemplateData", d); err != nil {
			return err
		}
		for k, v := range d.GetFields() {
			field := "displayHeadlineMessageTemplateData." + k
			switch k {
			case "actionUser", "recipientUser":
				if v.GetStructValue() == nil {
					return apierr.InvalidArgument("%s must be a user object {userId, name, email}.", field)
				}
			default:
				if _, ok := v.GetKind().(*structpb.Value_StringValue); !ok {
					return apierr.InvalidArgument("%s must be a string.", field)
				}
			}
		}
	}
	return checkHeadlineSize(req)
}

// checkNotifyUsers checks the named recipients: at least one unless notifyAll (true when
// absent), at most maxNotifyUsers, each a valid user named once.
func checkNotifyUsers(req *notificationsv1.AddNotificationsRequest) error {
	notifyAll := req.NotifyAll == nil || req.GetNotifyAll()
	if len(req.GetNotifyUsers()) == 0 && !notifyAll {
		return apierr.InvalidArgument("notifyUsers must name at least one user when notifyAll is false.")
	}
	if len(req.GetNotifyUsers()) > maxNotifyUsers {
		return apierr.InvalidArgument("notifyUsers must contain at most %d users.", maxNotifyUsers)
	}
	seen := map[string]int{}
	for i, u := range req.GetNotifyUsers() {
		field := fmt.Sprintf("notifyUsers[%d]", i)
		if err := checkUser(field, u, true); err != nil {
			return err
		}
		if j, dup := seen[u.GetUserId()]; dup {
			return apierr.InvalidArgument("%s.userId repeats notifyUsers[%d].userId: each user may appear once.", field, j)
		}
		seen[u.GetUserId()] = i
	}
	return nil
}

// checkContext checks context.access: 1 to maxContextFields fields, each named by an id and
// holding a string (of at most maxContextValueSize) or a number.
func checkContext(access *structpb.Struct) error {
	if len(access.GetFields()) == 0 {
		return apierr.InvalidArgument("context.access is required inside context and must name at least one field.")
	}
	if len(access.GetFields()) > maxContextFields {
		return apierr.InvalidArgument("context.access must hold at most %d fields.", maxContextFields)
	}
	for k, v := range access.GetFields() {
		if err := validate.ID("context.access field name", k); err != nil {
			return err
		}
		switch x := v.GetKind().(type) {
		case *structpb.Value_StringValue:
			if err := validate.MaxLength("context.access."+k, x.StringValue, maxContextValueSize); err != nil {
				return err
			}
		case *structpb.Value_NumberValue:
		default:
			return apierr.InvalidArgument("context.access.%s must be a string or a number.", k)
		}
	}
	return nil
}

// checkHeadlineSize refuses a headline template that, filled in with its data, could pass
// maxHeadlineBytes for some reader (one whose name, email and id are as long as can be).
func checkHeadlineSize(req *notificationsv1.AddNotificationsRequest) error {
	n := &Notification{ActionUser: userOf(req.GetActionUser()), HeadlineData: jsonOf(req.GetDisplayHeadlineMessageTemplateData(), req.DisplayHeadlineMessageTemplateData == nil)}
	long := strings.Repeat("x", maxReaderField)
	values := headlineValues(n, User{UserID: long, Name: long, Email: long})
	if renderedLen(req.GetDisplayHeadlineMessageTemplate(), values) > maxHeadlineBytes {
		return apierr.InvalidArgument("displayHeadlineMessageTemplate filled in with displayHeadlineMessageTemplateData must be at most %d KiB for any recipient (a recipient's name, email or id counts as %d bytes).",
			maxHeadlineBytes>>10, maxReaderField)
	}
	return nil
}

// listing is a checked Get Notifications request.
type listing struct {
	org, doc, user string
	ids            []string
	desc           bool
	size           int
}

func checkGet(req *notificationsv1.GetNotificationsRequest) (*listing, error) {
	l := &listing{org: req.GetOrganizationId(), doc: req.GetDocumentId(), user: req.GetUserId(), desc: true, size: defaultPageSize}
	if err := validate.ID("organizationId", l.org); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("documentId", l.doc); err != nil {
		return nil, err
	}
	if err := validate.OptionalID("userId", l.user); err != nil {
		return nil, err
	}
	if l.doc != "" && l.user != "" {
		return nil, apierr.InvalidArgument("Provide documentId or userId, not both.")
	}
	var err error
	if l.ids, err = validate.IDs("notificationIds", req.GetNotificationIds(), false, maxNotificationIDs); err != nil {
		return nil, err
	}
	if len(l.ids) > 0 && l.doc != "" {
		return nil, apierr.InvalidArgument("Provide notificationIds or documentId, not both.")
	}
	switch req.GetOrder() {
	case "", "desc":
	case "asc":
		l.desc = false
	default:
		return nil, apierr.InvalidArgument("order must be asc or desc.")
	}
	if req.PageSize != nil {
		n := int(req.GetPageSize())
		if n < 1 || n > maxPageSize {
			return nil, apierr.InvalidArgument("pageSize must be between 1 and %d.", maxPageSize)
		}
		l.size = n
	}
	if len(l.ids) > 0 && req.GetPageToken() != "" {
		return nil, apierr.InvalidArgument("pageToken does not apply to notificationIds, which are answered at once.")
	}
	return l, nil
}

// scope is what a page token is bound to.
func (l *listing) scope(apiKey string) string {
	return strings.Join([]string{"notifications", apiKey, l.org, l.doc, l.user, fmt.Sprint(l.desc)}, "\x00")
}

func checkUpdate(req *notificationsv1.UpdateNotificationsRequest) error {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return err
	}
	items := req.GetNotifications()
	if len(items) == 0 {
		return apierr.InvalidArgument("notifications must contain at least one notification.")
	}
	if len(items) > maxNotificationIDs {
		return apierr.InvalidArgument("notifications must contain at most %d notifications.", maxNotificationIDs)
	}
	seen := map[string]int{}
	for i, n := range items {
		field := fmt.Sprintf("notifications[%d]", i)
		if err := validate.ID(field+".id", n.GetId()); err != nil {
			return err
		}
		if j, dup := seen[n.GetId()]; dup {
			return apierr.InvalidArgument("%s.id repeats notifications[%d].id: each notification may appear once.", field, j)
		}
		seen[n.GetId()] = i
		read, err := validate.IDs(field+".readByUserIds", n.GetReadByUserIds(), false, maxReadUsers)
		if err != nil {
			return err
		}
		unread, err := validate.IDs(field+".unreadByUserIds", n.GetUnreadByUserIds(), false, maxReadUsers)
		if err != nil {
			return err
		}
		if len(read)+len(unread) == 0 {
			return apierr.InvalidArgument("%s must name users in readByUserIds or unreadByUserIds.", field)
		}
		for _, u := range read {
			if slices.Contains(unread, u) {
				return apierr.InvalidArgument("%s names user %s as both read and unread.", field, u)
			}
		}
	}
	return nil
}

func checkDelete(req *notificationsv1.DeleteNotificationsRequest) ([]string, error) {
	if err := validate.ID("organizationId", req.GetOrganizationId()); err != nil {
		return nil, err
	}
	return validate.IDs("notificationIds", req.GetNotificationIds(), true, maxNotificationIDs)
}
