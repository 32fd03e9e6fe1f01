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

// headliner renders one notification's headline for each of its readers: the template is
// parsed, the acting user and the template data read, once; a reader's headline is then one
// string built. Headlines are rendered when read or sent, not stored per recipient (issue 20).
// It fills variables as render(n.HeadlineTemplate, headlineValues(n, reader)) does.
type headliner struct {
	n     *Notification
	vars  [][]int // the template's variables: FindAllStringSubmatchIndex
	actor User
	data  map[string]string // the template data's string fields, read when a variable needs them
	// perReader: the template names the recipient, so the headline differs between readers.
	perReader bool
}

func newHeadliner(n *Notification) *headliner {
	h := &headliner{}
	h.init(n, variable.FindAllStringSubmatchIndex(n.HeadlineTemplate, -1))
	return h
}

// init makes h the headliner of n, whose template's variables are vars.
func (h *headliner) init(n *Notification, vars [][]int) {
	*h = headliner{n: n, vars: vars, actor: n.ActionUser}
	needData := false
	for _, m := range h.vars {
		switch key, _ := userVariable(n.HeadlineTemplate[m[2]:m[3]]); key {
		case "recipientUser":
			h.perReader = true
		case "":
			needData = true
		}
	}
	if n.HeadlineData == "" || !needData && !strings.Contains(n.HeadlineData, `"actionUser"`) {
		return
	}
	var data map[string]any
	_ = json.Unmarshal([]byte(n.HeadlineData), &data) // written by us from a checked object
	if u, ok := data["actionUser"].(map[string]any); ok {
		h.actor = userFromMap(u, h.actor)
	}
	if needData {
		h.data = map[string]string{}
		for k, x := range data {
			if s, ok := x.(string); ok {
				h.data[k] = s
			}
		}
	}
}

// userVariable splits a variable naming a user's value: actionUser or recipientUser, and the
// field ("" for the display name); key "" for any other variable.
func userVariable(name string) (key, field string) {
	for _, k := range []string{"actionUser", "recipientUser"} {
		if rest, ok := strings.CutPrefix(name, k); ok {
			switch rest {
			case "":
				return k, ""
			case ".name", ".email", ".userId":
				return k, rest[1:]
			}
		}
	}
	return "", ""
}

// userValue is what a user variable renders as (templateValues.addUser).
func userValue(u User, field string) string {
	switch field {
	case "name":
		return u.Name
	case "email":
		return u.Email
	case "userId":
		return u.UserID
	}
	if u.Name != "" {
		return u.Name
	}
	if u.Email != "" {
		return u.Email
	}
	return u.UserID
}

// For renders the headline for the reader ("" for a notification whose content the caller's
// resolver supplies).
func (h *headliner) For(reader User) string {
	if h.n.ResolverUsed {
		return ""
	}
	tpl := h.n.HeadlineTemplate
	if len(h.vars) == 0 {
		return tpl
	}
	var b strings.Builder
	b.Grow(len(tpl) + 32)
	last := 0
	for _, m := range h.vars {
		b.WriteString(tpl[last:m[0]])
		name := tpl[m[2]:m[3]]
		switch key, field := userVariable(name); key {
		case "actionUser":
			b.WriteString(userValue(h.actor, field))
		case "recipientUser":
			b.WriteString(userValue(reader, field))
		default:
			b.WriteString(h.data[name])
		}
		last = m[1]
	}
	b.WriteString(tpl[last:])
	return b.String()
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
