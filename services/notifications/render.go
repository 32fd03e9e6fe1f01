package notifications

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/collab/collab/internal/validate"
)

// variable matches {{name}} and {{name.field}}, spaces inside the braces allowed.
var variable = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\s*\}\}`)

// templateValues are what a headline's variables read: the template data's custom string
// fields, and actionUser and recipientUser (the name, or the email, or the user id, whichever
// is set first) with their .name, .email and .userId.
type templateValues map[string]string

func (v templateValues) addUser(key string, u User) {
	display := u.Name
	if display == "" {
		display = u.Email
	}
	if display == "" {
		display = u.UserID
	}
	v[key] = display
	v[key+".name"], v[key+".email"], v[key+".userId"] = u.Name, u.Email, u.UserID
}

// render fills the template's variables; an unknown variable renders as nothing (a headline
// goes to people: a literal {{x}} in it reads as a fault, a missing word less so).
func render(tpl string, values templateValues) string {
	return variable.ReplaceAllStringFunc(tpl, func(m string) string {
		name := variable.FindStringSubmatch(m)[1]
		return values[name]
	})
}

// renderedLen is the length in bytes of render(tpl, values), found without rendering.
func renderedLen(tpl string, values templateValues) int {
	n := len(tpl)
	for _, m := range variable.FindAllStringSubmatchIndex(tpl, -1) {
		n += len(values[tpl[m[2]:m[3]]]) - (m[1] - m[0])
	}
	return n
}

// headliner renders one notification's headline for each of its readers: the template data and
// the acting user are read once, the reader's values added per reader. Headlines are rendered
// when read or sent, not stored per recipient (issue 20).
type headliner struct {
	n    *Notification
	base templateValues // headlineValues without the recipient
	// perReader: the template names the recipient, so the headline differs between readers.
	perReader bool
}

func newHeadliner(n *Notification) *headliner {
	h := &headliner{n: n, base: headlineValues(n, User{})}
	for _, m := range variable.FindAllStringSubmatch(n.HeadlineTemplate, -1) {
		if m[1] == "recipientUser" || strings.HasPrefix(m[1], "recipientUser.") {
			h.perReader = true
		}
	}
	return h
}

// For renders the headline for the reader ("" for a notification whose content the caller's
// resolver supplies).
func (h *headliner) For(reader User) string {
	if h.n.ResolverUsed {
		return ""
	}
	if !h.perReader {
		return render(h.n.HeadlineTemplate, h.base)
	}
	r := templateValues{}
	r.addUser("recipientUser", reader)
	return variable.ReplaceAllStringFunc(h.n.HeadlineTemplate, func(m string) string {
		name := variable.FindStringSubmatch(m)[1]
		if v, ok := r[name]; ok {
			return v
		}
		return h.base[name]
	})
}

// needsDirectory reports whether the reader's headline needs what the organization's contact
// list knows of them: the template names the recipient, and the caller did not name them in
// notifyUsers with both a name and an email.
func (h *headliner) needsDirectory(userID string) bool {
	if h.n.ResolverUsed || !h.perReader {
		return false
	}
	for _, u := range h.n.NotifyUsers {
		if u.UserID == userID {
			return u.Name == "" || u.Email == ""
		}
	}
	return true
}

// readerAs is the reader as the notification's headline names them: as the caller named them
// in notifyUsers, with what the contact list knows (dir) filling what the caller left out; else
// as the contact list has them. The fan-out resolved its recipients the same way.
func (h *headliner) readerAs(dir User) User {
	for _, u := range h.n.NotifyUsers {
		if u.UserID == dir.UserID {
			if u.Name == "" {
				u.Name = dir.Name
			}
			if u.Email == "" {
				u.Email = dir.Email
			}
			return u
		}
	}
	return dir
}

// headlineValues are the values of a notification's headline for one recipient.
func headlineValues(n *Notification, recipient User) templateValues {
	v := templateValues{}
	var data map[string]any
	if n.HeadlineData != "" {
		_ = json.Unmarshal([]byte(n.HeadlineData), &data) // written by us from a checked object
	}
	for k, x := range data {
		if s, ok := x.(string); ok {
			v[k] = s
		}
	}
	actor := n.ActionUser
	if u, ok := data["actionUser"].(map[string]any); ok {
		actor = userFromMap(u, actor)
	}
	v.addUser("actionUser", actor)
	v.addUser("recipientUser", recipient)
	return v
}

func userFromMap(m map[string]any, fallback User) User {
	u := fallback
	if s, ok := m["userId"].(string); ok && s != "" {
		u.UserID = s
	}
	if s, ok := m["name"].(string); ok && s != "" {
		u.Name = s
	}
	if s, ok := m["email"].(string); ok && s != "" {
		u.Email = s
	}
	return u
}

// subject is a headline made fit for a mail header: one line, no control characters, at
// most 200 characters.
func subject(headline string) string {
	s := strings.Map(func(r rune) rune {
		if validate.NameControl(r) {
			return ' '
		}
		return r
	}, headline)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:199]) + "…"
	}
	if s == "" {
		s = "New notification"
	}
	return s
}

// emailBodies are the text and HTML bodies of a notification's mail.
func emailBodies(headline, body, documentID string) (text, htmlBody string) {
	text = fmt.Sprintf("%s\n\n%s\n\nDocument: %s\n", headline, body, documentID)
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><body style="font-family:sans-serif">`)
	fmt.Fprintf(&b, "<h2>%s</h2>", html.EscapeString(headline))
	for _, p := range strings.Split(body, "\n") {
		fmt.Fprintf(&b, "<p>%s</p>", html.EscapeString(p))
	}
	fmt.Fprintf(&b, `<p style="color:#666">Document: %s</p></body></html>`, html.EscapeString(documentID))
	return text, b.String()
}

// slackEscape escapes what Slack's mrkdwn gives meaning to (&, <, >), so a name cannot make a
// link or a mention.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackMessage is the JSON Slack's incoming webhooks take: a text fallback and one section.
func slackMessage(headline, body string, recipients []string) (string, error) {
	text := fmt.Sprintf("*%s*\n%s", slackEscape(headline), slackEscape(body))
	if len(recipients) > 0 {
		text += "\n_For " + slackEscape(strings.Join(recipients, ", ")) + "_"
	}
	// A section's text holds at most 3,000 characters.
	if utf8.RuneCountInString(text) > 2900 {
		text = string([]rune(text)[:2899]) + "…"
	}
	msg := map[string]any{
		"text": slackEscape(headline),
		"blocks": []any{map[string]any{
			"type": "section",
			"text": map[string]any{"type": "mrkdwn", "text": text},
		}},
	}
	b, err := json.Marshal(msg)
	return string(b), err
}
