package access

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"log/slog"
	"time"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/cursor"
	"github.com/collab/collab/internal/lifecycle"
)

const statusSuccess = "success"

// Defaults and limits.
const (
	// DefaultKeyRotation is how long one signing key signs before the next takes over.
	DefaultKeyRotation = 24 * time.Hour
	// DefaultIssuer is the iss claim of generated tokens.
	DefaultIssuer = "collab"
	// TokenLifetime is how long a generated token is valid (docs/api.md, "Access").
	TokenLifetime = 48 * time.Hour

	minKeyRotation = time.Minute
)

var (
	_ accessv1.AccessServiceServer = (*Server)(nil)
	_ lifecycle.Handler            = (*Server)(nil)
	_ Store                        = (*MemoryStore)(nil)
	_ Store                        = (*MongoStore)(nil)
)

// Server implements the access service and applies lifecycle events to its grants.
type Server struct {
	accessv1.UnimplementedAccessServiceServer

	store     Store
	docs      documentsv1.DocumentsServiceClient
	workspace workspacev1.WorkspaceServiceClient
	clock     clock.Clock
	log       *slog.Logger
	rotation  time.Duration
	issuer    string
	keys      *keyRing
}

// Option configures a Server.
type Option func(*Server)

func WithClock(c clock.Clock) Option   { return func(s *Server) { s.clock = c } }
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithKeyRotation sets how long each signing key signs (default 24h): a whole number of
// seconds, at least a minute.
func WithKeyRotation(d time.Duration) Option { return func(s *Server) { s.rotation = d } }

// WithIssuer sets the iss claim of generated tokens (default "collab").
func WithIssuer(iss string) Option { return func(s *Server) { s.issuer = iss } }

// WithWorkspace gives the client VerifyToken asks whether a token's API key is still usable
// and its auth token unchanged. Without it VerifyToken refuses every token (INTERNAL): a
// verifier that cannot check revocation must not pass anything.
func WithWorkspace(ws workspacev1.WorkspaceServiceClient) Option {
	return func(s *Server) { s.workspace = ws }
}

// New returns a Server on store. secret is the deployment's master secret: the signing keys'
// private halves are stored encrypted under a key derived from it, so every replica must get
// the same one. docs tells which organizations, folders and documents exist and how their
// access is set.
func New(store Store, secret []byte, docs documentsv1.DocumentsServiceClient, opts ...Option) (*Server, error) {
	switch {
	case store == nil:
		return nil, errors.New("access: a store is required")
	case docs == nil:
		return nil, errors.New("access: a documents client is required")
	case len(secret) == 0:
		return nil, errors.New("access: a master secret is required")
	}
	s := &Server{store: store, docs: docs, clock: clock.Real(), log: slog.Default(), rotation: DefaultKeyRotation, issuer: DefaultIssuer}
	for _, o := range opts {
		o(s)
	}
	switch {
	case s.rotation < minKeyRotation || s.rotation%time.Second != 0:
		return nil, fmt.Errorf("access: key rotation %s must be whole seconds and at least %s", s.rotation, minKeyRotation)
	case s.issuer == "":
		return nil, errors.New("access: the issuer must not be empty")
	}
	key, err := cursor.DeriveKey(secret, "access.signing-keys")
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("access: signing key cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("access: signing key cipher: %w", err)
	}
	s.keys = newKeyRing(store, aead, s.rotation, s.log)
	return s, nil
}

// Ping reports whether the store answers.
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

func (s *Server) now() time.Time { return s.clock.Now() }
