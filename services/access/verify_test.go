package access

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
)

// fakeWorkspace answers GetTokenGeneration as the workspace service does: the generation of a
// known key, PERMISSION_DENIED for any other.
type fakeWorkspace struct {
	workspacev1.WorkspaceServiceClient

	mu    sync.Mutex
	gens  map[string]int64
	err   error // when set, every call fails with it
	calls int
}

func newFakeWorkspace() *fakeWorkspace {
	return &fakeWorkspace{gens: map[string]int64{"k1": 0, "k2": 5}}
}

func (f *fakeWorkspace) GetTokenGeneration(_ context.Context, in *workspacev1.GetTokenGenerationRequest, _ ...grpc.CallOption) (*workspacev1.GetTokenGenerationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	g, ok := f.gens[in.GetApiKey()]
	if !ok {
		return nil, status.Error(codes.PermissionDenied, "Invalid API key.")
	}
	return &workspacev1.GetTokenGenerationResponse{WorkspaceId: "w-" + in.GetApiKey(), TokenGeneration: g}, nil
}

// reset is what Reset Auth Token does to the key's generation.
func (f *fakeWorkspace) reset(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gens[key]++
}

func callerGen(key string, gen int64) context.Context {
	return authn.WithCaller(context.Background(), authn.Caller{APIKey: key, WorkspaceID: "w-" + key, TokenGeneration: gen})
}

func (h *harness) verifyToken(tok, audience string) (*accessv1.VerifyTokenResponse, error) {
	return h.srv.VerifyToken(context.Background(), &accessv1.VerifyTokenRequest{Token: tok, Audience: audience})
}

func TestVerifyToken(t *testing.T) {
	ws := newFakeWorkspace()
	h := newHarness(t, WithWorkspace(ws))
	tok := h.tokenV1(callerGen("k1", 0), "u1", &accessv1.UserPropertiesV1{OrganizationId: "o", IsAdmin: true, Email: "u1@example.com"})
	for _, audience := range []string{"", "k1"} {
		resp, err := h.verifyToken(tok, audience)
		if err != nil {
			t.Fatalf("audience %q: %v", audience, st(err))
		}
		if resp.GetUserId() != "u1" || resp.GetApiKey() != "k1" || resp.GetWorkspaceId() != "w-k1" || resp.GetOrganizationId() != "o" ||
			resp.GetEmail() != "u1@example.com" || !resp.GetIsAdmin() || resp.GetIssuedAt() != start.Unix() ||
			resp.GetExpiresAt() != start.Add(TokenLifetime).Unix() || len(resp.GetTokenId()) < 16 {
			t.Fatalf("claims %v", resp)
		}
	}
	_, err := h.verifyToken(tok, "k2")
	wantStatus(t, err, codes.Unauthenticated, "Token was issued for another audience.")

	// A standard JWT library checking aud against the key set tells tenants apart too.
	if _, err := verifyAudience(jwksOf(t, h.srv), tok, "k1"); err != nil {
		t.Fatalf("go-jose with aud k1: %v", err)
	}
	if _, err := verifyAudience(jwksOf(t, h.srv), tok, "k2"); err == nil {
		t.Fatal("go-jose accepted k1's token for k2")
	}
}

// verifyAudience is verify with the audience a tenant's own backend would expect.
func verifyAudience(set jose.JSONWebKeySet, tok, aud string) (map[string]any, error) {
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, err
	}
	claims := map[string]any{}
	var std jwt.Claims
	if err := parsed.Claims(set.Key(parsed.Headers[0].KeyID)[0].Key, &claims, &std); err != nil {
		return nil, err
	}
	return claims, std.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience{aud}, Time: start}, 0)
}

// The finding this closes: a token outlived the reset of the auth token that made it.
func TestResetAuthTokenRevokesGeneratedTokens(t *testing.T) {
	ws := newFakeWorkspace()
	h := newHarness(t, WithWorkspace(ws))
	tok1 := h.tokenV2(callerGen("k1", 0), &accessv1.GenerateTokenRequest{UserId: "u1"})
	tok2 := h.tokenV2(callerGen("k2", 5), &accessv1.GenerateTokenRequest{UserId: "u2"})
	for _, tok := range []string{tok1, tok2} {
		if _, err := h.verifyToken(tok, ""); err != nil {
			t.Fatalf("before the reset: %v", st(err))
		}
	}
	ws.reset("k1")
	_, err := h.verifyToken(tok1, "k1")
	wantStatus(t, err, codes.Unauthenticated, "Token was revoked: the API key's auth token was reset.")
	// The untouched key's token still verifies, and so does one made after the reset.
	if resp, err := h.verifyToken(tok2, "k2"); err != nil || resp.GetUserId() != "u2" {
		t.Fatalf("untouched key: %v %v", resp, st(err))
	}
	fresh := h.tokenV2(callerGen("k1", 1), &accessv1.GenerateTokenRequest{UserId: "u1"})
	if _, err := h.verifyToken(fresh, "k1"); err != nil {
		t.Fatalf("token made after the reset: %v", st(err))
	}
	// A key that is gone (or expired for an unverified owner email) takes its tokens with it.
	delete(ws.gens, "k2")
	_, err = h.verifyToken(tok2, "")
	wantStatus(t, err, codes.Unauthenticated, "Token's API key is no longer valid.")
}

func TestVerifyTokenExpiry(t *testing.T) {
	h := newHarness(t, WithWorkspace(newFakeWorkspace()))
	tok := h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	h.clock.Advance(TokenLifetime - time.Second)
	if _, err := h.verifyToken(tok, "k1"); err != nil {
		t.Fatalf("a second before exp: %v", st(err))
	}
	h.clock.Advance(time.Second)
	_, err := h.verifyToken(tok, "k1")
	wantStatus(t, err, codes.Unauthenticated, "Token has expired.")
	h.clock.Advance(30 * 24 * time.Hour)
	_, err = h.verifyToken(tok, "k1")
	wantStatus(t, err, codes.Unauthenticated, "Token has expired.")
}

func TestVerifyTokenRefusesTampering(t *testing.T) {
	h := newHarness(t, WithWorkspace(newFakeWorkspace()))
	tok := h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	other := h.tokenV1(k1, "someone-else", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	parts := strings.Split(tok, ".")
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	flipped := append([]byte(nil), sig...)
	flipped[0] ^= 1
	replace := func(b []byte, old, new string) string {
		s := strings.Replace(string(b), old, new, 1)
		if s == string(b) {
			t.Fatalf("%q not in %s", old, b)
		}
		return enc([]byte(s))
	}
	kid := kidOf(t, tok)
	for name, c := range map[string]struct{ token, msg string }{
		"admin claimed":     {parts[0] + "." + replace(payload, `"isAdmin":false`, `"isAdmin":true`) + "." + parts[2], "Token signature is invalid."},
		"generation bumped": {parts[0] + "." + replace(payload, `"authTokenGeneration":0`, `"authTokenGeneration":1`) + "." + parts[2], "Token signature is invalid."},
		"audience changed":  {parts[0] + "." + replace(payload, `"aud":"k1"`, `"aud":"k2"`) + "." + parts[2], "Token signature is invalid."},
		"signature flipped": {parts[0] + "." + parts[1] + "." + enc(flipped), "Token signature is invalid."},
		"signature swapped": {parts[0] + "." + parts[1] + "." + strings.Split(other, ".")[2], "Token signature is invalid."},
		"unknown kid":       {replace(header, kid, "k1") + "." + parts[1] + "." + parts[2], "Token signature is invalid."},
		"alg none":          {enc([]byte(`{"alg":"none","typ":"JWT","kid":"`+kid+`"}`)) + "." + parts[1] + ".", "Token is malformed."},
		"alg HS256":         {replace(header, "EdDSA", "HS256") + "." + parts[1] + "." + parts[2], "Token is malformed."},
		"crit header":       {replace(header, `}`, `,"crit":["exp"]}`) + "." + parts[1] + "." + parts[2], "Token is malformed."},
		"kid not ours":      {replace(header, kid, "../../etc") + "." + parts[1] + "." + parts[2], "Token is malformed."},
		"two parts":         {parts[0] + "." + parts[1], "Token is malformed."},
		"four parts":        {tok + "." + parts[2], "Token is malformed."},
		"padded":            {parts[0] + "." + parts[1] + "." + parts[2] + "==", "Token is malformed."},
		"line break":        {parts[0][:5] + "\n" + parts[0][5:] + "." + parts[1] + "." + parts[2], "Token is malformed."},
		"not base64":        {"a.b.c", "Token is malformed."},
		"JSON, not a token": {`{"userId":"u"}`, "Token is malformed."},
		"huge":              {strings.Repeat("a", maxTokenBytes+1), "Token is malformed."},
		"short signature":   {parts[0] + "." + parts[1] + "." + enc(sig[:32]), "Token is malformed."},
	} {
		_, err := h.verifyToken(c.token, "")
		if err == nil {
			t.Errorf("%s: verified", name)
			continue
		}
		if s := st(err); s.Code() != codes.Unauthenticated || s.Message() != c.msg {
			t.Errorf("%s: %v %q, want %q", name, s.Code(), s.Message(), c.msg)
		}
	}
	_, err := h.verifyToken("", "")
	wantStatus(t, err, codes.InvalidArgument, "token is required.")
}

// Tokens our key signed, but not as Generate Token makes them, are refused all the same.
func TestVerifyTokenRefusesSignedMisfits(t *testing.T) {
	ws := newFakeWorkspace()
	h := newHarness(t, WithWorkspace(ws))
	k, err := h.srv.keys.current(context.Background(), start)
	if err != nil {
		t.Fatal(err)
	}
	gen := int64(0)
	good := func() tokenClaims {
		return tokenClaims{Issuer: "collab", Subject: "u", Audience: "k1", AuthTokenGeneration: &gen, UserID: "u", APIKey: "k1",
			IssuedAt: start.Unix(), Expires: start.Add(TokenLifetime).Unix(), ID: "jti-123456789012345678"}
	}
	sign := func(c tokenClaims) string {
		tok, err := k.sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if _, err := h.verifyToken(sign(good()), "k1"); err != nil {
		t.Fatalf("the well-formed token: %v", st(err))
	}
	for name, c := range map[string]struct {
		claims func(c *tokenClaims)
		msg    string
	}{
		"aud is another key":       {func(c *tokenClaims) { c.Audience = "k2" }, "Token was issued for another audience."},
		"no aud":                   {func(c *tokenClaims) { c.Audience = "" }, "Token was issued for another audience."},
		"no generation":            {func(c *tokenClaims) { c.AuthTokenGeneration = nil }, "Token is malformed."},
		"older generation":         {func(c *tokenClaims) { g := int64(-1); c.AuthTokenGeneration = &g }, "Token was revoked: the API key's auth token was reset."},
		"another issuer":           {func(c *tokenClaims) { c.Issuer = "https://elsewhere" }, "Token was issued by another issuer."},
		"issued in the future":     {func(c *tokenClaims) { c.IssuedAt += 3600; c.Expires += 3600 }, "Token is not valid yet."},
		"outside the key period":   {func(c *tokenClaims) { c.IssuedAt -= 2 * 3600; c.Expires -= 2 * 3600 }, "Token is malformed."},
		"longer than the lifetime": {func(c *tokenClaims) { c.Expires += 3600 }, "Token is malformed."},
		"already expired":          {func(c *tokenClaims) { c.Expires = start.Unix() }, "Token has expired."},
		"no user":                  {func(c *tokenClaims) { c.UserID = "" }, "Token is malformed."},
	} {
		claims := good()
		c.claims(&claims)
		_, err := h.verifyToken(sign(claims), "")
		if err == nil {
			t.Errorf("%s: verified", name)
			continue
		}
		if s := st(err); s.Code() != codes.Unauthenticated || s.Message() != c.msg {
			t.Errorf("%s: %v %q, want %q", name, s.Code(), s.Message(), c.msg)
		}
	}
}

func TestVerifyTokenDependencies(t *testing.T) {
	ws := newFakeWorkspace()
	h := newHarness(t, WithWorkspace(ws))
	tok := h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	// The workspace service away: the caller may retry, and nothing is verified.
	ws.err = status.Error(codes.Unavailable, "connection refused")
	_, err := h.verifyToken(tok, "")
	wantStatus(t, err, codes.Unavailable, "")
	ws.err = status.Error(codes.Internal, "boom at 10.0.0.7")
	_, err = h.verifyToken(tok, "")
	wantStatus(t, err, codes.Internal, "Internal error.")
	// No way to check revocation: nothing passes.
	bare := newHarness(t)
	tok = bare.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	_, err = bare.verifyToken(tok, "")
	wantStatus(t, err, codes.Internal, "Internal error.")
	// Nothing is asked of the workspace service for a token that fails a local check.
	ws.err = nil
	calls := ws.calls
	_, _ = h.verifyToken("x.y.z", "")
	_, _ = h.verifyToken(tok, "k2")
	if ws.calls != calls {
		t.Fatalf("%d calls for refused tokens", ws.calls-calls)
	}
	// Verifying keeps the public key, not a store read per token.
	reads := h.store.signingKeys.Load()
	for range 3 {
		if _, err := h.verifyToken(h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"}), ""); err != nil {
			t.Fatal(st(err))
		}
	}
	if n := h.store.signingKeys.Load() - reads; n > 1 {
		t.Fatalf("%d signing key reads for three verifications", n)
	}
}
