package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/validate"
)

const statusSuccess = "success"

// Messages the caller sees (docs/webhooks.md, "Operations").
const (
	msgUnavailable     = "Advanced webhooks are not available for this workspace."
	msgNotEnabled      = "Advanced webhooks are not enabled for this workspace."
	msgConfigRetrieved = "Advanced webhook configuration retrieved successfully."
	msgConfigUpdated   = "Advanced webhook configuration updated successfully."
	msgCreated         = "Endpoint created successfully."
	msgUpdated         = "Endpoint updated successfully."
	msgListed          = "Endpoints retrieved successfully."
	msgDeleted         = "Endpoint deleted successfully."
	msgSecret          = "Endpoint secret retrieved successfully."
	msgRotated         = "Endpoint secret rotated successfully."
	msgBasicRetrieved  = "Webhook configuration retrieved successfully."
	msgBasicUpdated    = "Webhook configuration updated successfully."
	msgMessages        = "Messages retrieved successfully."
	msgAttempts        = "Attempts retrieved successfully."
	msgResent          = "Message resent successfully."
	msgResendDisabled  = "The endpoint is disabled: enable it to resend messages to it."
	msgRecoverDisabled = "The endpoint is disabled: enable it to recover messages to it."
	msgTestDisabled    = "The endpoint is disabled: enable it to send it a test event."
	msgRecovered       = "Endpoint recovery started successfully."
	msgTestSent        = "Test event sent successfully."
	msgEndpointMissing = "Endpoint not found."
	msgMessageMissing  = "Message not found."
	msgNoConfigField   = "Provide at least one of isEnabled, encryptData, encodeData, publicKey, enableDataProtection."
	msgNoBasicField    = "Provide useWebhookService or webhookServiceConfig."
	msgEncryptNeedsKey = "encryptData needs publicKey: an RSA public key in PEM."
	msgIteratorBad     = "iterator is invalid."
	rotationOverlap    = 24 * time.Hour
)

var _ webhooksv1.WebhooksServiceServer = (*Server)(nil)

// Server implements the webhooks service and its delivery engine.
type Server struct {
	webhooksv1.UnimplementedWebhooksServiceServer

	store   Store
	targets targets
	client  *http.Client
	clock   clock.Clock
	log     *slog.Logger
	engine  *engine
	workers int
	// tenantWorkers is how many attempts of one workspace may be in flight in this process.
	tenantWorkers int
	lease         time.Duration
	timeout       time.Duration // an attempt's, to its answer's end
	metrics       *deliveryMetrics
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithWorkers sets how many deliveries the process sends at once (default 64); 0 sends none,
// leaving them to processes that do.
func WithWorkers(n int) Option { return func(s *Server) { s.workers = n } }

// WithTenantWorkers sets how many attempts of one workspace the process has in flight at most
// (default a quarter of the workers, at least 1), so that one tenant's slow or dead endpoints
// leave workers to the others (docs/webhooks.md, "Workers and fairness").
func WithTenantWorkers(n int) Option { return func(s *Server) { s.tenantWorkers = n } }

// WithLease sets how long a worker holds a delivery it is sending (default 1 minute).
func WithLease(d time.Duration) Option { return func(s *Server) { s.lease = d } }

// WithPrivateTargets lets endpoints be loopback, private or link-local addresses (local runs,
// tests, receivers on the same private network).
func WithPrivateTargets(allow bool) Option { return func(s *Server) { s.targets.allowPrivate = allow } }

// New returns a Server on store.
func New(store Store, opts ...Option) (*Server, error) {
	if store == nil {
		return nil, errors.New("webhooks: a store is required")
	}
	s := &Server{store: store, clock: clock.Real(), log: slog.Default(), workers: workers, lease: leaseFor, timeout: attemptTimeout, metrics: newDeliveryMetrics()}
	for _, o := range opts {
		o(s)
	}
	if s.tenantWorkers <= 0 {
		s.tenantWorkers = max(s.workers/4, 1)
	}
	s.client = newClient(s.targets, s.workers, s.timeout)
	s.engine = newEngine(s)
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() time.Time { return s.clock.Now().UTC().Truncate(time.Millisecond) }

// caller returns the key-level caller, refusing while advanced webhooks are withheld from the
// workspace (the operator's switch).
func caller(ctx context.Context) (authn.Caller, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return c, err
	}
	if !c.Settings.AdvancedWebhooks {
		return c, apierr.FailedPrecondition(msgUnavailable)
	}
	return c, nil
}

// enabled additionally requires the tenant's advanced webhook config to be on.
func (s *Server) enabled(ctx context.Context) (authn.Caller, *Config, error) {
	c, err := caller(ctx)
	if err != nil {
		return c, nil, err
	}
	cfg, err := s.store.Config(ctx, c.APIKey)
	if err != nil {
		return c, nil, fmt.Errorf("read config: %w", err)
	}
	if !cfg.Enabled {
		return c, nil, apierr.FailedPrecondition(msgNotEnabled)
	}
	return c, cfg, nil
}

// ---- Advanced config ----

func configProto(c *Config) *webhooksv1.AdvancedWebhookConfig {
	return &webhooksv1.AdvancedWebhookConfig{IsEnabled: c.Enabled, EncryptData: c.EncryptData, EncodeData: c.EncodeData, PublicKey: c.PublicKey, EnableDataProtection: c.DataProtection}
}

func (s *Server) GetAdvancedWebhookConfig(ctx context.Context, _ *webhooksv1.GetAdvancedWebhookConfigRequest) (*webhooksv1.AdvancedWebhookConfigResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := s.store.Config(ctx, c.APIKey)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return &webhooksv1.AdvancedWebhookConfigResponse{Status: statusSuccess, Message: msgConfigRetrieved, Data: configProto(cfg)}, nil
}

func (s *Server) UpdateAdvancedWebhookConfig(ctx context.Context, req *webhooksv1.UpdateAdvancedWebhookConfigRequest) (*webhooksv1.AdvancedWebhookConfigResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	p := ConfigPatch{Enabled: req.IsEnabled, EncryptData: req.EncryptData, EncodeData: req.EncodeData, PublicKey: req.PublicKey, DataProtection: req.EnableDataProtection}
	if p == (ConfigPatch{}) {
		return nil, apierr.InvalidArgument(msgNoConfigField)
	}
	if p.PublicKey != nil && *p.PublicKey != "" {
		if len(*p.PublicKey) > maxPublicKeyLength {
			return nil, apierr.InvalidArgument("publicKey must be at most %d KiB.", maxPublicKeyLength>>10)
		}
		if _, err := parsePublicKey(*p.PublicKey); err != nil {
			return nil, apierr.InvalidArgument("publicKey must be an RSA public key in PEM.")
		}
	}
	// Encryption needs a key: the one sent, else the one stored.
	if req.GetEncryptData() {
		cur, err := s.store.Config(ctx, c.APIKey)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		key := cur.PublicKey
		if p.PublicKey != nil {
			key = *p.PublicKey
		}
		if key == "" {
			return nil, apierr.InvalidArgument(msgEncryptNeedsKey)
		}
	}
	cfg, err := s.store.UpdateConfig(ctx, c.APIKey, p, s.now())
	if err != nil {
		return nil, fmt.Errorf("update config: %w", err)
	}
	return &webhooksv1.AdvancedWebhookConfigResponse{Status: statusSuccess, Message: msgConfigUpdated, Data: configProto(cfg)}, nil
}

// ---- Endpoints ----

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func listOf(v []string) *structpb.ListValue {
	if v == nil {
		return nil
	}
	l := &structpb.ListValue{}
	for _, x := range v {
		l.Values = append(l.Values, structpb.NewStringValue(x))
	}
	return l
}

func endpointProto(e *Endpoint) *webhooksv1.Endpoint {
	m := &webhooksv1.Endpoint{Id: e.ID, Url: e.URL, FilterTypes: listOf(e.FilterTypes), Channels: listOf(e.Channels), Disabled: e.Disabled,
		CreatedAt: iso(e.CreatedAt), UpdatedAt: iso(e.UpdatedAt)}
	if e.Description != nil {
		m.Description = wrapperspb.String(*e.Description)
	}
	if e.RateLimit != nil {
		m.RateLimit = wrapperspb.Int32(int32(*e.RateLimit)) //nolint:gosec // G115: checkRateLimit keeps it within 1..maxRateLimit
	}
	if e.UID != nil {
		m.Uid = wrapperspb.String(*e.UID)
	}
	if e.Metadata != nil {
		st := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for k, v := range e.Metadata {
			st.Fields[k] = structpb.NewStringValue(v)
		}
		m.Metadata = st
	}
	return m
}

// timeID is an id that sorts by creation: a prefix, the time in milliseconds (hex, fixed
// width), and random characters.
func timeID(prefix string, t time.Time) string {
	// One buffer: an attempt's id is made for every attempt.
	b := make([]byte, 0, len(prefix)+24)
	b = append(b, prefix...)
	ms := strconv.AppendInt(make([]byte, 0, 12), t.UnixMilli(), 16)
	for range 12 - len(ms) {
		b = append(b, '0')
	}
	b = append(b, ms...)
	return string(ids.AppendRandom(b, 12))
}

func (s *Server) CreateEndpoint(ctx context.Context, req *webhooksv1.CreateEndpointRequest) (*webhooksv1.EndpointResponse, error) {
	c, _, err := s.enabled(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetUrl() == "" {
		return nil, apierr.InvalidArgument(msgBadURL)
	}
	u := req.GetUrl()
	p, err := s.targets.endpointFields(&u, req.Description, req.Uid, req.GetFilterTypes(), req.GetChannels(), req.RateLimit, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	now := s.now()
	e := &Endpoint{
		APIKey: c.APIKey, ID: timeID("ep_", now), WorkspaceID: c.WorkspaceID, URL: u, Description: p.Description,
		FilterTypes: p.FilterTypes, Channels: p.Channels, Disabled: req.GetDisabled(), RateLimit: p.RateLimit, UID: p.UID, Metadata: p.Metadata,
		Secrets: []Secret{{Value: newSecret()}}, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.store.CreateEndpoint(ctx, e); errors.Is(err, ErrLimit) {
		return nil, apierr.FailedPrecondition("An API key may have at most %d webhook endpoints; delete one first.", MaxEndpoints)
	} else if err != nil {
		return nil, fmt.Errorf("create endpoint: %w", err)
	}
	s.log.InfoContext(ctx, "webhook endpoint created", "endpoint_id", e.ID)
	return &webhooksv1.EndpointResponse{Status: statusSuccess, Message: msgCreated, Data: endpointProto(e)}, nil
}

func (s *Server) UpdateEndpoint(ctx context.Context, req *webhooksv1.UpdateEndpointRequest) (*webhooksv1.EndpointResponse, error) {
	c, _, err := s.enabled(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.ID("endpointId", req.GetEndpointId()); err != nil {
		return nil, err
	}
	if req.Url == nil && req.Description == nil && req.FilterTypes == nil && req.Channels == nil && req.Disabled == nil &&
		req.RateLimit == nil && req.Metadata == nil && req.Uid == nil && len(req.GetClearFields()) == 0 {
		return nil, apierr.InvalidArgument(msgNoField)
	}
	cleared, err := clearedFields(req)
	if err != nil {
		return nil, err
	}
	p, err := s.targets.endpointFields(req.Url, req.Description, req.Uid, req.GetFilterTypes(), req.GetChannels(), req.RateLimit, req.GetMetadata())
	if err != nil {
		return nil, err
	}
	p.Disabled, p.Clear = req.Disabled, cleared
	e, err := s.store.UpdateEndpoint(ctx, c.APIKey, req.GetEndpointId(), p, s.now())
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound(msgEndpointMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("update endpoint: %w", err)
	}
	return &webhooksv1.EndpointResponse{Status: statusSuccess, Message: msgUpdated, Data: endpointProto(e)}, nil
}

func (s *Server) ListEndpoints(ctx context.Context, req *webhooksv1.ListEndpointsRequest) (*webhooksv1.ListEndpointsResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := listLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	if err := validate.OptionalID("iterator", req.GetIterator()); err != nil {
		return nil, err
	}
	es, err := s.store.ListEndpoints(ctx, c.APIKey, req.GetIterator(), limit+1)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	page := &webhooksv1.EndpointsPage{Endpoints: []*webhooksv1.Endpoint{}, Done: len(es) <= limit}
	if !page.Done {
		es = es[:limit]
		page.Iterator = wrapperspb.String(es[len(es)-1].ID)
	}
	for _, e := range es {
		page.Endpoints = append(page.Endpoints, endpointProto(e))
	}
	if req.GetIterator() != "" {
		page.PrevIterator = wrapperspb.String(req.GetIterator())
	}
	return &webhooksv1.ListEndpointsResponse{Status: statusSuccess, Message: msgListed, Data: page}, nil
}

func (s *Server) endpoint(ctx context.Context, apiKey, id string) (*Endpoint, error) {
	if err := validate.ID("endpointId", id); err != nil {
		return nil, err
	}
	e, err := s.store.Endpoint(ctx, apiKey, id)
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound(msgEndpointMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("read endpoint: %w", err)
	}
	return e, nil
}

func (s *Server) DeleteEndpoint(ctx context.Context, req *webhooksv1.DeleteEndpointRequest) (*webhooksv1.DeleteEndpointResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId()); err != nil {
		return nil, err
	}
	if err := s.store.DeleteEndpoint(ctx, c.APIKey, req.GetEndpointId()); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("delete endpoint: %w", err)
	}
	return &webhooksv1.DeleteEndpointResponse{Status: statusSuccess, Message: msgDeleted,
		Data: &webhooksv1.DeletedEndpoint{EndpointId: req.GetEndpointId(), Deleted: true}}, nil
}

// signingSecrets are the secrets that sign now: the current one and, for 24 hours after a
// rotation, the previous one.
func signingSecrets(e *Endpoint, now time.Time) []string {
	var out []string
	for _, sec := range e.Secrets {
		if sec.ExpiresAt.IsZero() || sec.ExpiresAt.After(now) {
			out = append(out, sec.Value)
		}
	}
	return out
}

func currentSecret(e *Endpoint) string {
	for _, sec := range e.Secrets {
		if sec.ExpiresAt.IsZero() {
			return sec.Value
		}
	}
	return ""
}

func (s *Server) GetEndpointSecret(ctx context.Context, req *webhooksv1.GetEndpointSecretRequest) (*webhooksv1.EndpointSecretResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	return &webhooksv1.EndpointSecretResponse{Status: statusSuccess, Message: msgSecret,
		Data: &webhooksv1.EndpointSecret{EndpointId: e.ID, Secret: currentSecret(e)}}, nil
}

func (s *Server) RotateEndpointSecret(ctx context.Context, req *webhooksv1.RotateEndpointSecretRequest) (*webhooksv1.EndpointSecretResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	fresh := newSecret()
	// The secrets are swapped only over those read: a rotation beside another reads again, so
	// that each caller's secret is current in its turn and signs for 24 hours after the next.
	for try := 1; ; try++ {
		e, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId())
		if err != nil {
			return nil, err
		}
		now := s.now()
		// The current secret signs beside the new one for 24 hours; older ones are dropped.
		secrets := []Secret{{Value: fresh}}
		if cur := currentSecret(e); cur != "" {
			secrets = append(secrets, Secret{Value: cur, ExpiresAt: now.Add(rotationOverlap)})
		}
		err = s.store.SwapSecrets(ctx, c.APIKey, e.ID, e.Secrets, secrets, now)
		switch {
		case errors.Is(err, ErrChanged) && try < maxRotationTries:
			continue
		case errors.Is(err, ErrChanged):
			return nil, apierr.New(codes.Aborted, "The endpoint's secret was changed by other calls meanwhile; try again.")
		case errors.Is(err, ErrNotFound):
			return nil, apierr.NotFound(msgEndpointMissing)
		case err != nil:
			return nil, fmt.Errorf("rotate secret: %w", err)
		}
		s.log.InfoContext(ctx, "webhook endpoint secret rotated", "endpoint_id", e.ID)
		return &webhooksv1.EndpointSecretResponse{Status: statusSuccess, Message: msgRotated,
			Data: &webhooksv1.EndpointSecret{EndpointId: e.ID, Secret: fresh}}, nil
	}
}

// maxRotationTries is how many times a rotation reads and swaps the secrets while other
// rotations of the endpoint win: more than that at once is refused (ABORTED), not left waiting.
const maxRotationTries = 16

// ---- Basic config ----

// maskToken shows a token's last four characters only.
func maskToken(t string) string {
	if t == "" {
		return ""
	}
	if len(t) <= 8 {
		return "****"
	}
	return "****" + t[len(t)-4:]
}

func basicProto(b *BasicConfig) *webhooksv1.WebhookConfig {
	var triggers *structpb.Struct
	if b.Triggers != "" {
		triggers = &structpb.Struct{}
		_ = protojson.Unmarshal([]byte(b.Triggers), triggers)
	}
	return &webhooksv1.WebhookConfig{UseWebhookService: b.UseWebhookService, WebhookServiceConfig: &webhooksv1.WebhookServiceConfig{
		AuthToken: maskToken(b.AuthToken), RawNotificationUrl: b.RawURL, ProcessedNotificationUrl: b.ProcessedURL, Triggers: triggers,
	}}
}

func (s *Server) GetWebhookConfig(ctx context.Context, _ *webhooksv1.GetWebhookConfigRequest) (*webhooksv1.WebhookConfigResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	b, err := s.store.BasicConfig(ctx, c.APIKey)
	if err != nil {
		return nil, fmt.Errorf("read webhook config: %w", err)
	}
	return &webhooksv1.WebhookConfigResponse{Status: statusSuccess, Message: msgBasicRetrieved, Data: basicProto(b)}, nil
}

func (s *Server) UpdateWebhookConfig(ctx context.Context, req *webhooksv1.UpdateWebhookConfigRequest) (*webhooksv1.WebhookConfigResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if req.UseWebhookService == nil && req.WebhookServiceConfig == nil {
		return nil, apierr.InvalidArgument(msgNoBasicField)
	}
	p := BasicConfigPatch{UseWebhookService: req.UseWebhookService}
	if w := req.GetWebhookServiceConfig(); w != nil {
		for _, u := range []struct {
			field string
			v     *string
			dst   **string
		}{{"webhookServiceConfig.rawNotificationUrl", w.RawNotificationUrl, &p.RawURL}, {"webhookServiceConfig.processedNotificationUrl", w.ProcessedNotificationUrl, &p.ProcessedURL}} {
			if u.v == nil {
				continue
			}
			if *u.v != "" {
				if err := s.targets.checkURL(u.field, *u.v); err != nil {
					return nil, err
				}
			}
			*u.dst = u.v
		}
		if w.AuthToken != nil {
			if err := validate.Name("webhookServiceConfig.authToken", w.GetAuthToken(), 2048); err != nil {
				return nil, err
			}
			p.AuthToken = w.AuthToken
		}
		if w.Triggers != nil {
			b, err := protojson.Marshal(w.GetTriggers())
			if err != nil || len(b) > 64<<10 {
				return nil, apierr.InvalidArgument("webhookServiceConfig.triggers must be an object of at most 64 KiB.")
			}
			t := string(b)
			p.Triggers = &t
		}
	}
	b, err := s.store.UpdateBasicConfig(ctx, c.APIKey, p, s.now())
	if err != nil {
		return nil, fmt.Errorf("update webhook config: %w", err)
	}
	if b.UseWebhookService && b.RawURL == "" {
		s.log.WarnContext(ctx, "basic webhook service on without rawNotificationUrl: nothing is sent")
	}
	return &webhooksv1.WebhookConfigResponse{Status: statusSuccess, Message: msgBasicUpdated, Data: basicProto(b)}, nil
}

// messageID is the id of the message of a tenant's event: time-ordered, and the same for the
// same event, so a redelivered event makes no second message.
func messageID(apiKey, eventID string, at time.Time) string {
	sum := sha256.Sum256([]byte(apiKey + "\x00" + eventID))
	return fmt.Sprintf("msg_%012x%s", at.UnixMilli(), hex.EncodeToString(sum[:8]))
}

// trimmed returns the first n bytes of s as valid text.
func trimmed(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
