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
