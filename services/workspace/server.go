package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/email"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/ratelimit"
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/internal/validate"
)

const statusSuccess = "success"

// Limits and defaults.
const (
	// DefaultEmailGracePeriod is how long API keys work before the owner email is verified.
	DefaultEmailGracePeriod = 7 * 24 * time.Hour
	maxAPIKeysPerWorkspace  = 100
	defaultAPIKeyPageSize   = 100
	maxAPIKeyPageSize       = 1000
	maxNameLength           = 200
	defaultTokenName        = "default"
)

// RateLimits are calls allowed per minute; 0 or less means no limit.
type RateLimits struct {
	CreateWorkspace int // per client address
	GetWorkspace    int // per workspace
	EmailStatus     int // per owner email
	// EmailStatusPerAddress bounds Get Email Verification Status per client address too, so
	// one caller cannot probe many emails (each within its own limit) from one address.
	EmailStatusPerAddress int
}

// DefaultRateLimits are the limits when none are configured.
var DefaultRateLimits = RateLimits{CreateWorkspace: 10, GetWorkspace: 60, EmailStatus: 20, EmailStatusPerAddress: 60}

// Server implements the workspace service and authenticates callers for every service.
type Server struct {
	workspacev1.UnimplementedWorkspaceServiceServer

	store     Store
	clock     clock.Clock
	mail      email.Sender
	log       *slog.Logger
	cursors   *cursor.Sealer
	grace     time.Duration
	publicURL string

	createLimit, getLimit, statusLimit, statusAddrLimit *ratelimit.Limiter
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option              { return func(s *Server) { s.clock = c } }
func WithEmailSender(m email.Sender) Option       { return func(s *Server) { s.mail = m } }
func WithLogger(l *slog.Logger) Option            { return func(s *Server) { s.log = l } }
func WithEmailGracePeriod(d time.Duration) Option { return func(s *Server) { s.grace = d } }

// WithPublicURL sets the base URL that links in emails point at (the gateway's address as
// callers reach it).
func WithPublicURL(u string) Option {
	return func(s *Server) { s.publicURL = strings.TrimRight(u, "/") }
}

// WithRateLimits sets the per-minute limits.
func WithRateLimits(l RateLimits) Option {
	return func(s *Server) {
		s.createLimit = ratelimit.New(l.CreateWorkspace, time.Minute, s.clock)
		s.getLimit = ratelimit.New(l.GetWorkspace, time.Minute, s.clock)
		s.statusLimit = ratelimit.New(l.EmailStatus, time.Minute, s.clock)
		s.statusAddrLimit = ratelimit.New(l.EmailStatusPerAddress, time.Minute, s.clock)
	}
}

// New returns a Server on store. secret keys its page tokens.
func New(store Store, secret []byte, opts ...Option) (*Server, error) {
	s := &Server{
		store: store, clock: clock.Real(), log: slog.Default(),
		grace: DefaultEmailGracePeriod, publicURL: "http://127.0.0.1:8080",
	}
	for _, o := range opts {
		o(s)
	}
	if s.mail == nil {
		s.mail = email.Log{Logger: s.log} // says a mail was not sent; never logs the link
	}
	// After the options: page tokens are dated by the injected clock.
	key, err := cursor.DeriveKey(secret, "workspace.apikeys")
	if err != nil {
		return nil, err
	}
	if s.cursors, err = cursor.NewSealer(key, s.clock); err != nil {
		return nil, err
	}
	if s.createLimit == nil {
		WithRateLimits(DefaultRateLimits)(s)
	}
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() time.Time { return storeTime(s.clock.Now()) }

// ---- Authentication (authn.Authenticator) ----

var (
	errInvalidAPIKey  = apierr.PermissionDenied("Invalid API key.")
	errAuthTokenFound = apierr.InvalidArgument("Auth token not found.")
	errKeysExpired    = apierr.PermissionDenied("API key expired: the workspace owner email is not verified. Verify it, then call Get Email Verification Status to reactivate the API keys.")
	errNoWorkspace    = apierr.NotFound("Workspace not found.")
	errBadWSToken     = apierr.Unauthenticated("Invalid auth token for workspace.")
)

// keysExpired reports whether the workspace's API keys stopped working for lack of a verified
// owner email.
func (s *Server) keysExpired(w *Workspace) bool {
	return !w.KeysActive && !s.clock.Now().Before(w.CreatedAt.Add(s.grace))
}

// AuthenticateKey implements authn.Authenticator.
func (s *Server) AuthenticateKey(ctx context.Context, apiKey, authToken string) (authn.Caller, error) {
	key, err := s.store.APIKey(ctx, apiKey)
	if errors.Is(err, ErrNotFound) {
		return authn.Caller{}, errInvalidAPIKey
	}
	if err != nil {
		return authn.Caller{}, fmt.Errorf("authenticate key: %w", err)
	}
	matched := false
	for _, t := range key.Tokens {
		if ids.Matches(authToken, t.Hash) {
			matched = true
		}
	}
	if !matched {
		return authn.Caller{}, errAuthTokenFound
	}
	ws, err := s.store.Workspace(ctx, key.WorkspaceID)
	if errors.Is(err, ErrNotFound) {
		return authn.Caller{}, errInvalidAPIKey
	}
	if err != nil {
		return authn.Caller{}, fmt.Errorf("authenticate key: %w", err)
	}
	if s.keysExpired(ws) {
		return authn.Caller{}, errKeysExpired
	}
	return callerOf(ws, key), nil
}

// AuthenticateWorkspace implements authn.Authenticator.
func (s *Server) AuthenticateWorkspace(ctx context.Context, workspaceID, token string) (authn.Caller, error) {
	ws, err := s.store.Workspace(ctx, workspaceID)
	if errors.Is(err, ErrNotFound) {
		return authn.Caller{}, errNoWorkspace
	}
	if err != nil {
		return authn.Caller{}, fmt.Errorf("authenticate workspace: %w", err)
	}
	if !ids.Matches(token, ws.TokenHash) {
		return authn.Caller{}, errBadWSToken
	}
	return callerOf(ws, nil), nil
}

func callerOf(ws *Workspace, key *APIKey) authn.Caller {
	c := authn.Caller{WorkspaceID: ws.ID, Settings: authn.Settings(ws.Settings)}
	if key != nil {
		c.APIKey = key.Key
		c.AllowedDomains = key.AllowedDomains
		c.TokenGeneration = key.TokenGeneration
	}
	return c
}

// Authenticate is the RPC the other services call.
func (s *Server) Authenticate(ctx context.Context, req *workspacev1.AuthenticateRequest) (*workspacev1.AuthenticateResponse, error) {
	var (
		c   authn.Caller
		err error
	)
	switch cred := req.GetCredentials().(type) {
	case *workspacev1.AuthenticateRequest_ApiKey:
		if cred.ApiKey.GetApiKey() == "" {
			return nil, apierr.InvalidArgument("API key not found in headers.")
		}
		if cred.ApiKey.GetAuthToken() == "" {
			return nil, apierr.InvalidArgument("Auth Token not found in headers.")
		}
		c, err = s.AuthenticateKey(ctx, cred.ApiKey.GetApiKey(), cred.ApiKey.GetAuthToken())
	case *workspacev1.AuthenticateRequest_Workspace:
		if cred.Workspace.GetWorkspaceId() == "" {
			return nil, apierr.InvalidArgument("Workspace ID not found in headers.")
		}
		if cred.Workspace.GetAuthToken() == "" {
			return nil, apierr.InvalidArgument("Auth Token not found in headers.")
		}
		c, err = s.AuthenticateWorkspace(ctx, cred.Workspace.GetWorkspaceId(), cred.Workspace.GetAuthToken())
	default:
		return nil, apierr.InvalidArgument("credentials are required.")
	}
	if err != nil {
		return nil, err
	}
	// The three switches only: the Slack webhook URL is no part of the caller, so it never
	// reaches other processes' authentication caches.
	return &workspacev1.AuthenticateResponse{
		WorkspaceId: c.WorkspaceID, ApiKey: c.APIKey, AllowedDomains: c.AllowedDomains, TokenGeneration: c.TokenGeneration,
		Settings: &workspacev1.Settings{AdvancedQueries: c.Settings.AdvancedQueries, Notifications: c.Settings.Notifications, AdvancedWebhooks: c.Settings.AdvancedWebhooks},
	}, nil
}

// GetTokenGeneration tells the verifier of generated tokens whether their API key is still
// usable and which auth-token generation is current. It has no auth token to check, so it
// says no more than that: the key is refused exactly as authentication refuses it.
func (s *Server) GetTokenGeneration(ctx context.Context, req *workspacev1.GetTokenGenerationRequest) (*workspacev1.GetTokenGenerationResponse, error) {
	if req.GetApiKey() == "" {
		return nil, apierr.InvalidArgument("apiKey is required.")
	}
	key, err := s.store.APIKey(ctx, req.GetApiKey())
	if errors.Is(err, ErrNotFound) {
		return nil, errInvalidAPIKey
	}
	if err != nil {
		return nil, fmt.Errorf("token generation: %w", err)
	}
	ws, err := s.store.Workspace(ctx, key.WorkspaceID)
	if errors.Is(err, ErrNotFound) {
		return nil, errInvalidAPIKey
	}
	if err != nil {
		return nil, fmt.Errorf("token generation: %w", err)
	}
	if s.keysExpired(ws) {
		return nil, errKeysExpired
	}
	return &workspacev1.GetTokenGenerationResponse{WorkspaceId: ws.ID, TokenGeneration: key.TokenGeneration}, nil
}

// ---- Workspaces ----

func (s *Server) CreateWorkspace(ctx context.Context, req *workspacev1.CreateWorkspaceRequest) (*workspacev1.CreateWorkspaceResponse, error) {
	if !s.createLimit.Allow(clientAddress(ctx)) {
		return nil, apierr.RateLimited()
	}
	ownerEmail, err := validEmail("ownerEmail", req.GetOwnerEmail())
	if err != nil {
		return nil, err
	}
	// The workspace name goes into the verification mail's subject, so a line break in it
	// would stop the mail (or, with a laxer mailer, add headers).
	ownerName, name := strings.TrimSpace(req.GetName()), strings.TrimSpace(req.GetWorkspaceName())
	if err := validate.Name("name", ownerName, maxNameLength); err != nil {
		return nil, err
	}
	if err := validate.Name("workspaceName", name, maxNameLength); err != nil {
		return nil, err
	}
	if req.GetAvatar() != "" && !validate.IsHTTPURL(req.GetAvatar()) {
		return nil, apierr.InvalidArgument("avatar must be a valid http(s) URL.")
	}
	if name == "" {
		name = "My Workspace"
	}
	now := s.now()
	wsToken, verifySecret := ids.Random(40), ids.Random(32)
	ws := &Workspace{
		ID: ids.Random(20), Name: name, OwnerID: ids.Random(20), OwnerEmail: ownerEmail,
		OwnerName: ownerName, OwnerAvatar: req.GetAvatar(),
		TokenHash: ids.Hash(wsToken), TokenLast4: ids.LastFour(wsToken),
		Settings:        Settings{AdvancedQueries: true, Notifications: true, AdvancedWebhooks: true},
		CreatedAt:       now,
		VerifyTokenHash: ids.Hash(verifySecret),
	}
	key := &APIKey{Key: ids.Random(20), WorkspaceID: ws.ID, Name: "Testing key", Type: KeyTypeTesting,
		AllowedDomains: []string{}, Tokens: []AuthToken{}, CreatedAt: now}
	if err := s.store.CreateWorkspace(ctx, ws, key); err != nil {
		if errors.Is(err, ErrOwnerEmailTaken) {
			return nil, apierr.AlreadyExists("A workspace already exists for this email.")
		}
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	s.log.InfoContext(ctx, "workspace created", "workspace_id", ws.ID)
	s.sendVerification(ctx, ws, verifySecret)
	out := workspaceProto(ws, []*APIKey{key})
	out.AuthToken = wsToken
	return &workspacev1.CreateWorkspaceResponse{Status: statusSuccess, Message: "Workspace created successfully", Data: out}, nil
}

// sendVerification mails the verification link. A mail failure does not undo the workspace:
// it is logged, and the grace period leaves time to fix the mail setup.
func (s *Server) sendVerification(ctx context.Context, ws *Workspace, secret string) {
	link := s.publicURL + "/v2/workspace/email/verify?token=" + url.QueryEscape(ws.ID+"."+secret)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	err := s.mail.Send(ctx, email.Message{
		To:      ws.OwnerEmail,
		Subject: "Verify your email for " + ws.Name,
		Body: "Open this link to verify the owner email of workspace " + ws.Name + ":\n\n" + link +
			"\n\nUntil the email is verified, the workspace's API keys work for " + humanDuration(s.grace) + " after it was created.\n",
	})
	if err != nil {
		s.log.ErrorContext(ctx, "verification email not sent", "workspace_id", ws.ID, "error", err)
	}
}

func (s *Server) callerWorkspace(ctx context.Context) (*Workspace, authn.Caller, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, c, err
	}
	ws, err := s.store.Workspace(ctx, c.WorkspaceID)
	if errors.Is(err, ErrNotFound) {
		return nil, c, errNoWorkspace
	}
	if err != nil {
		return nil, c, fmt.Errorf("read workspace: %w", err)
	}
	return ws, c, nil
}

func (s *Server) GetWorkspace(ctx context.Context, _ *workspacev1.GetWorkspaceRequest) (*workspacev1.GetWorkspaceResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if !s.getLimit.Allow(c.WorkspaceID) {
		return nil, apierr.RateLimited()
	}
	ws, _, err := s.callerWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := s.allKeys(ctx, ws.ID)
	if err != nil {
		return nil, err
	}
	return &workspacev1.GetWorkspaceResponse{Status: statusSuccess, Message: "Workspace retrieved successfully", Data: workspaceProto(ws, keys)}, nil
}

func (s *Server) allKeys(ctx context.Context, workspaceID string) ([]*APIKey, error) {
	var (
		out   []*APIKey
		after *KeyPosition
	)
	for {
		page, err := s.store.ListAPIKeys(ctx, workspaceID, after, maxAPIKeyPageSize)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, page...)
		if len(page) < maxAPIKeyPageSize {
			return out, nil
		}
		last := page[len(page)-1]
		after = &KeyPosition{last.CreatedAt, last.Key}
	}
}

func workspaceProto(ws *Workspace, keys []*APIKey) *workspacev1.Workspace {
	list := make(map[string]*workspacev1.ApiKeyInfo, len(keys))
	for _, k := range keys {
		list[k.Key] = keyInfo(k)
	}
	return &workspacev1.Workspace{
		Id:            ws.ID,
		Name:          ws.Name,
		Owner:         &workspacev1.Owner{Email: ws.OwnerEmail, Id: ws.OwnerID, Name: ws.OwnerName, Avatar: ws.OwnerAvatar},
		AuthToken:     ids.Mask(ws.TokenLast4),
		ApiKeyList:    list,
		Settings:      settingsProto(ws),
		EmailVerified: ws.EmailVerified,
	}
}

func keyInfo(k *APIKey) *workspacev1.ApiKeyInfo {
	return &workspacev1.ApiKeyInfo{ApiKeyName: k.Name, Id: k.Key, Type: k.Type}
}

// settingsProto is the workspace's settings as callers see them: the Slack webhook URL masked.
func settingsProto(ws *Workspace) *workspacev1.Settings {
	st := ws.Settings
	return &workspacev1.Settings{AdvancedQueries: st.AdvancedQueries, Notifications: st.Notifications, AdvancedWebhooks: st.AdvancedWebhooks,
		SlackWebhookUrl: maskWebhookURL(ws.SlackWebhookURL)}
}

// webhookTailMin is the shortest part after the host of which the masked form shows the last
// four characters; of a shorter one it shows none, so the mask never gives most of it away.
const webhookTailMin = 16

// maskWebhookURL keeps the scheme, the host and the last four characters of a webhook URL:
// "https://hooks.slack.com/…abcd" (the path, query and any user info hidden behind "…"). It
// returns "" for "" and never more than four characters of what follows the host.
func maskWebhookURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	sep := strings.Index(raw, "://")
	if err != nil || u.Host == "" || sep < 0 {
		return "…" // stored URLs were checked; this only guards against revealing anything
	}
	// What follows the authority (user info and host): the path, query and fragment.
	var rest []rune
	if end := strings.IndexAny(raw[sep+3:], "/?#"); end >= 0 {
		rest = []rune(raw[sep+3+end:])
	}
	out := u.Scheme + "://" + u.Host
	switch {
	case len(rest) == 0:
		return out
	case len(rest) >= webhookTailMin:
		return out + "/…" + string(rest[len(rest)-4:])
	default:
		return out + "/…"
	}
}

// validWebhookURL checks a Slack webhook URL to store: "" (remove it), or an http(s) URL with a
// host, at most validate.MaxURLLength long, without control characters or white space.
func validWebhookURL(v string) error {
	if v == "" {
		return nil
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 || !validate.IsHTTPURL(v) {
		return apierr.InvalidArgument("slackWebhookUrl must be a valid http(s) URL.")
	}
	return nil
}

func (s *Server) UpdateWorkspaceSettings(ctx context.Context, req *workspacev1.UpdateWorkspaceSettingsRequest) (*workspacev1.UpdateWorkspaceSettingsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if req.AdvancedQueries == nil && req.Notifications == nil && req.AdvancedWebhooks == nil && req.SlackWebhookUrl == nil {
		return nil, apierr.InvalidArgument("At least one setting must be provided: advancedQueries, notifications, advancedWebhooks or slackWebhookUrl.")
	}
	if err := validWebhookURL(req.GetSlackWebhookUrl()); err != nil {
		return nil, err
	}
	ws, err := s.store.UpdateSettings(ctx, c.WorkspaceID, SettingsPatch{
		AdvancedQueries: req.AdvancedQueries, Notifications: req.Notifications, AdvancedWebhooks: req.AdvancedWebhooks,
		SlackWebhookURL: req.SlackWebhookUrl,
	})
	if errors.Is(err, ErrNotFound) {
		return nil, errNoWorkspace
	}
	if err != nil {
		return nil, fmt.Errorf("update settings: %w", err)
	}
	return &workspacev1.UpdateWorkspaceSettingsResponse{Status: statusSuccess, Message: "Workspace settings updated successfully.", Data: settingsProto(ws)}, nil
}

// GetSlackWebhook gives the notifications service a workspace's Slack webhook URL in full (""
// when none is set). The URL is a secret: it is neither logged nor put on any caller.
func (s *Server) GetSlackWebhook(ctx context.Context, req *workspacev1.GetSlackWebhookRequest) (*workspacev1.GetSlackWebhookResponse, error) {
	if err := validate.ID("workspaceId", req.GetWorkspaceId()); err != nil {
		return nil, err
	}
	ws, err := s.store.Workspace(ctx, req.GetWorkspaceId())
	if errors.Is(err, ErrNotFound) {
		return nil, errNoWorkspace
	}
	if err != nil {
		return nil, fmt.Errorf("slack webhook: %w", err)
	}
	return &workspacev1.GetSlackWebhookResponse{Url: ws.SlackWebhookURL}, nil
}

// ---- API keys and auth tokens ----

func (s *Server) CreateApiKey(ctx context.Context, req *workspacev1.CreateApiKeyRequest) (*workspacev1.CreateApiKeyResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	typ := req.GetType()
	if typ == "" {
		typ = KeyTypeTesting
	}
	if typ != KeyTypeTesting && typ != KeyTypeProduction {
		return nil, apierr.InvalidArgument("type must be one of testing, production.")
	}
	name := strings.TrimSpace(req.GetApiKeyName())
	if err := validate.Name("apiKeyName", name, maxNameLength); err != nil {
		return nil, err
	}
	if name == "" {
		name = "API key"
	}
	domains, err := normalizeDomains(req.GetAllowedDomains())
	if err != nil {
		return nil, err
	}
	now := s.now()
	key := &APIKey{Key: ids.Random(20), WorkspaceID: c.WorkspaceID, Name: name, Type: typ, AllowedDomains: domains, Tokens: []AuthToken{}, CreatedAt: now}
	out := &workspacev1.CreatedApiKey{ApiKey: key.Key}
	if req.CreateAuthToken == nil || req.GetCreateAuthToken() {
		token := ids.Random(40)
		key.Tokens = []AuthToken{{Hash: ids.Hash(token), Last4: ids.LastFour(token), Name: defaultTokenName, CreatedAt: now}}
		out.AuthToken = &token
	}
	// The store checks the limit in the same atomic write that counts the key, so concurrent
	// creations cannot pass it.
	switch err := s.store.CreateAPIKey(ctx, key, maxAPIKeysPerWorkspace); {
	case errors.Is(err, ErrKeyLimit):
		return nil, apierr.FailedPrecondition("A workspace has at most %d API keys.", maxAPIKeysPerWorkspace)
	case errors.Is(err, ErrNotFound):
		return nil, errNoWorkspace
	case err != nil:
		return nil, fmt.Errorf("create api key: %w", err)
	}
	s.log.InfoContext(ctx, "api key created", "workspace_id", c.WorkspaceID, "api_key", key.Key)
	return &workspacev1.CreateApiKeyResponse{Status: statusSuccess, Message: "API key created successfully.", Data: out}, nil
}

type keyCursor struct {
	CreatedAt int64  `json:"c"`
	Key       string `json:"k"`
}

func (s *Server) ListApiKeys(ctx context.Context, req *workspacev1.ListApiKeysRequest) (*workspacev1.ListApiKeysResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = defaultAPIKeyPageSize
	}
	if size < 1 || size > maxAPIKeyPageSize {
		return nil, apierr.InvalidArgument("pageSize must be between 1 and %d.", maxAPIKeyPageSize)
	}
	scope := "apikeys\x00" + c.WorkspaceID
	var after *KeyPosition
	if req.GetPageToken() != "" {
		var pos keyCursor
		if err := s.cursors.Open(req.GetPageToken(), scope, &pos); err != nil {
			return nil, cursor.Refusal("pageToken", err)
		}
		after = &KeyPosition{CreatedAt: time.UnixMilli(pos.CreatedAt).UTC(), Key: pos.Key}
	}
	// One extra row tells whether another page exists.
	keys, err := s.store.ListAPIKeys(ctx, c.WorkspaceID, after, size+1)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	resp := &workspacev1.ListApiKeysResponse{Status: statusSuccess, Message: "API keys retrieved successfully.", Data: []*workspacev1.ApiKeyInfo{}}
	if len(keys) > size {
		keys = keys[:size]
		last := keys[size-1]
		tok, err := s.cursors.Seal(scope, keyCursor{CreatedAt: last.CreatedAt.UnixMilli(), Key: last.Key})
		if err != nil {
			return nil, err
		}
		resp.NextPageToken = &tok
	}
	for _, k := range keys {
		resp.Data = append(resp.Data, keyInfo(k))
	}
	return resp, nil
}

func (s *Server) workspaceKey(ctx context.Context, apiKey string) (*APIKey, authn.Caller, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, c, err
	}
	if apiKey == "" {
		return nil, c, apierr.InvalidArgument("apiKey is required.")
	}
	key, err := s.store.WorkspaceAPIKey(ctx, c.WorkspaceID, apiKey)
	if errors.Is(err, ErrNotFound) {
		return nil, c, apierr.NotFound("API key not found.")
	}
	if err != nil {
		return nil, c, fmt.Errorf("read api key: %w", err)
	}
	return key, c, nil
}

func (s *Server) ListAuthTokens(ctx context.Context, req *workspacev1.ListAuthTokensRequest) (*workspacev1.ListAuthTokensResponse, error) {
	key, _, err := s.workspaceKey(ctx, req.GetApiKey())
	if err != nil {
		return nil, err
	}
	tokens := make([]*workspacev1.AuthToken, 0, len(key.Tokens))
	for _, t := range key.Tokens {
		tokens = append(tokens, &workspacev1.AuthToken{Token: ids.Mask(t.Last4), Name: t.Name, Domains: nonNil(key.AllowedDomains)})
	}
	return &workspacev1.ListAuthTokensResponse{Status: statusSuccess, Message: "Auth tokens retrieved successfully.",
		Data: &workspacev1.ApiKeyAuthTokens{ApiKey: key.Key, AuthTokens: tokens}}, nil
}

func (s *Server) ResetAuthToken(ctx context.Context, req *workspacev1.ResetAuthTokenRequest) (*workspacev1.ResetAuthTokenResponse, error) {
	key, c, err := s.workspaceKey(ctx, req.GetApiKey())
	if err != nil {
		return nil, err
	}
	token := ids.Random(40)
	stored := AuthToken{Hash: ids.Hash(token), Last4: ids.LastFour(token), Name: defaultTokenName, CreatedAt: s.now()}
	key, err = s.store.SetAuthTokens(ctx, c.WorkspaceID, key.Key, []AuthToken{stored})
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound("API key not found.")
	}
	if err != nil {
		return nil, fmt.Errorf("reset auth token: %w", err)
	}
	s.log.InfoContext(ctx, "auth token reset", "workspace_id", c.WorkspaceID, "api_key", key.Key)
	return &workspacev1.ResetAuthTokenResponse{Status: statusSuccess, Message: "Auth token reset successfully.",
		Data: &workspacev1.NewAuthToken{ApiKey: key.Key, NewAuthToken: &workspacev1.AuthToken{Token: token, Name: stored.Name, Domains: nonNil(key.AllowedDomains)}}}, nil
}

// ---- Domains ----

func (s *Server) GetDomains(ctx context.Context, _ *workspacev1.GetDomainsRequest) (*workspacev1.GetDomainsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	key, err := s.store.APIKey(ctx, c.APIKey)
	if errors.Is(err, ErrNotFound) {
		return nil, errInvalidAPIKey
	}
	if err != nil {
		return nil, fmt.Errorf("read api key: %w", err)
	}
	return &workspacev1.GetDomainsResponse{Status: statusSuccess, Message: "Domains retrieved successfully.",
		Data: &workspacev1.AllowedDomains{AllowedDomains: nonNil(key.AllowedDomains)}}, nil
}

func (s *Server) UpdateAllowedDomains(ctx context.Context, req *workspacev1.UpdateAllowedDomainsRequest) (*workspacev1.UpdateAllowedDomainsResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	domains, err := normalizeDomains(req.GetAllowedDomains())
	if err != nil {
		return nil, err
	}
	key, err := s.store.SetAllowedDomains(ctx, c.APIKey, domains)
	if errors.Is(err, ErrNotFound) {
		return nil, errInvalidAPIKey
	}
	if err != nil {
		return nil, fmt.Errorf("update allowed domains: %w", err)
	}
	return &workspacev1.UpdateAllowedDomainsResponse{Status: statusSuccess, Message: "Allowed domains updated successfully.",
		Data: &workspacev1.AllowedDomains{AllowedDomains: nonNil(key.AllowedDomains)}}, nil
}

// ---- Owner email ----

func (s *Server) GetEmailVerificationStatus(ctx context.Context, req *workspacev1.GetEmailVerificationStatusRequest) (*workspacev1.GetEmailVerificationStatusResponse, error) {
	ownerEmail, err := validEmail("ownerEmail", req.GetOwnerEmail())
	if err != nil {
		return nil, err
	}
	// The address first: a caller past it spends none of the email's own budget.
	if !s.statusAddrLimit.Allow(clientAddress(ctx)) || !s.statusLimit.Allow(ownerEmail) {
		return nil, apierr.RateLimited()
	}
	checkFailed := func(err error) error {
		return apierr.New(codes.Internal, "Email status check failed.").WithCause(err)
	}
	ws, err := s.store.WorkspaceByOwnerEmail(ctx, ownerEmail)
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound("User not found.")
	}
	if err != nil {
		return nil, checkFailed(err)
	}
	if !ws.EmailVerified {
		return &workspacev1.GetEmailVerificationStatusResponse{Status: statusSuccess, Message: "Email not yet verified",
			Data: &workspacev1.EmailVerificationStatus{Verified: false}}, nil
	}
	if !ws.KeysActive {
		if err := s.store.ActivateKeys(ctx, ws.ID); err != nil {
			return nil, checkFailed(err)
		}
		s.log.InfoContext(ctx, "api keys reactivated", "workspace_id", ws.ID)
	}
	return &workspacev1.GetEmailVerificationStatusResponse{Status: statusSuccess, Message: "Email verified and workspace reactivated",
		Data: &workspacev1.EmailVerificationStatus{Verified: true}}, nil
}

func (s *Server) VerifyOwnerEmail(ctx context.Context, req *workspacev1.VerifyOwnerEmailRequest) (*workspacev1.VerifyOwnerEmailResponse, error) {
	invalid := apierr.InvalidArgument("The verification link is invalid or has already been used.")
	if req.GetToken() == "" {
		return nil, apierr.InvalidArgument("token is required.")
	}
	id, secret, ok := strings.Cut(req.GetToken(), ".")
	if !ok || id == "" || secret == "" {
		return nil, invalid
	}
	ws, err := s.store.Workspace(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, invalid
	}
	if err != nil {
		return nil, fmt.Errorf("verify email: %w", err)
	}
	// Verified within the grace period: the keys never expire. After it, they stay expired
	// until Get Email Verification Status reactivates them (docs/api.md, "Owner email verification and the grace period").
	ws, err = s.store.VerifyEmail(ctx, id, ids.Hash(secret), !s.keysExpired(ws))
	if errors.Is(err, ErrNotFound) {
		return nil, invalid
	}
	if err != nil {
		return nil, fmt.Errorf("verify email: %w", err)
	}
	s.log.InfoContext(ctx, "owner email verified", "workspace_id", ws.ID)
	return &workspacev1.VerifyOwnerEmailResponse{Status: statusSuccess, Message: "Email verified successfully.",
		Data: &workspacev1.VerifiedOwnerEmail{OwnerEmail: ws.OwnerEmail, Verified: true}}, nil
}

// ---- Local development ----

// EnsureDevWorkspace creates the development workspace, or, when it exists, sets its tokens
// back to the configured ones. The owner email counts as verified.
func (s *Server) EnsureDevWorkspace(ctx context.Context, d service.DevCredentials) error {
	now := s.now()
	tokens := []AuthToken{{Hash: ids.Hash(d.AuthToken), Last4: ids.LastFour(d.AuthToken), Name: defaultTokenName, CreatedAt: now}}
	ws := &Workspace{
		ID: d.WorkspaceID, Name: "Development", OwnerID: "dev-owner", OwnerEmail: strings.ToLower(d.OwnerEmail), OwnerName: "Developer",
		TokenHash: ids.Hash(d.WorkspaceToken), TokenLast4: ids.LastFour(d.WorkspaceToken),
		Settings:  Settings{AdvancedQueries: true, Notifications: true, AdvancedWebhooks: true},
		CreatedAt: now, EmailVerified: true, KeysActive: true,
	}
	key := &APIKey{Key: d.APIKey, WorkspaceID: d.WorkspaceID, Name: "Development key", Type: KeyTypeTesting, AllowedDomains: []string{}, Tokens: tokens, CreatedAt: now}
	err := s.store.CreateWorkspace(ctx, ws, key)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrWorkspaceExists), errors.Is(err, ErrOwnerEmailTaken), errors.Is(err, ErrKeyExists):
		existing, getErr := s.store.Workspace(ctx, d.WorkspaceID)
		if getErr != nil {
			return fmt.Errorf("dev workspace: %w (and %w)", err, getErr)
		}
		if err := s.store.SetWorkspaceToken(ctx, existing.ID, ws.TokenHash, ws.TokenLast4); err != nil {
			return fmt.Errorf("dev workspace token: %w", err)
		}
		current, err := s.store.WorkspaceAPIKey(ctx, existing.ID, d.APIKey)
		if errors.Is(err, ErrNotFound) {
			if err := s.store.CreateAPIKey(ctx, key, 0); err != nil {
				return fmt.Errorf("dev api key: %w", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("dev api key: %w", err)
		}
		// Setting the same token again would move the generation on and revoke the tokens
		// generated before the restart for no reason.
		if len(current.Tokens) == 1 && current.Tokens[0].Hash == tokens[0].Hash {
			return nil
		}
		if _, err := s.store.SetAuthTokens(ctx, existing.ID, d.APIKey, tokens); err != nil {
			return fmt.Errorf("dev auth token: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("dev workspace: %w", err)
	}
}

// ---- Input helpers ----

func validEmail(field, raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return "", apierr.InvalidArgument("%s is required.", field)
	}
	if !validate.IsEmail(v) {
		return "", apierr.InvalidArgument("%s must be a valid email address.", field)
	}
	return strings.ToLower(v), nil
}

// humanDuration writes whole days as days ("7 days"), anything else as Go does ("90m0s").
func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "1 day"
	case d > 0 && d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	default:
		return d.String()
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// clientAddress is the address Create Workspace and Get Email Verification Status are limited
// by: the last X-Forwarded-For hop (the one our gateway appends from the connection), or the
// gRPC peer for direct callers. The authentication interceptor removes an X-Forwarded-For that
// did not come from the gateway or another service (authn.HeaderForwarder), so a direct caller
// cannot choose it.
func clientAddress(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-forwarded-for"); len(v) > 0 {
			hops := strings.Split(v[len(v)-1], ",")
			if hop := strings.TrimSpace(hops[len(hops)-1]); hop != "" {
				return hop
			}
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return host
		}
		return p.Addr.String()
	}
	return "unknown"
}
