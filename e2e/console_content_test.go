package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/collab/collab/internal/testkit/browsertest"
)

// active is stored content that would run script if a page wrote it as HTML: each kind of
// payload sets window.__xss, and the img one also loads a missing image.
var active = []string{
	`<img src=x onerror="window.__xss=1">`,
	`<svg onload="window.__xss=2"></svg>`,
	`<script>window.__xss=3</script>`,
	`"><iframe src="javascript:window.parent.__xss=4"></iframe>`,
}

// TestConsoleShowsStoredContentAsText: names, emails, templates and notification texts that
// hold markup are shown as the text they are on every page that shows them; nothing runs, no
// element is made from them, no dialog opens (docs/console.md, "Serving and security").
func TestConsoleShowsStoredContentAsText(t *testing.T) {
	s := newSystem(t)
	k := s.devKey()
	s.call("/v2/organizations/add", k, map[string]any{"organizations": []any{map[string]any{"organizationId": "acme", "organizationName": active[0]}}}).data(t, "")
	s.call("/v2/organizations/folders/add", k, map[string]any{"organizationId": "acme", "folders": []any{map[string]any{"folderId": "f", "folderName": active[1]}}}).data(t, "")
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "acme", "documents": []any{map[string]any{"documentId": "d", "documentName": active[2]}}}).data(t, "")
	s.call("/v2/users/add", k, map[string]any{"organizationId": "acme", "users": []any{map[string]any{"userId": "ann", "name": active[3], "email": "ann@example.com"}}}).data(t, "")
	s.call("/v2/activities/add", k, map[string]any{"organizationId": "acme", "documentId": "d", "activities": []any{map[string]any{
		"id": "a1", "featureType": "custom", "actionType": "custom.edit", "actionUser": map[string]any{"userId": "ann", "name": active[1]},
		"displayMessageTemplate": active[0] + " {{what}}", "displayMessageTemplateData": map[string]any{"what": active[2]},
	}}}).data(t, "")
	s.call("/v2/notifications/add", k, map[string]any{"organizationId": "acme", "documentId": "d", "notificationId": "n1",
		"actionUser":                     map[string]any{"userId": "bob", "name": active[3], "email": "bob@example.com"},
		"displayHeadlineMessageTemplate": active[0] + " {{x}}", "displayHeadlineMessageTemplateData": map[string]any{"x": active[1]},
		"displayBodyMessage": active[2], "notifyUsers": []any{map[string]any{"userId": "ann"}}}).data(t, "")

	ctx := consoleTab(t, s, "/console/")
	dialogs := browsertest.AcceptDialogs(ctx)
	pageSignInDev(t, ctx)
	pages := []struct {
		hash, heading, form string
		values              map[string]any
		shows               []string
	}{
		{"#/organizations", "Organizations", "", nil, []string{active[0]}},
		{"#/organizations/acme", "Organizations", "", nil, []string{active[1], active[2], active[3]}},
		{"#/activity/acme", "Activity log", "", nil, []string{active[0] + " " + active[2]}},
		{"#/notifications/acme", "Notifications", "Inbox", map[string]any{"userId": "ann"}, []string{active[0] + " " + active[1], active[2]}},
	}
	for _, p := range pages {
		t.Run(p.hash, func(t *testing.T) {
			pageOpen(t, ctx, p.hash, p.heading)
			if p.form != "" {
				pageSubmit(t, ctx, p.form, p.values)
			}
			for _, want := range p.shows {
				pageWait(t, ctx, "main", want)
			}
			checkInert(t, ctx, dialogs)
		})
	}
}

// checkInert fails t when a payload of active ran, made an element of its own, or opened a
// dialog.
func checkInert(t *testing.T, ctx context.Context, dialogs *browsertest.Dialogs) {
	t.Helper()
	state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({xss: window.__xss || null,
		made: document.querySelectorAll('main img[src="x"], main svg[onload], main script, main iframe').length})`))
	if err != nil {
		t.Fatal(err)
	}
	if state != `{"xss":null,"made":0}` || dialogs.Count() != 0 {
		t.Fatalf("stored markup became page content: %s, dialogs %v", state, dialogs.Messages())
	}
}
