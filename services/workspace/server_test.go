package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/service"
)

// brokenStore fails every read after break is set, like a store whose server went away.
type brokenStore struct {
	Store
	broken bool
}

var errStoreDown = errors.New("connection refused by 10.0.0.7:27017")

func (b *brokenStore) WorkspaceByOwnerEmail(ctx context.Context, e string) (*Workspace, error) {
	if b.broken {
		return nil, errStoreDown
	}
	return b.Store.WorkspaceByOwnerEmail(ctx, e)
}

func (b *brokenStore) APIKey(ctx context.Context, k string) (*APIKey, error) {
	if b.broken {
		return nil, errStoreDown
	}
	return b.Store.APIKey(ctx, k)
}

func newTestServer(t *testing.T, store Store, opts ...Option) (*Server, *email.Memory) {
	t.Helper()
	mail := &email.Memory{}
	base := []Option{WithClock(clock.NewFake(time.Unix(1e9, 0))), WithEmailSender(mail), WithLogger(slog.New(slog.DiscardHandler)), WithRateLimits(RateLimits{})}
	s, err := New(store, make([]byte, 32), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, mail
}

func asStatus(err error) *status.Status {
	return status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err))
}

func TestStoreFailuresAnswerInternal(t *testing.T) {
	store := &brokenStore{Store: NewMemoryStore()}
	s, _ := newTestServer(t, store)
	ctx := context.Background()
	if _, err := s.CreateWorkspace(ctx, &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com"}); err != nil {
		t.Fatal(err)
	}
	store.broken = true

	_, err := s.GetEmailVerificationStatus(ctx, &workspacev1.GetEmailVerificationStatusRequest{OwnerEmail: "a@example.com"})
	if st := asStatus(err); st.Code() != codes.Internal || st.Message() != "Email status check failed." {
		t.Fatalf("email status with a broken store: %v", st)
	}
	_, err = s.AuthenticateKey(ctx, "k", "t")
	st := asStatus(err)
	if st.Code() != codes.Internal || strings.Contains(st.Message(), "10.0.0.7") {
		t.Fatalf("authentication with a broken store: %v", st)
	}
}

func TestCreateWorkspaceSendsTheLink(t *testing.T) {
	s, mail := newTestServer(t, NewMemoryStore(), WithPublicURL("https://api.example.com/"), WithEmailGracePeriod(72*time.Hour))
	resp, err := s.CreateWorkspace(context.Background(), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	sent := mail.Sent()
	if len(sent) != 1 || sent[0].To != "a@example.com" {
		t.Fatalf("sent %+v", sent)
	}
	want := "https://api.example.com/v2/workspace/email/verify?token=" + resp.GetData().GetId() + "."
	if !strings.Contains(sent[0].Body, want) || !strings.Contains(sent[0].Body, "3 days") {
		t.Fatalf("body %q lacks %q or the grace period", sent[0].Body, want)
	}
}

// A failing mail server does not undo the workspace: the grace period leaves time to fix it.
type failingSender struct{}

func (failingSender) Send(context.Context, email.Message) error { return errors.New("smtp down") }

func TestMailFailureKeepsTheWorkspace(t *testing.T) {
	s, _ := newTestServer(t, NewMemoryStore(), WithEmailSender(failingSender{}))
	resp, err := s.CreateWorkspace(context.Background(), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com"})
	if err != nil || resp.GetData().GetId() == "" {
		t.Fatalf("create with a failing mailer: %v %v", resp, err)
	}
}

func TestAuthenticateRPC(t *testing.T) {
	s, _ := newTestServer(t, NewMemoryStore())
	ctx := context.Background()
	if err := s.EnsureDevWorkspace(ctx, service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		req  *workspacev1.AuthenticateRequest
		code codes.Code
		msg  string
	}{
		{&workspacev1.AuthenticateRequest{}, codes.InvalidArgument, "credentials are required."},
		{keyReq("", "x"), codes.InvalidArgument, "API key not found in headers."},
		{keyReq("k", ""), codes.InvalidArgument, "Auth Token not found in headers."},
		{keyReq("k", "t-token"), codes.OK, ""},
		{wsReq("", "x"), codes.InvalidArgument, "Workspace ID not found in headers."},
		{wsReq("w", ""), codes.InvalidArgument, "Auth Token not found in headers."},
		{wsReq("w", "wt-token"), codes.OK, ""},
	}
	for _, c := range cases {
		resp, err := s.Authenticate(ctx, c.req)
		st := asStatus(err)
		if st.Code() != c.code || (c.msg != "" && st.Message() != c.msg) {
			t.Errorf("%v: %v", c.req, st)
		}
		if c.code == codes.OK && (resp.GetWorkspaceId() != "w" || !resp.GetSettings().GetAdvancedQueries()) {
			t.Errorf("%v: %v", c.req, resp)
		}
	}
}

func keyReq(k, t string) *workspacev1.AuthenticateRequest {
	return &workspacev1.AuthenticateRequest{Credentials: &workspacev1.AuthenticateRequest_ApiKey{ApiKey: &workspacev1.ApiKeyCredentials{ApiKey: k, AuthToken: t}}}
}

func wsReq(id, t string) *workspacev1.AuthenticateRequest {
	return &workspacev1.AuthenticateRequest{Credentials: &workspacev1.AuthenticateRequest_Workspace{Workspace: &workspacev1.WorkspaceCredentials{WorkspaceId: id, AuthToken: t}}}
}

// Restarting with the same dev credentials keeps them working, even after tokens were reset.
func TestEnsureDevWorkspaceIsIdempotent(t *testing.T) {
	store := NewMemoryStore()
	s, _ := newTestServer(t, store)
	ctx := context.Background()
	dev := service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}
	if err := s.EnsureDevWorkspace(ctx, dev); err != nil {
		t.Fatal(err)
	}
	caller := authn.WithCaller(ctx, authn.Caller{WorkspaceID: "w"})
	if _, err := s.ResetAuthToken(caller, &workspacev1.ResetAuthTokenRequest{ApiKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateKey(ctx, "k", "t-token"); err == nil {
		t.Fatal("old token works after reset")
	}
	if err := s.EnsureDevWorkspace(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateKey(ctx, "k", "t-token"); err != nil {
		t.Fatalf("dev token after restart: %v", err)
	}
	if _, err := s.AuthenticateWorkspace(ctx, "w", "wt-token"); err != nil {
		t.Fatalf("dev workspace token after restart: %v", err)
	}
	if n, _ := store.CountAPIKeys(ctx, "w"); n != 1 {
		t.Fatalf("%d keys after two starts", n)
	}
}

// A line break in the workspace name used to reach the verification mail's subject, where the
// SMTP sender refuses it: the workspace was made and its mail silently never sent. Names are
// refused up front now, in every name field of the service.
func TestNamesRefuseControlCharacters(t *testing.T) {
	store := NewMemoryStore()
	s, mail := newTestServer(t, store)
	ctx := context.Background()
	for _, bad := range []string{"Acme\r\nBcc: evil@example.com", "Acme\nTeam", "a\x00b", "a\x7fb", "a\u0085b", "a\u2028b", "a\u202Eb"} {
		for _, req := range []struct {
			field string
			req   *workspacev1.CreateWorkspaceRequest
		}{
			{"workspaceName", &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com", WorkspaceName: bad}},
			{"name", &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com", Name: bad}},
		} {
			_, err := s.CreateWorkspace(ctx, req.req)
			if st := asStatus(err); st.Code() != codes.InvalidArgument || st.Message() != req.field+" must not contain control characters." {
				t.Errorf("%s %q: %v", req.field, bad, st)
			}
		}
	}
	if _, err := store.WorkspaceByOwnerEmail(ctx, "a@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused create stored a workspace: %v", err)
	}
	if n := len(mail.Sent()); n != 0 {
		t.Fatalf("%d mails sent for refused creates", n)
	}

	resp, err := s.CreateWorkspace(ctx, &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com", Name: " Zoë ", WorkspaceName: "Équipe \U0001F680\n"})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetData(); d.GetName() != "Équipe \U0001F680" || d.GetOwner().GetName() != "Zoë" {
		t.Fatalf("names stored as %q, %q", d.GetName(), d.GetOwner().GetName())
	}
	caller := authn.WithCaller(ctx, authn.Caller{WorkspaceID: resp.GetData().GetId()})
	for _, bad := range []string{"prod\r\nkey", "prod\tkey", "prod\u2029key", "\u2066prod"} {
		_, err := s.CreateApiKey(caller, &workspacev1.CreateApiKeyRequest{ApiKeyName: bad})
		if st := asStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "apiKeyName must not contain control characters." {
			t.Errorf("apiKeyName %q: %v", bad, st)
		}
	}
	if n, _ := store.CountAPIKeys(ctx, resp.GetData().GetId()); n != 1 {
		t.Fatalf("%d keys after refused creates", n)
	}
}

// The API key listing's page tokens expire after cursor.DefaultLifetime, by the injected clock.
func TestListApiKeysPageTokenExpires(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC))
	s, _ := newTestServer(t, NewMemoryStore(), WithClock(clk))
	ctx := context.Background()
	if err := s.EnsureDevWorkspace(ctx, service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}); err != nil {
		t.Fatal(err)
	}
	caller := authn.WithCaller(ctx, authn.Caller{WorkspaceID: "w"})
	if _, err := s.CreateApiKey(caller, &workspacev1.CreateApiKeyRequest{}); err != nil {
		t.Fatal(err)
	}
	first, err := s.ListApiKeys(caller, &workspacev1.ListApiKeysRequest{PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page %v %v", first, err)
	}
	clk.Advance(cursor.DefaultLifetime)
	if _, err := s.ListApiKeys(caller, &workspacev1.ListApiKeysRequest{PageSize: 1, PageToken: first.GetNextPageToken()}); err != nil {
		t.Fatalf("a token at the end of its lifetime: %v", err)
	}
	clk.Advance(time.Second)
	_, err = s.ListApiKeys(caller, &workspacev1.ListApiKeysRequest{PageSize: 1, PageToken: first.GetNextPageToken()})
	if st := asStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "pageToken has expired; request the first page again." {
		t.Fatalf("expired token: %v", st)
	}
	_, err = s.ListApiKeys(caller, &workspacev1.ListApiKeysRequest{PageToken: "garbage"})
	if st := asStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "pageToken is invalid." {
		t.Fatalf("forged token: %v", st)
	}
}

// The verification secret reaches the owner's mailbox and nowhere else: not the log, whatever
// the sender.
func TestVerificationSecretIsNeverLogged(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir, err := email.NewDir(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	for name, sender := range map[string]email.Sender{
		"no sender (the fallback)": email.Log{Logger: log}, "mail directory": dir, "failing": failingSender{},
	} {
		mail := &teeSender{next: sender}
		s, err := New(NewMemoryStore(), make([]byte, 32), WithLogger(log), WithEmailSender(mail), WithRateLimits(RateLimits{}))
		if err != nil {
			t.Fatal(err)
		}
		logged.Reset()
		if _, err := s.CreateWorkspace(context.Background(), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "a@example.com"}); err != nil {
			t.Fatal(err)
		}
		link := linkPattern.FindString(mail.body)
		if link == "" {
			t.Fatalf("%s: no link in %q", name, mail.body)
		}
		secret := link[strings.LastIndex(link, ".")+1:]
		if strings.Contains(logged.String(), secret) || strings.Contains(logged.String(), "token=") {
			t.Errorf("%s: the log holds the verification link:\n%s", name, logged.String())
		}
		if !strings.Contains(logged.String(), "a@example.com") && name != "failing" {
			t.Errorf("%s: the log does not say a mail went out:\n%s", name, logged.String())
		}
	}
	// The fallback a server gets without WithEmailSender is the one tested above.
	bare, err := New(NewMemoryStore(), make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bare.mail.(email.Log); !ok {
		t.Fatalf("default sender %T", bare.mail)
	}
}

var linkPattern = regexp.MustCompile(`https?://\S+/v2/workspace/email/verify\?token=\S+`)

// teeSender remembers the last body and passes the message on.
type teeSender struct {
	next email.Sender
	body string
}

func (t *teeSender) Send(ctx context.Context, m email.Message) error {
	t.body = m.Body
	return t.next.Send(ctx, m)
}

// The generation of an API key's auth token: Authenticate reports it, Reset Auth Token moves
// it on, and GetTokenGeneration tells it without an auth token, refusing keys as
// authentication does.
func TestTokenGeneration(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	store := NewMemoryStore()
	s, _ := newTestServer(t, store, WithClock(clk), WithEmailGracePeriod(time.Hour))
	ctx := context.Background()
	dev := service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}
	if err := s.EnsureDevWorkspace(ctx, dev); err != nil {
		t.Fatal(err)
	}
	generation := func() int64 {
		t.Helper()
		resp, err := s.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: "k"})
		if err != nil || resp.GetWorkspaceId() != "w" {
			t.Fatalf("GetTokenGeneration: %v %v", resp, err)
		}
		return resp.GetTokenGeneration()
	}
	before := generation()
	auth, err := s.Authenticate(ctx, keyReq("k", "t-token"))
	if err != nil || auth.GetTokenGeneration() != before {
		t.Fatalf("Authenticate: %v %v, want generation %d", auth, err, before)
	}
	// A restart with the same dev token revokes nothing.
	if err := s.EnsureDevWorkspace(ctx, dev); err != nil || generation() != before {
		t.Fatalf("restart moved the generation: %d -> %d (%v)", before, generation(), err)
	}
	caller := authn.WithCaller(ctx, authn.Caller{WorkspaceID: "w"})
	reset, err := s.ResetAuthToken(caller, &workspacev1.ResetAuthTokenRequest{ApiKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if generation() != before+1 {
		t.Fatalf("after a reset: %d, want %d", generation(), before+1)
	}
	c, err := s.AuthenticateKey(ctx, "k", reset.GetData().GetNewAuthToken().GetToken())
	if err != nil || c.TokenGeneration != before+1 {
		t.Fatalf("caller after reset %+v %v", c, err)
	}
	// Changing the domains is no reset.
	if _, err := s.UpdateAllowedDomains(authn.WithCaller(ctx, c), &workspacev1.UpdateAllowedDomainsRequest{AllowedDomains: []string{"a.com"}}); err != nil || generation() != before+1 {
		t.Fatalf("domains moved the generation: %v", err)
	}

	for _, bad := range []struct {
		key  string
		code codes.Code
		msg  string
	}{
		{"", codes.InvalidArgument, "apiKey is required."},
		{"nope", codes.PermissionDenied, "Invalid API key."},
	} {
		_, err := s.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: bad.key})
		if st := asStatus(err); st.Code() != bad.code || st.Message() != bad.msg {
			t.Errorf("%q: %v", bad.key, st)
		}
	}
	// An unverified owner's keys past the grace period: refused as authentication refuses them.
	created, err := s.CreateWorkspace(ctx, &workspacev1.CreateWorkspaceRequest{OwnerEmail: "late@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	var unverifiedKey string
	for k := range created.GetData().GetApiKeyList() {
		unverifiedKey = k
	}
	if _, err := s.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: unverifiedKey}); err != nil {
		t.Fatalf("within the grace period: %v", err)
	}
	clk.Advance(time.Hour)
	_, err = s.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: unverifiedKey})
	if st := asStatus(err); st.Code() != codes.PermissionDenied || !strings.HasPrefix(st.Message(), "API key expired") {
		t.Fatalf("expired key: %v", st)
	}
}

func TestMaskWebhookURL(t *testing.T) {
	for raw, want := range map[string]string{
		"": "",
		"https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXabcd": "https://hooks.slack.com/…abcd",
		"http://example.com:8080/hook/0123456789wxyz":                   "http://example.com:8080/…wxyz",
		"https://user:pass@hooks.example.com/services/0123456789abcdef": "https://hooks.example.com/…cdef",
		"https://example.com/short":                                     "https://example.com/…",
		"https://example.com?token=0123456789abcdef":                    "https://example.com/…cdef",
		"HTTPS://Example.com/services/0123456789ab#frag":                "https://Example.com/…frag",
		"https://example.com":                                           "https://example.com",
		"https://example.com/sérvices/ñ0123456789é":                     "https://example.com/…789é",
	} {
		if got := maskWebhookURL(raw); got != want {
			t.Errorf("mask(%q) = %q, want %q", raw, got, want)
		}
	}
}

// The Slack webhook URL: set and removed by Update Workspace Settings, read back masked
// everywhere a caller sees it, in full only through the internal GetSlackWebhook, never on the
// authenticated caller and never in the log.
func TestSlackWebhookSetting(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, _ := newTestServer(t, NewMemoryStore(), WithLogger(log))
	ctx := context.Background()
	dev := service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}
	if err := s.EnsureDevWorkspace(ctx, dev); err != nil {
		t.Fatal(err)
	}
	caller, err := s.AuthenticateWorkspace(ctx, "w", "wt-token")
	if err != nil {
		t.Fatal(err)
	}
	wctx := authn.WithCaller(ctx, caller)
	webhook := func() string {
		t.Helper()
		resp, err := s.GetSlackWebhook(ctx, &workspacev1.GetSlackWebhookRequest{WorkspaceId: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetUrl()
	}
	if got := webhook(); got != "" {
		t.Fatalf("new workspace: %q", got)
	}

	const secretPart = "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXabcd"
	url := "https://hooks.slack.com/services/" + secretPart
	const masked = "https://hooks.slack.com/…abcd"
	upd, err := s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{SlackWebhookUrl: &url})
	if err != nil {
		t.Fatal(err)
	}
	if d := upd.GetData(); d.GetSlackWebhookUrl() != masked || !d.GetNotifications() || !d.GetAdvancedQueries() || !d.GetAdvancedWebhooks() {
		t.Fatalf("update answer %v", d)
	}
	if got := webhook(); got != url {
		t.Fatalf("GetSlackWebhook: %q, want %q", got, url)
	}
	ws, err := s.GetWorkspace(wctx, &workspacev1.GetWorkspaceRequest{})
	if err != nil || ws.GetData().GetSettings().GetSlackWebhookUrl() != masked {
		t.Fatalf("Get Workspace: %v %v", ws.GetData().GetSettings(), err)
	}
	// Another switch leaves the URL alone.
	off := false
	upd, err = s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{AdvancedQueries: &off})
	if err != nil || upd.GetData().GetSlackWebhookUrl() != masked || upd.GetData().GetAdvancedQueries() || webhook() != url {
		t.Fatalf("after another switch: %v %v", upd.GetData(), err)
	}
	// Authentication carries the three switches, never the URL.
	for name, req := range map[string]*workspacev1.AuthenticateRequest{"key": keyReq("k", "t-token"), "workspace": wsReq("w", "wt-token")} {
		auth, err := s.Authenticate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if auth.GetSettings().GetSlackWebhookUrl() != "" || strings.Contains(auth.String(), "hooks.slack.com") {
			t.Errorf("Authenticate (%s) carries the webhook: %v", name, auth)
		}
		if c := authn.CallerFromProto(auth); strings.Contains(fmt.Sprintf("%+v", c), "hooks.slack.com") {
			t.Errorf("caller (%s) carries the webhook: %+v", name, c)
		}
	}
	if c, err := s.AuthenticateKey(ctx, "k", "t-token"); err != nil || strings.Contains(fmt.Sprintf("%+v", c), "hooks.slack.com") {
		t.Errorf("key caller %+v %v", c, err)
	}

	for _, bad := range []string{
		"hooks.slack.com/services/x", "ftp://hooks.slack.com/x", "https://", "https:///path", "not a url", "javascript:alert(1)",
		"https://hooks.slack.com/services/a b", "https://hooks.slack.com/\x01x", "https://hooks.slack.com/\u0085x", "https://hooks.slack.com/\tx",
		"https://hooks.slack.com/" + strings.Repeat("a", 2048),
	} {
		_, err := s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{SlackWebhookUrl: &bad})
		if st := asStatus(err); st.Code() != codes.InvalidArgument || st.Message() != "slackWebhookUrl must be a valid http(s) URL." {
			t.Errorf("%q: %v", bad, st)
		}
	}
	if got := webhook(); got != url {
		t.Fatalf("a refused update changed the URL to %q", got)
	}
	longest := "https://hooks.slack.com/" + strings.Repeat("a", 2048-len("https://hooks.slack.com/"))
	if _, err := s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{SlackWebhookUrl: &longest}); err != nil || webhook() != longest {
		t.Fatalf("a URL of 2048 characters: %v", err)
	}
	_, err = s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{})
	if st := asStatus(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "slackWebhookUrl") {
		t.Errorf("empty update: %v", st)
	}

	empty := ""
	upd, err = s.UpdateWorkspaceSettings(wctx, &workspacev1.UpdateWorkspaceSettingsRequest{SlackWebhookUrl: &empty})
	if err != nil || upd.GetData().GetSlackWebhookUrl() != "" || webhook() != "" {
		t.Fatalf("removing: %v %v", upd.GetData(), err)
	}

	for _, bad := range []struct {
		id   string
		code codes.Code
		msg  string
	}{
		{"", codes.InvalidArgument, "workspaceId is required."},
		{"nope", codes.NotFound, "Workspace not found."},
	} {
		_, err := s.GetSlackWebhook(ctx, &workspacev1.GetSlackWebhookRequest{WorkspaceId: bad.id})
		if st := asStatus(err); st.Code() != bad.code || st.Message() != bad.msg {
			t.Errorf("GetSlackWebhook(%q): %v", bad.id, st)
		}
	}
	if strings.Contains(logged.String(), secretPart) || strings.Contains(logged.String(), "hooks.slack.com") {
		t.Errorf("the log holds the webhook:\n%s", logged.String())
	}
}
