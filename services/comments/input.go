package comments

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/validate"
)

// Limits of what callers send (docs/comments.md, "Limits").
const (
	// maxItems bounds the annotations, comments or ids of one request.
	maxItems = 30
	// MaxCommentsPerThread and MaxThreadBytes bound one thread: its comments, and the bytes of
	// its content (texts, HTML, mentions, reactions, context).
	MaxCommentsPerThread = 500
	MaxThreadBytes       = 1 << 20
	// MaxThreadsPerDocument bounds the annotations of one document.
	MaxThreadsPerDocument = 100_000
	maxNameLength         = 256
	maxEmojiBytes         = 32
	// maxReactionKinds bounds the different emoji on one comment, so that reactions cannot
	// take a thread's whole content budget (MaxThreadBytes) from its comments.
	maxReactionKinds = 50
	// maxReaders bounds a thread's read marks (ReadBy): past it, Mark Read records no more
	// readers until the thread changes (which empties them).
	maxReaders      = 10_000
	maxContextBytes = 16 << 10
	maxMentions     = 100
	// maxCommentID is the largest whole number a JSON number holds exactly (2^53-1).
	maxCommentID = 1<<53 - 1
)

// Status types (docs/comments.md, "Annotations").
const (
	statusDefault  = "default"
	statusOngoing  = "ongoing"
	statusTerminal = "terminal"
)

var defaultStatus = Status{ID: "OPEN", Name: "Open", Type: statusDefault}

func checkUser(field string, u *commentsv1.User, required bool) (User, error) {
	if u == nil {
		if required {
			return User{}, apierr.InvalidArgument("%s is required.", field)
		}
		return User{}, nil
	}
	if err := validate.ID(field+".userId", u.GetUserId()); err != nil {
		return User{}, err
	}
	if err := validate.Name(field+".name", u.GetName(), maxNameLength); err != nil {
		return User{}, err
	}
	if e := u.GetEmail(); e != "" && !validate.IsEmail(e) {
		return User{}, apierr.InvalidArgument("%s.email must be a valid email address.", field)
	}
	return User{UserID: u.GetUserId(), Name: u.GetName(), Email: u.GetEmail()}, nil
}

func checkLocation(field string, l *commentsv1.Location) (*Location, error) {
	if l == nil {
		return nil, nil
	}
	if err := validate.OptionalID(field+".id", l.GetId()); err != nil {
		return nil, err
	}
	if err := validate.Name(field+".locationName", l.GetLocationName(), maxNameLength); err != nil {
		return nil, err
	}
	if l.GetId() == "" && l.GetLocationName() == "" {
		return nil, apierr.InvalidArgument("%s needs an id or a locationName.", field)
	}
	return &Location{ID: l.GetId(), Name: l.GetLocationName()}, nil
}

func checkStatus(field string, s *commentsv1.Status) (Status, error) {
	if err := validate.ID(field+".id", s.GetId()); err != nil {
		return Status{}, err
	}
	if err := validate.Name(field+".name", s.GetName(), maxNameLength); err != nil {
		return Status{}, err
	}
	typ := s.GetType()
	if typ == "" {
		typ = statusOngoing
		if s.GetId() == defaultStatus.ID {
			typ = statusDefault
		}
	}
	if !slices.Contains([]string{statusDefault, statusOngoing, statusTerminal}, typ) {
		return Status{}, apierr.InvalidArgument("%s.type must be one of default, ongoing, terminal.", field)
	}
	name := s.GetName()
	if name == "" {
		name = s.GetId()
	}
	return Status{ID: s.GetId(), Name: name, Type: typ}, nil
}

func checkPriority(field string, p *commentsv1.Priority) (*Priority, error) {
	if p == nil {
		return nil, nil
	}
	if err := validate.ID(field+".id", p.GetId()); err != nil {
		return nil, err
	}
	if err := validate.Name(field+".name", p.GetName(), maxNameLength); err != nil {
		return nil, err
	}
	name := p.GetName()
	if name == "" {
		name = p.GetId()
	}
	return &Priority{ID: p.GetId(), Name: name}, nil
}

// checkContext returns the context as JSON text: an object of at most maxContextBytes, whose
// access field (when present) is an object of strings and numbers, as in Add Notifications.
func checkContext(field string, c *structpb.Struct) (string, error) {
	if c == nil {
		return "", nil
	}
	if proto.Size(c) > maxContextBytes {
		return "", apierr.InvalidArgument("%s must be at most %d KiB.", field, maxContextBytes>>10)
	}
	if a, ok := c.GetFields()["access"]; ok {
		obj := a.GetStructValue()
		if obj == nil {
			return "", apierr.InvalidArgument("%s.access must be an object.", field)
		}
		for k, v := range obj.GetFields() {
			if err := validate.ID(field+".access field name", k); err != nil {
				return "", err
			}
			switch v.GetKind().(type) {
			case *structpb.Value_StringValue, *structpb.Value_NumberValue:
			default:
				return "", apierr.InvalidArgument("%s.access.%s must be a string or a number.", field, k)
			}
		}
	}
	b, err := protojson.Marshal(c)
	if err != nil {
		return "", apierr.InvalidArgument("%s is not a JSON object.", field)
	}
	return string(b), nil
}

// commentID checks a comment id sent by a caller: a whole number from 1 to 2^53-1; zero
// means none given.
func commentID(field string, v float64) (int64, error) {
	if v == 0 {
		return 0, nil
	}
	if v < 1 || v > maxCommentID || v != math.Trunc(v) {
		return 0, apierr.InvalidArgument("%s must be a whole number from 1 to %d.", field, int64(maxCommentID))
	}
	return int64(v), nil
}

func commentIDs(field string, vs []float64, required bool) ([]int64, error) {
	if required && len(vs) == 0 {
		return nil, apierr.InvalidArgument("%s must contain at least one id.", field)
	}
	if len(vs) > maxItems {
		return nil, apierr.InvalidArgument("%s must contain at most %d ids.", field, maxItems)
	}
	var out []int64
	for i, v := range vs {
		id, err := commentID(field+"["+strconv.Itoa(i)+"]", v)
		if err != nil {
			return nil, err
		}
		if id == 0 {
			return nil, apierr.InvalidArgument("%s[%d] must be a whole number from 1 to %d.", field, i, int64(maxCommentID))
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func checkMentions(field string, ms []*commentsv1.Mention) ([]Mention, error) {
	if len(ms) > maxMentions {
		return nil, apierr.InvalidArgument("%s must hold at most %d mentions.", field, maxMentions)
	}
	out := make([]Mention, 0, len(ms))
	for i, m := range ms {
		f := field + "[" + strconv.Itoa(i) + "]"
		if err := validate.ID(f+".userId", m.GetUserId()); err != nil {
			return nil, err
		}
		contact, err := checkUser(f+".contact", m.GetContact(), false)
		if err != nil {
			return nil, err
		}
		if contact.UserID == "" {
			contact.UserID = m.GetUserId()
		}
		if err := validate.Name(f+".text", m.GetText(), maxNameLength); err != nil {
			return nil, err
		}
		out = append(out, Mention{UserID: m.GetUserId(), Contact: contact, Text: m.GetText()})
	}
	return out, nil
}

// mentionsOf reads the mentions of Update Comments, sent as a JSON list.
func mentionsOf(field string, l *structpb.ListValue) ([]Mention, error) {
	b, err := protojson.Marshal(l)
	if err != nil {
		return nil, apierr.InvalidArgument("%s must be a list of mentions.", field)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, apierr.InvalidArgument("%s must be a list of mentions.", field)
	}
	ms := make([]*commentsv1.Mention, len(raw))
	for i, r := range raw {
		ms[i] = &commentsv1.Mention{}
		if err := (protojson.UnmarshalOptions{}).Unmarshal(r, ms[i]); err != nil {
			return nil, apierr.InvalidArgument("%s[%d] must be a mention {userId, contact, text}.", field, i)
		}
	}
	return checkMentions(field, ms)
}

// checkNewComment checks a comment to add; from may be left out here: an end user's is the
// token's, and a backend must name it (actor.as with required).
func checkNewComment(field string, c *commentsv1.NewComment) (Comment, error) {
	id, err := commentID(field+".commentId", c.GetCommentId())
	if err != nil {
		return Comment{}, err
	}
	from, err := checkUser(field+".from", c.GetFrom(), false)
	if err != nil {
		return Comment{}, err
	}
	text, html, err := checkContent(field, c.GetCommentText(), c.GetCommentHtml())
	if err != nil {
		return Comment{}, err
	}
	if text == "" && html == "" {
		return Comment{}, apierr.InvalidArgument("%s needs a commentText or a commentHtml.", field)
	}
	mentions, err := checkMentions(field+".taggedUserContacts", c.GetTaggedUserContacts())
	if err != nil {
		return Comment{}, err
	}
	return Comment{ID: id, Text: text, HTML: html, From: from, Mentions: mentions}, nil
}

func checkEmoji(e string) error {
	switch {
	case e == "":
		return apierr.InvalidArgument("emoji is required.")
	case len(e) > maxEmojiBytes:
		return apierr.InvalidArgument("emoji must be at most %d bytes.", maxEmojiBytes)
	case strings.ContainsAny(e, " \t\r\n"):
		return apierr.InvalidArgument("emoji must be one emoji or a short name without spaces.")
	}
	return validate.Name("emoji", e, maxEmojiBytes)
}
