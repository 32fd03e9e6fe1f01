package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
)

// The definition of done: a newcomer creates a workspace through the API, gets an API
// key and auth token through the API, and calls Get Domains and Get Workspace with them.
func TestNewcomerFlow(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	created := s.call("/v2/workspace/create", nil, map[string]any{
		"ownerEmail": "Ann@Example.com", "name": "Ann", "workspaceName": "Ann's team", "avatar": "https://example.com/a.png",
	}).data(t, "Workspace created successfully")
	wsID, wsToken := created["id"].(string), created["authToken"].(string)
	if len(wsToken) < 32 {
		t.Fatalf("workspace auth token %q is short", wsToken)
	}
	owner := created["owner"].(map[string]any)
	if owner["email"] != "ann@example.com" || owner["name"] != "Ann" || owner["avatar"] != "https://example.com/a.png" || owner["id"] == "" {
		t.Fatalf("owner = %v", owner)
	}
	if created["name"] != "Ann's team" {
		t.Fatalf("name = %v", created["name"])
	}
	keys := created["apiKeyList"].(map[string]any)
	if len(keys) != 1 {
		t.Fatalf("apiKeyList = %v, want one testing key", keys)
	}
	for id, v := range keys {
		k := v.(map[string]any)
		if k["id"] != id || k["type"] != "testing" || k["apiKeyName"] == "" {
			t.Fatalf("testing key = %v", k)
		}
	}

	key := s.call("/v2/workspace/apikey/create", workspaceHeaders(wsID, wsToken), map[string]any{
		"type": "production", "apiKeyName": "Backend", "allowedDomains": []string{"https://www.App.example.com/x"},
	}).data(t, "API key created successfully.")
	apiKey, authToken := key["apiKey"].(string), key["authToken"].(string)
	if apiKey == "" || authToken == "" {
		t.Fatalf("created key = %v", key)
	}

	domains := s.call("/v2/workspace/domains/get", keyHeaders(apiKey, authToken), map[string]any{}).data(t, "Domains retrieved successfully.")
	if !equalStrings(domains["allowedDomains"], "app.example.com") {
		t.Fatalf("allowedDomains = %v", domains["allowedDomains"])
	}

	ws := s.call("/v2/workspace/get", workspaceHeaders(wsID, wsToken), map[string]any{}).data(t, "Workspace retrieved successfully")
	if ws["id"] != wsID {
		t.Fatalf("id = %v", ws["id"])
	}
	list := ws["apiKeyList"].(map[string]any)
	entry, ok := list[apiKey].(map[string]any)
	if len(list) != 2 || !ok || entry["apiKeyName"] != "Backend" || entry["type"] != "production" || entry["id"] != apiKey {
		t.Fatalf("apiKeyList = %v", list)
	}
	// Only the hash is kept: Get Workspace shows the token masked.
	masked := ws["authToken"].(string)
	if masked == wsToken || !strings.HasSuffix(masked, wsToken[len(wsToken)-4:]) || strings.Contains(masked, wsToken[:8]) {
		t.Fatalf("authToken shown as %q", masked)
	}
	if settings := ws["settings"].(map[string]any); settings["advancedQueries"] != true || settings["notifications"] != true || settings["advancedWebhooks"] != true {
		t.Fatalf("settings = %v", settings)
	}
}

func equalStrings(v any, want ...string) bool {
	arr, ok := v.([]any)
	if !ok || len(arr) != len(want) {
		return false
	}
	for i := range arr {
		if arr[i] != want[i] { //nolint:gosec // G602: the lengths are equal, checked above
			return false
		}
	}
	return true
}

// Spec section 5 rule 4.
func TestWorkspaceAuthErrors(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	id, token := s.newWorkspace("w@example.com")
	cases := []struct {
		name    string
		headers map[string]string
		http    int
		status  string
		message string
	}{
		{"no headers", nil, 400, "INVALID_ARGUMENT", "Workspace ID not found in headers."},
		{"no workspace id", map[string]string{"x-service-workspace-auth-token": token}, 400, "INVALID_ARGUMENT", "Workspace ID not found in headers."},
		{"no token", map[string]string{"x-service-workspace-id": id}, 400, "INVALID_ARGUMENT", "Auth Token not found in headers."},
		{"wrong token", workspaceHeaders(id, token+"x"), 401, "UNAUTHENTICATED", "Invalid auth token for workspace."},
		{"another workspace's token", workspaceHeaders(s.proc.Dev.WorkspaceID, token), 401, "UNAUTHENTICATED", "Invalid auth token for workspace."},
		{"unknown workspace", workspaceHeaders("nope", token), 404, "NOT_FOUND", "Workspace not found."},
	}
	for _, path := range []string{"/v2/workspace/get", "/v2/workspace/apikey/create", "/v2/workspace/apikeys/get", "/v2/workspace/authtokens/get", "/v2/workspace/authtoken/reset", "/v2/workspace/settings/update"} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				s.call(path, c.headers, map[string]any{}).fails(t, c.http, c.status, c.message)
			})
		}
	}
}

// Spec section 5 rule 5 and the key-level header rules.
func TestKeyAuthErrors(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	cases := []struct {
		name    string
		headers map[string]string
		http    int
		status  string
		message string
	}{
		{"no headers", nil, 400, "INVALID_ARGUMENT", "API key not found in headers."},
		{"no token", map[string]string{"x-service-api-key": s.proc.Dev.APIKey}, 400, "INVALID_ARGUMENT", "Auth Token not found in headers."},
		{"unknown key", keyHeaders("nope", s.proc.Dev.AuthToken), 403, "PERMISSION_DENIED", "Invalid API key."},
		{"wrong token", keyHeaders(s.proc.Dev.APIKey, "wrong"), 400, "INVALID_ARGUMENT", "Auth token not found."},
		{"workspace token instead", keyHeaders(s.proc.Dev.APIKey, s.proc.Dev.WorkspaceToken), 400, "INVALID_ARGUMENT", "Auth token not found."},
	}
	for _, path := range []string{"/v2/workspace/domains/get", "/v2/workspace/domains/update"} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				s.call(path, c.headers, map[string]any{"allowedDomains": []string{"x.com"}}).fails(t, c.http, c.status, c.message)
			})
		}
	}
	// Nothing was written by the refused updates.
	d := s.call("/v2/workspace/domains/get", s.devKey(), map[string]any{}).data(t, "")
	if !equalStrings(d["allowedDomains"]) {
		t.Fatalf("refused updates wrote %v", d["allowedDomains"])
	}
}

// One API key cannot see or change another's data; one workspace cannot reach another's keys.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	aID, aToken := s.newWorkspace("a@example.com")
	bID, bToken := s.newWorkspace("b@example.com")
	aKey, aAuth := s.newKey(aID, aToken)
	bKey, bAuth := s.newKey(bID, bToken)
	a2Key, a2Auth := s.newKey(aID, aToken)

	s.call("/v2/workspace/domains/update", keyHeaders(aKey, aAuth), map[string]any{"allowedDomains": []string{"a.example.com"}}).data(t, "Allowed domains updated successfully.")
	s.call("/v2/workspace/domains/update", keyHeaders(bKey, bAuth), map[string]any{"allowedDomains": []string{"b.example.com"}}).data(t, "")
	for _, c := range []struct {
		key, auth string
		want      []string
	}{{aKey, aAuth, []string{"a.example.com"}}, {bKey, bAuth, []string{"b.example.com"}}, {a2Key, a2Auth, nil}} {
		d := s.call("/v2/workspace/domains/get", keyHeaders(c.key, c.auth), map[string]any{}).data(t, "")
		if !equalStrings(d["allowedDomains"], c.want...) {
			t.Fatalf("key %s sees %v, want %v", c.key, d["allowedDomains"], c.want)
		}
	}
	// A token of one key does not open another key.
	s.call("/v2/workspace/domains/get", keyHeaders(bKey, aAuth), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")

	// Workspace B cannot list, reset or see A's keys.
	bw := workspaceHeaders(bID, bToken)
	s.call("/v2/workspace/authtokens/get", bw, map[string]any{"apiKey": aKey}).fails(t, 404, "NOT_FOUND", "API key not found.")
	s.call("/v2/workspace/authtoken/reset", bw, map[string]any{"apiKey": aKey}).fails(t, 404, "NOT_FOUND", "API key not found.")
	s.call("/v2/workspace/domains/get", keyHeaders(aKey, aAuth), map[string]any{}).data(t, "") // A's token still works
	list := s.call("/v2/workspace/apikeys/get", bw, map[string]any{}).ok(t)["data"].([]any)
	for _, k := range list {
		if id := k.(map[string]any)["id"]; id == aKey || id == a2Key {
			t.Fatalf("workspace B lists A's key %v", id)
		}
	}
	ws := s.call("/v2/workspace/get", bw, map[string]any{}).data(t, "")
	if _, ok := ws["apiKeyList"].(map[string]any)[aKey]; ok {
		t.Fatal("Get Workspace of B shows A's key")
	}
}

func TestAPIKeyListPaging(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	id, token := s.newWorkspace("p@example.com")
	w := workspaceHeaders(id, token)
	want := []string{}
	first := s.call("/v2/workspace/apikeys/get", w, map[string]any{}).ok(t)["data"].([]any)
	want = append(want, first[0].(map[string]any)["id"].(string))
	for i := range 6 {
		s.clock.Advance(time.Millisecond) // distinct creation times, like real calls
		k, _ := s.newKey(id, token)
		want = append(want, k)
		_ = i
	}
	var got []string
	tok := ""
	pages := 0
	for {
		body := map[string]any{"pageSize": 3}
		if tok != "" {
			body["pageToken"] = tok
		}
		result := s.call("/v2/workspace/apikeys/get", w, body).ok(t)
		if result["message"] != "API keys retrieved successfully." {
			t.Fatalf("message %v", result["message"])
		}
		for _, k := range result["data"].([]any) {
			got = append(got, k.(map[string]any)["id"].(string))
		}
		pages++
		if pages == 1 {
			// A key created while paging shows up at the end, nothing is skipped or repeated.
			s.clock.Advance(time.Millisecond)
			k, _ := s.newKey(id, token)
			want = append(want, k)
		}
		next, ok := result["nextPageToken"].(string)
		if !ok {
			break
		}
		tok = next
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v\nwant   %v", got, want)
	}

	// A token is bound to its workspace and cannot be forged.
	page := s.call("/v2/workspace/apikeys/get", w, map[string]any{"pageSize": 1}).ok(t)
	token1 := page["nextPageToken"].(string)
	s.call("/v2/workspace/apikeys/get", s.devWorkspace(), map[string]any{"pageToken": token1}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
	s.call("/v2/workspace/apikeys/get", w, map[string]any{"pageToken": tampered(token1)}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
	s.call("/v2/workspace/apikeys/get", w, map[string]any{"pageToken": "eyJjIjowfQ"}).fails(t, 400, "INVALID_ARGUMENT", "pageToken is invalid.")
	for _, size := range []int{-1, 1001} {
		s.call("/v2/workspace/apikeys/get", w, map[string]any{"pageSize": size}).fails(t, 400, "INVALID_ARGUMENT", "pageSize must be between 1 and 1000.")
	}
}

func TestAuthTokensListAndReset(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	id, token := s.newWorkspace("t@example.com")
	w := workspaceHeaders(id, token)
	apiKey, oldToken := s.newKey(id, token)
	s.call("/v2/workspace/domains/update", keyHeaders(apiKey, oldToken), map[string]any{"allowedDomains": []string{"app.example.com"}}).data(t, "")

	listed := s.call("/v2/workspace/authtokens/get", w, map[string]any{"apiKey": apiKey}).data(t, "Auth tokens retrieved successfully.")
	tokens := listed["authTokens"].([]any)
	if listed["apiKey"] != apiKey || len(tokens) != 1 {
		t.Fatalf("listed %v", listed)
	}
	tk := tokens[0].(map[string]any)
	if shown := tk["token"].(string); shown == oldToken || !strings.HasSuffix(shown, oldToken[len(oldToken)-4:]) {
		t.Fatalf("token shown as %q", shown)
	}
	if tk["name"] != "default" || !equalStrings(tk["domains"], "app.example.com") {
		t.Fatalf("token entry %v", tk)
	}

	reset := s.call("/v2/workspace/authtoken/reset", w, map[string]any{"apiKey": apiKey}).data(t, "Auth token reset successfully.")
	nt := reset["newAuthToken"].(map[string]any)
	newToken := nt["token"].(string)
	if reset["apiKey"] != apiKey || len(newToken) < 32 || newToken == oldToken {
		t.Fatalf("reset = %v", reset)
	}
	s.call("/v2/workspace/domains/get", keyHeaders(apiKey, oldToken), map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	s.call("/v2/workspace/domains/get", keyHeaders(apiKey, newToken), map[string]any{}).data(t, "")

	s.call("/v2/workspace/authtokens/get", w, map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "apiKey is required.")
	s.call("/v2/workspace/authtoken/reset", w, map[string]any{"apiKey": "nope"}).fails(t, 404, "NOT_FOUND", "API key not found.")

	// The testing key made with the workspace has no token until one is reset for it.
	ws := s.call("/v2/workspace/get", w, map[string]any{}).data(t, "")
	for k := range ws["apiKeyList"].(map[string]any) {
		if k == apiKey {
			continue
		}
		if got := s.call("/v2/workspace/authtokens/get", w, map[string]any{"apiKey": k}).data(t, "")["authTokens"].([]any); len(got) != 0 {
			t.Fatalf("testing key has tokens %v", got)
		}
		fresh := s.call("/v2/workspace/authtoken/reset", w, map[string]any{"apiKey": k}).data(t, "")["newAuthToken"].(map[string]any)["token"].(string)
		s.call("/v2/workspace/domains/get", keyHeaders(k, fresh), map[string]any{}).data(t, "")
	}
}

func TestCreateWorkspaceValidation(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	long := strings.Repeat("x", 201)
	cases := []struct {
		data    map[string]any
		message string
	}{
		{map[string]any{}, "ownerEmail is required."},
		{map[string]any{"ownerEmail": "  "}, "ownerEmail is required."},
		{map[string]any{"ownerEmail": "not-an-email"}, "ownerEmail must be a valid email address."},
		{map[string]any{"ownerEmail": "Ann <ann@example.com>"}, "ownerEmail must be a valid email address."},
		{map[string]any{"ownerEmail": "ann@example"}, "ownerEmail must be a valid email address."},
		{map[string]any{"ownerEmail": "a@example.com", "avatar": "javascript:alert(1)"}, "avatar must be a valid http(s) URL."},
		{map[string]any{"ownerEmail": "a@example.com", "name": long}, "name must be at most 200 characters."},
		{map[string]any{"ownerEmail": "a@example.com", "workspaceName": long}, "workspaceName must be at most 200 characters."},
		{map[string]any{"ownerEmail": "a@example.com", "workspaceName": "Acme\r\nBcc: evil@example.com"}, "workspaceName must not contain control characters."},
		{map[string]any{"ownerEmail": "a@example.com", "name": "Ann\u202Enna"}, "name must not contain control characters."},
		{map[string]any{"ownerEmail": 7}, "data.ownerEmail must be a string."},
	}
	for _, c := range cases {
		s.call("/v2/workspace/create", nil, c.data).fails(t, 400, "INVALID_ARGUMENT", c.message)
	}
	// Nothing was created by the refusals: the email is still free.
	s.newWorkspace("a@example.com")
	s.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "A@EXAMPLE.com"}).fails(t, 409, "ALREADY_EXISTS", "A workspace already exists for this email.")
	// Unknown fields are ignored.
	s.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "b@example.com", "plan": "enterprise"}).data(t, "Workspace created successfully")
}

func TestCreateAPIKeyValidation(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	id, token := s.newWorkspace("k@example.com")
	w := workspaceHeaders(id, token)
	s.call("/v2/workspace/apikey/create", w, map[string]any{"type": "staging"}).fails(t, 400, "INVALID_ARGUMENT", "type must be one of testing, production.")
	s.call("/v2/workspace/apikey/create", w, map[string]any{"apiKeyName": strings.Repeat("n", 201)}).fails(t, 400, "INVALID_ARGUMENT", "apiKeyName must be at most 200 characters.")
	s.call("/v2/workspace/apikey/create", w, map[string]any{"allowedDomains": []string{"ok.com", "bad domain"}}).fails(t, 400, "INVALID_ARGUMENT", "")
	s.call("/v2/workspace/apikey/create", w, map[string]any{"allowedDomains": "ok.com"}).fails(t, 400, "INVALID_ARGUMENT", "data.allowedDomains must be an array of strings.")

	noToken := s.call("/v2/workspace/apikey/create", w, map[string]any{"createAuthToken": false}).data(t, "")
	if _, ok := noToken["authToken"]; ok || noToken["apiKey"] == "" {
		t.Fatalf("createAuthToken false gave %v", noToken)
	}
	// The refusals created nothing: 1 testing key + 1 without token.
	if n := len(s.call("/v2/workspace/apikeys/get", w, map[string]any{}).ok(t)["data"].([]any)); n != 2 {
		t.Fatalf("%d keys after refusals, want 2", n)
	}
	for i := 2; i < 100; i++ {
		s.call("/v2/workspace/apikey/create", w, map[string]any{"createAuthToken": false}).data(t, "")
	}
	s.call("/v2/workspace/apikey/create", w, map[string]any{}).fails(t, 400, "FAILED_PRECONDITION", "A workspace has at most 100 API keys.")
}

func TestAllowedDomainsUpdate(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	d := s.call("/v2/workspace/domains/update", s.devKey(), map[string]any{
		"allowedDomains": []string{"HTTPS://www.Example.com/path", "example.com", "http://localhost:3000", "*.preview.example.org"},
	}).data(t, "Allowed domains updated successfully.")
	if !equalStrings(d["allowedDomains"], "example.com", "localhost", "*.preview.example.org") {
		t.Fatalf("stored %v", d["allowedDomains"])
	}
	s.call("/v2/workspace/domains/update", s.devKey(), map[string]any{"allowedDomains": []string{"x.com", "not a domain"}}).fails(t, 400, "INVALID_ARGUMENT", "")
	s.call("/v2/workspace/domains/update", s.devKey(), map[string]any{"allowedDomains": []string{"x.com", "javascript:alert(1)"}}).fails(t, 400, "INVALID_ARGUMENT",
		`allowedDomains[1] "javascript:alert(1)" is not a valid domain: only http and https URLs are accepted.`)
	s.call("/v2/workspace/domains/update", s.devKey(), map[string]any{"allowedDomains": []string{"999.1.1.1"}}).fails(t, 400, "INVALID_ARGUMENT",
		`allowedDomains[0] "999.1.1.1" is not a valid domain: it is not a valid IPv4 address.`)
	got := s.call("/v2/workspace/domains/get", s.devKey(), map[string]any{}).data(t, "")
	if !equalStrings(got["allowedDomains"], "example.com", "localhost", "*.preview.example.org") {
		t.Fatalf("a refused update changed the domains: %v", got["allowedDomains"])
	}
	cleared := s.call("/v2/workspace/domains/update", s.devKey(), map[string]any{"allowedDomains": []string{}}).data(t, "")
	if !equalStrings(cleared["allowedDomains"]) {
		t.Fatalf("clearing gave %v", cleared["allowedDomains"])
	}
}

func TestWorkspaceSettings(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	w := s.devWorkspace()
	s.call("/v2/workspace/settings/update", w, map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "")
	d := s.call("/v2/workspace/settings/update", w, map[string]any{"advancedQueries": false}).data(t, "Workspace settings updated successfully.")
	if d["advancedQueries"] != false || d["notifications"] != true || d["advancedWebhooks"] != true {
		t.Fatalf("settings after update %v", d)
	}
	ws := s.call("/v2/workspace/get", w, map[string]any{}).data(t, "")
	if ws["settings"].(map[string]any)["advancedQueries"] != false {
		t.Fatalf("Get Workspace shows %v", ws["settings"])
	}
	s.call("/v2/workspace/settings/update", s.devKey(), map[string]any{"advancedQueries": true}).fails(t, 400, "INVALID_ARGUMENT", "Workspace ID not found in headers.")
}

var linkPattern = regexp.MustCompile(`https?://\S+/v2/workspace/email/verify\?token=\S+`)

// verificationLink returns the link of the last verification email sent to addr.
func (s *system) verificationLink(addr string) string {
	s.t.Helper()
	var link string
	for _, m := range s.mail.Sent() {
		if m.To == addr {
			link = linkPattern.FindString(m.Body)
		}
	}
	if link == "" {
		s.t.Fatalf("no verification link sent to %s: %+v", addr, s.mail.Sent())
	}
	return link
}

// openLink follows the emailed link with GET against the test server, as a browser would.
func (s *system) openLink(link string) response {
	s.t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.do(http.MethodGet, u.RequestURI(), nil, nil)
}

func TestEmailVerification(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--public-url=https://collab.example.com")
	s.newWorkspace("v@example.com")
	link := s.verificationLink("v@example.com")
	if !strings.HasPrefix(link, "https://collab.example.com/v2/workspace/email/verify?token=") {
		t.Fatalf("link %q does not use the public URL", link)
	}
	status := s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "v@example.com"}).data(t, "Email not yet verified")
	if status["verified"] != false {
		t.Fatalf("status %v", status)
	}
	v := s.openLink(link).data(t, "Email verified successfully.")
	if v["ownerEmail"] != "v@example.com" || v["verified"] != true {
		t.Fatalf("verify %v", v)
	}
	s.openLink(link).fails(t, 400, "INVALID_ARGUMENT", "The verification link is invalid or has already been used.")
	status = s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "V@example.com"}).data(t, "Email verified and workspace reactivated")
	if status["verified"] != true {
		t.Fatalf("status %v", status)
	}

	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "nobody@example.com"}).fails(t, 404, "NOT_FOUND", "User not found.")
	s.call("/v2/workspace/email/status", nil, map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "ownerEmail is required.")
	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "bad"}).fails(t, 400, "INVALID_ARGUMENT", "ownerEmail must be a valid email address.")
	for _, bad := range []string{"", "nodot", "unknown.secret", ".x", "x."} {
		r := s.call("/v2/workspace/email/verify", nil, map[string]any{"token": bad})
		if r.status != 400 {
			t.Fatalf("token %q: %d %s", bad, r.status, r.raw)
		}
	}
}

// Spec section 3: keys expire when the owner email is unverified after the grace period, and
// Get Email Verification Status reactivates them once it is verified.
func TestUnverifiedEmailGracePeriod(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--email-grace-period=72h")
	id, token := s.newWorkspace("late@example.com")
	key, auth := s.newKey(id, token)
	k := keyHeaders(key, auth)
	s.call("/v2/workspace/domains/get", k, map[string]any{}).data(t, "")
	s.clock.Advance(72*time.Hour - time.Second)
	s.call("/v2/workspace/domains/get", k, map[string]any{}).data(t, "")
	s.clock.Advance(time.Second)
	expired := "API key expired: the workspace owner email is not verified. Verify it, then call Get Email Verification Status to reactivate the API keys."
	s.call("/v2/workspace/domains/get", k, map[string]any{}).fails(t, 403, "PERMISSION_DENIED", expired)
	// Workspace-level calls still work, so the owner can manage the workspace.
	s.call("/v2/workspace/get", workspaceHeaders(id, token), map[string]any{}).data(t, "")

	s.openLink(s.verificationLink("late@example.com")).data(t, "Email verified successfully.")
	// Verified, but not yet reactivated.
	s.call("/v2/workspace/domains/get", k, map[string]any{}).fails(t, 403, "PERMISSION_DENIED", expired)
	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "late@example.com"}).data(t, "Email verified and workspace reactivated")
	s.call("/v2/workspace/domains/get", k, map[string]any{}).data(t, "")

	// Verified within the grace period: the keys never expire.
	id2, token2 := s.newWorkspace("early@example.com")
	key2, auth2 := s.newKey(id2, token2)
	s.openLink(s.verificationLink("early@example.com")).data(t, "")
	s.clock.Advance(365 * 24 * time.Hour)
	s.call("/v2/workspace/domains/get", keyHeaders(key2, auth2), map[string]any{}).data(t, "")
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--rate-limit=createWorkspace=2,getWorkspace=3,emailStatus=2")
	limited := "Rate limit exceeded. Try again after 1 minute."
	for i := range 2 {
		s.newWorkspace(fmt.Sprintf("r%d@example.com", i))
	}
	s.call("/v2/workspace/create", nil, map[string]any{"ownerEmail": "r9@example.com"}).fails(t, 429, "RESOURCE_EXHAUSTED", limited)

	w := s.devWorkspace()
	for range 3 {
		s.call("/v2/workspace/get", w, map[string]any{}).data(t, "")
	}
	s.call("/v2/workspace/get", w, map[string]any{}).fails(t, 429, "RESOURCE_EXHAUSTED", limited)

	for range 2 {
		s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "r0@example.com"}).data(t, "")
	}
	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "R0@example.com"}).fails(t, 429, "RESOURCE_EXHAUSTED", limited)
	// Limits are per email: another email is not affected.
	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "r1@example.com"}).data(t, "")

	s.clock.Advance(time.Minute)
	s.newWorkspace("r2@example.com")
	s.call("/v2/workspace/get", w, map[string]any{}).data(t, "")
	s.call("/v2/workspace/email/status", nil, map[string]any{"ownerEmail": "r0@example.com"}).data(t, "")
}

func TestRateLimitGetWorkspaceIsPerWorkspace(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--rate-limit=getWorkspace=1")
	id, token := s.newWorkspace("g@example.com")
	s.call("/v2/workspace/get", s.devWorkspace(), map[string]any{}).data(t, "")
	s.call("/v2/workspace/get", s.devWorkspace(), map[string]any{}).fails(t, 429, "RESOURCE_EXHAUSTED", "")
	s.call("/v2/workspace/get", workspaceHeaders(id, token), map[string]any{}).data(t, "")
}

// lockedBuffer collects a process's log; the process writes from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The Slack webhook URL over HTTP with the workspace credentials: set, read back masked by
// the update's answer and Get Workspace, a bad URL refused, "" removes it; in full only through
// the internal GetSlackWebhook; never in the log, even at debug level.
func TestWorkspaceSlackWebhook(t *testing.T) {
	t.Parallel()
	logged := &lockedBuffer{}
	cfg := config(t, "--internal-token="+testInternalToken, "--log-level=debug")
	s := startLogging(t, cfg, logged)
	w := s.devWorkspace()
	const secretPart = "T0AAAAAAA/B0BBBBBBB/XXXXXXXXXXXXXXXXXXXXabcd"
	webhook := "https://hooks.slack.com/services/" + secretPart
	const masked = "https://hooks.slack.com/…abcd"

	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	internal := metadata.AppendToOutgoingContext(context.Background(), authn.HeaderInternalToken, testInternalToken)
	stored := func() string {
		t.Helper()
		resp, err := workspacev1.NewWorkspaceServiceClient(conn).GetSlackWebhook(internal, &workspacev1.GetSlackWebhookRequest{WorkspaceId: s.proc.Dev.WorkspaceID})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetUrl()
	}
	settings := func() map[string]any {
		t.Helper()
		return s.call("/v2/workspace/get", w, map[string]any{}).data(t, "Workspace retrieved successfully")["settings"].(map[string]any)
	}
	if got := settings()["slackWebhookUrl"]; got != "" || stored() != "" {
		t.Fatalf("a new workspace has a webhook: %v", got)
	}

	d := s.call("/v2/workspace/settings/update", w, map[string]any{"slackWebhookUrl": webhook}).data(t, "Workspace settings updated successfully.")
	if d["slackWebhookUrl"] != masked || d["notifications"] != true {
		t.Fatalf("update answer %v", d)
	}
	if got := settings(); got["slackWebhookUrl"] != masked || got["advancedQueries"] != true {
		t.Fatalf("Get Workspace shows %v", got)
	}
	if got := stored(); got != webhook {
		t.Fatalf("GetSlackWebhook: %q", got)
	}
	// Key-level calls authenticate through the same settings; they work and carry no URL.
	s.call("/v2/workspace/domains/get", s.devKey(), map[string]any{}).data(t, "")

	for _, bad := range []any{"hooks.slack.com/services/x", "ftp://hooks.slack.com/x", "https://", "https://hooks.slack.com/a b",
		"https://hooks.slack.com/\u0007", "https://hooks.slack.com/" + strings.Repeat("x", 2048)} {
		s.call("/v2/workspace/settings/update", w, map[string]any{"slackWebhookUrl": bad}).fails(t, 400, "INVALID_ARGUMENT", "slackWebhookUrl must be a valid http(s) URL.")
	}
	s.call("/v2/workspace/settings/update", w, map[string]any{"slackWebhookUrl": 7}).fails(t, 400, "INVALID_ARGUMENT", "")
	if got := stored(); got != webhook {
		t.Fatalf("a refused update changed the URL to %q", got)
	}
	// Another switch leaves it alone.
	d = s.call("/v2/workspace/settings/update", w, map[string]any{"advancedWebhooks": false}).data(t, "")
	if d["slackWebhookUrl"] != masked || d["advancedWebhooks"] != false {
		t.Fatalf("after another switch %v", d)
	}

	d = s.call("/v2/workspace/settings/update", w, map[string]any{"slackWebhookUrl": ""}).data(t, "Workspace settings updated successfully.")
	if d["slackWebhookUrl"] != "" {
		t.Fatalf("after removing %v", d)
	}
	if got := settings()["slackWebhookUrl"]; got != "" || stored() != "" {
		t.Fatalf("removed, Get Workspace shows %v", got)
	}
	_, err = workspacev1.NewWorkspaceServiceClient(conn).GetSlackWebhook(internal, &workspacev1.GetSlackWebhookRequest{WorkspaceId: "nope"})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "Workspace not found." {
		t.Fatalf("unknown workspace: %v", st)
	}
	s.call("/v2/workspace/slack_webhook/get", w, map[string]any{}).fails(t, 404, "NOT_FOUND", "")

	if !strings.Contains(logged.String(), "UpdateWorkspaceSettings") {
		t.Fatalf("the debug log does not show the calls:\n%s", logged.String())
	}
	if strings.Contains(logged.String(), secretPart) || strings.Contains(logged.String(), "hooks.slack.com") {
		t.Fatalf("the log holds the webhook:\n%s", logged.String())
	}
}
