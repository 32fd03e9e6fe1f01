package access

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/apierr"
)

// maxTokenBytes bounds what VerifyToken decodes: a generated token is well under 1 KiB, so
// anything this long is not one of ours and is refused before any work.
const maxTokenBytes = 8 << 10

// clockSkew is how far in the future a token's iat may be: replicas' clocks differ a little.
const clockSkew = time.Minute

// Why a token is refused. All are UNAUTHENTICATED: the token is the caller's credential.
var (
	errTokenMalformed = apierr.Unauthenticated("Token is malformed.")
	errTokenSignature = apierr.Unauthenticated("Token signature is invalid.")
	errTokenIssuer    = apierr.Unauthenticated("Token was issued by another issuer.")
	errTokenExpired   = apierr.Unauthenticated("Token has expired.")
	errTokenNotYet    = apierr.Unauthenticated("Token is not valid yet.")
	errTokenAudience  = apierr.Unauthenticated("Token was issued for another audience.")
	errTokenRevoked   = apierr.Unauthenticated("Token was revoked: the API key's auth token was reset.")
	errTokenKey       = apierr.Unauthenticated("Token's API key is no longer valid.")
)

// kidPattern is the form of every kid we issue ("k" and the rotation period's number), checked
// before a kid from a token reaches the store.
var kidPattern = regexp.MustCompile(`^k-?[0-9]{1,19}$`)

// jws is a compact JWS (RFC 7515) split and decoded, its header checked; the signature and
// the claims are checked by verify and claims.
type jws struct {
	header       jwsHeader
	signingInput string
	payload      []byte
	signature    []byte
}

// errMalformed is parseToken's one error: a caller learns no more about why bytes it sent are
// not a token of ours.
var errMalformed = errors.New("malformed token")

// parseToken reads a token from an untrusted caller. It accepts only the form sign writes:
// three base64url segments without padding, each in its one canonical spelling; a header of
// exactly alg EdDSA, typ JWT and a kid of ours (no other parameters, so no "crit" to honour
// and no "alg" to confuse); a 64-byte signature. It never panics, whatever the input.
func parseToken(tok string) (*jws, error) {
	if len(tok) > maxTokenBytes {
		return nil, errMalformed
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, errMalformed
	}
	var segs [3][]byte
	for i, p := range parts {
		b, err := b64.DecodeString(p)
		// The decoder also takes line breaks and stray low bits of the last character; a
		// token we signed has one spelling.
		if err != nil || len(b) == 0 || b64.EncodeToString(b) != p {
			return nil, errMalformed
		}
		segs[i] = b
	}
	var h jwsHeader
	if err := decodeStrict(segs[0], &h); err != nil {
		return nil, errMalformed
	}
	if h.Alg != "EdDSA" || h.Typ != "JWT" || !kidPattern.MatchString(h.Kid) || len(segs[2]) != ed25519.SignatureSize {
		return nil, errMalformed
	}
	return &jws{header: h, signingInput: parts[0] + "." + parts[1], payload: segs[1], signature: segs[2]}, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and anything after it.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// verify reports whether the signature is pub's over the signing input.
func (t *jws) verify(pub []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, []byte(t.signingInput), t.signature)
}

// claims decodes the payload; call it only after verify, so nothing unsigned is ever read.
// Claims a later version may add are ignored (they are signed, so harmless); those a check
// needs must be present.
func (t *jws) claims() (tokenClaims, error) {
	var c tokenClaims
	dec := json.NewDecoder(bytes.NewReader(t.payload))
	if err := dec.Decode(&c); err != nil {
		return c, errMalformed
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, errMalformed
	}
	if c.AuthTokenGeneration == nil || c.APIKey == "" || c.UserID == "" || c.Expires == 0 || c.IssuedAt == 0 {
		return c, errMalformed
	}
	return c, nil
}

// VerifyToken checks a token of Generate Token for a service that accepts one.
func (s *Server) VerifyToken(ctx context.Context, req *accessv1.VerifyTokenRequest) (*accessv1.VerifyTokenResponse, error) {
	if req.GetToken() == "" {
		return nil, apierr.InvalidArgument("token is required.")
	}
	if s.workspace == nil {
		return nil, apierr.Internal(errors.New("verify token: the access service has no workspace client (WithWorkspace)"))
	}
	c, workspaceID, err := s.verifyToken(ctx, req.GetToken(), req.GetAudience())
	if err != nil {
		return nil, err
	}
	return &accessv1.VerifyTokenResponse{
		UserId: c.UserID, ApiKey: c.APIKey, WorkspaceId: workspaceID, OrganizationId: c.OrganizationID,
		Email: c.Email, Name: c.Name, IsAdmin: c.IsAdmin, IssuedAt: c.IssuedAt, ExpiresAt: c.Expires, TokenId: c.ID,
	}, nil
}

// verifyToken runs every check, cheapest and least revealing first: form, signature (nothing
// unsigned is read), issuer, time, audience, and last the one that costs a call, whether the
// API key is usable and its auth token unchanged since the token was made.
func (s *Server) verifyToken(ctx context.Context, tok, audience string) (tokenClaims, string, error) {
	t, err := parseToken(tok)
	if err != nil {
		return tokenClaims{}, "", errTokenMalformed
	}
	now := s.now()
	key, err := s.keys.verifier(ctx, t.header.Kid, now)
	if errors.Is(err, ErrNotFound) {
		return tokenClaims{}, "", errTokenSignature
	}
	if err != nil {
		return tokenClaims{}, "", fmt.Errorf("verify token: signing key %s: %w", t.header.Kid, err)
	}
	if !t.verify(key.PublicKey) {
		return tokenClaims{}, "", errTokenSignature
	}
	c, err := t.claims()
	if err != nil {
		return tokenClaims{}, "", errTokenMalformed
	}
	if c.Issuer != s.issuer {
		return c, "", errTokenIssuer
	}
	// Whole seconds, as the claims are: the token is valid up to, not including, its exp.
	secs := now.Unix()
	if secs >= c.Expires {
		return c, "", errTokenExpired
	}
	// A token is signed by the key of the period it was issued in; one claiming another time is
	// not one we made.
	if c.IssuedAt > secs+int64(clockSkew/time.Second) {
		return c, "", errTokenNotYet
	}
	if c.IssuedAt < key.NotBefore.Unix() || c.IssuedAt >= key.NotAfter.Unix() || c.Expires != c.IssuedAt+int64(TokenLifetime/time.Second) {
		return c, "", errTokenMalformed
	}
	if c.Audience != c.APIKey || (audience != "" && c.Audience != audience) {
		return c, "", errTokenAudience
	}
	gen, err := s.workspace.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: c.APIKey})
	if status.Code(err) == codes.PermissionDenied {
		return c, "", errTokenKey
	}
	if err != nil {
		return c, "", apierr.FromPeer("verify token: token generation", err)
	}
	if gen.GetTokenGeneration() != *c.AuthTokenGeneration {
		return c, "", errTokenRevoked
	}
	return c, gen.GetWorkspaceId(), nil
}
