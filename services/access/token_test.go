package access

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/mongotest"
)

// jwksOf fetches the key set as a JOSE library would read it.
func jwksOf(t *testing.T, srv *Server) jose.JSONWebKeySet {
	t.Helper()
	resp, err := srv.GetJwks(context.Background(), &accessv1.GetJwksRequest{})
	if err != nil {
		t.Fatal(st(err))
	}
	b, err := protojson.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatalf("key set %s: %v", b, err)
	}
	return set
}

// verify checks tok's signature against set (by its kid) and its time claims at now, and
// returns its claims.
func verify(set jose.JSONWebKeySet, tok string, now time.Time) (map[string]any, error) {
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	keys := set.Key(parsed.Headers[0].KeyID)
	if len(keys) != 1 {
		return nil, fmt.Errorf("kid %q is not in the key set", parsed.Headers[0].KeyID)
	}
	claims := map[string]any{}
	var std jwt.Claims
	if err := parsed.Claims(keys[0].Key, &claims, &std); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Time: now}, 0); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	return claims, nil
}

func mustVerify(t *testing.T, set jose.JSONWebKeySet, tok string, now time.Time) map[string]any {
	t.Helper()
	c, err := verify(set, tok, now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kidOf(t *testing.T, tok string) string {
	t.Helper()
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Headers[0].KeyID
}

func (h *harness) tokenV1(ctx context.Context, user string, props *accessv1.UserPropertiesV1) string {
	h.t.Helper()
	resp, err := h.srv.GenerateTokenV1(ctx, &accessv1.GenerateTokenV1Request{ApiKey: "k1", AuthToken: "t", UserId: user, UserProperties: props})
	if err != nil {
		h.t.Fatal(st(err))
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "Token generated successfully." || resp.GetData().GetToken() == "" {
		h.t.Fatalf("token answer %v", resp)
	}
	return resp.GetData().GetToken()
}

func (h *harness) tokenV2(ctx context.Context, req *accessv1.GenerateTokenRequest) string {
	h.t.Helper()
	resp, err := h.srv.GenerateToken(ctx, req)
	if err != nil {
		h.t.Fatal(st(err))
	}
	if resp.GetStatus() != "success" || resp.GetMessage() != "Token generated successfully." || resp.GetData().GetToken() == "" {
		h.t.Fatalf("token answer %v", resp)
	}
	return resp.GetData().GetToken()
}

// epochKid is the kid of the 24-hour period holding at.
func epochKid(at time.Time) string { return fmt.Sprintf("k%d", at.Unix()/86400) }

func TestGenerateTokenV1(t *testing.T) {
	h := newHarness(t)
	// The caller authenticated with the key's third auth token.
	k1gen3 := authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w", TokenGeneration: 3})
	tok := h.tokenV1(k1gen3, "u1", &accessv1.UserPropertiesV1{OrganizationId: "o", IsAdmin: true, Email: "u1@example.com"})

	// The header is exactly what RFC 8037 and the brief ask for.
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q", tok)
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"alg":"EdDSA","typ":"JWT","kid":"` + epochKid(start) + `"}`; string(header) != want {
		t.Fatalf("header %s, want %s", header, want)
	}

	c := mustVerify(t, jwksOf(t, h.srv), tok, start)
	want := map[string]any{
		"iss": "collab", "sub": "u1", "userId": "u1", "apiKey": "k1", "organizationId": "o",
		"email": "u1@example.com", "isAdmin": true, "iat": float64(start.Unix()), "exp": float64(start.Unix() + 172800),
		"aud": "k1", "authTokenGeneration": float64(3),
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("claim %s = %v, want %v", k, c[k], v)
		}
	}
	if c["exp"].(float64)-c["iat"].(float64) != 172800 {
		t.Errorf("lifetime %v", c["exp"].(float64)-c["iat"].(float64))
	}
	if jti, _ := c["jti"].(string); len(jti) < 16 {
		t.Errorf("jti %q", c["jti"])
	}
	if _, has := c["name"]; has {
		t.Errorf("name claim without a name: %v", c)
	}
	if len(c) != len(want)+1 {
		t.Errorf("unexpected claims %v", c)
	}
	// Another token has another jti.
	if c2 := mustVerify(t, jwksOf(t, h.srv), h.tokenV1(k1, "u1", &accessv1.UserPropertiesV1{OrganizationId: "o"}), start); c2["jti"] == c["jti"] || c2["isAdmin"] != false {
		t.Fatalf("second token %v", c2)
	}
}

func TestGenerateTokenV2(t *testing.T) {
	h := newHarness(t, WithIssuer("https://collab.example"))
	set := func() jose.JSONWebKeySet { return jwksOf(t, h.srv) }
	c := mustVerify(t, set(), h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u2", UserProperties: &accessv1.UserProperties{Name: " U Two ", Email: "u2@example.com"}}), start)
	if c["iss"] != "https://collab.example" || c["userId"] != "u2" || c["sub"] != "u2" || c["name"] != "U Two" || c["email"] != "u2@example.com" || c["apiKey"] != "k1" ||
		c["aud"] != "k1" || c["authTokenGeneration"] != float64(0) {
		t.Fatalf("claims %v", c)
	}
	if v, has := c["isAdmin"]; !has || v != false {
		t.Fatalf("isAdmin must always be present: %v", c)
	}
	if _, has := c["organizationId"]; has {
		t.Fatalf("organizationId without one: %v", c)
	}
	c = mustVerify(t, set(), h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u3", UserProperties: &accessv1.UserProperties{OrganizationId: "o", IsAdmin: true}}), start)
	if c["organizationId"] != "o" || c["isAdmin"] != true {
		t.Fatalf("claims %v", c)
	}
	// Bare userId only.
	c = mustVerify(t, set(), h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u4"}), start)
	if c["userId"] != "u4" || c["isAdmin"] != false || c["exp"].(float64)-c["iat"].(float64) != 172800 {
		t.Fatalf("claims %v", c)
	}
	// isAdmin is kept nowhere: nothing was stored for these users.
	for _, u := range []string{"u2", "u3", "u4"} {
		if g, _ := h.store.Grants(context.Background(), "k1", "o", []string{u}, start); len(g) != 0 {
			t.Fatalf("token generation stored %+v", g)
		}
	}
}

func TestGenerateTokenV2Permissions(t *testing.T) {
	h := newHarness(t)
	world(h, "k1")
	tok := h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{OrganizationId: "o"}, Permissions: &accessv1.Permissions{
		Resources: []*accessv1.Resource{resource("organization", "o", "o", "viewer"), resource("document", "restricted", "o")},
	}})
	mustVerify(t, jwksOf(t, h.srv), tok, start)
	checkEntry(t, "granted by the token call", h.doc(k1, "o", "u", "restricted"), entry{role: "editor", accessType: "restricted"})
	if got := h.get(k1, "o", []string{"u"}, nil, nil)["u"].GetOrganization()["o"].GetAccessRole(); got != "viewer" {
		t.Fatalf("membership %q", got)
	}
	// An empty permissions object asks for nothing.
	h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "v", Permissions: &accessv1.Permissions{}})

	// Refused permissions: no token and nothing written.
	for _, c := range []struct {
		perms *accessv1.Permissions
		code  codes.Code
		msg   string
	}{
		{&accessv1.Permissions{Resources: []*accessv1.Resource{resource("folder", "fr", "o"), resource("document", "x", "o", "boss")}}, codes.InvalidArgument, "permissions.resources[1].accessRole must be one of viewer, editor."},
		{&accessv1.Permissions{Resources: []*accessv1.Resource{resource("folder", "fr", "o"), resource("document", "ghost", "o")}}, codes.NotFound, "Document ghost does not exist in organization o."},
		{&accessv1.Permissions{Context: &accessv1.ContextAccess{}}, codes.InvalidArgument, "permissions.resources must contain at least one resource."},
	} {
		resp, err := h.srv.GenerateToken(k1, &accessv1.GenerateTokenRequest{UserId: "w", Permissions: c.perms})
		wantStatus(t, err, c.code, c.msg)
		if resp != nil {
			t.Fatalf("token despite refusal: %v", resp)
		}
	}
	if g, _ := h.store.Grants(context.Background(), "k1", "o", []string{"w", "v"}, start); len(g) != 0 {
		t.Fatalf("refused token calls wrote %+v", g)
	}
}

func TestGenerateTokenBadInput(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("n", 201)
	for _, c := range []struct {
		req *accessv1.GenerateTokenV1Request
		msg string
	}{
		{&accessv1.GenerateTokenV1Request{UserProperties: &accessv1.UserPropertiesV1{OrganizationId: "o"}}, "userId is required."},
		{&accessv1.GenerateTokenV1Request{UserId: "u"}, "userProperties.organizationId is required."},
		{&accessv1.GenerateTokenV1Request{UserId: "u", UserProperties: &accessv1.UserPropertiesV1{IsAdmin: true}}, "userProperties.organizationId is required."},
		{&accessv1.GenerateTokenV1Request{UserId: "u", UserProperties: &accessv1.UserPropertiesV1{OrganizationId: "o", Email: "not-an-email"}}, "userProperties.email must be a valid email address."},
		{&accessv1.GenerateTokenV1Request{UserId: "u", UserProperties: &accessv1.UserPropertiesV1{OrganizationId: "o", Email: "U <u@example.com>"}}, "userProperties.email must be a valid email address."},
	} {
		_, err := h.srv.GenerateTokenV1(k1, c.req)
		wantStatus(t, err, codes.InvalidArgument, c.msg)
	}
	for _, c := range []struct {
		req *accessv1.GenerateTokenRequest
		msg string
	}{
		{&accessv1.GenerateTokenRequest{}, "userId is required."},
		{&accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{Name: long}}, "userProperties.name must be at most 200 characters."},
		{&accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{Name: "Ann\r\nX-Admin: true"}}, "userProperties.name must not contain control characters."},
		{&accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{Name: "Ann\u2066\u202Enimda"}}, "userProperties.name must not contain control characters."},
		{&accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{Email: "a@b"}}, "userProperties.email must be a valid email address."},
		{&accessv1.GenerateTokenRequest{UserId: "u", UserProperties: &accessv1.UserProperties{OrganizationId: " o"}}, "userProperties.organizationId must not start or end with white space."},
	} {
		_, err := h.srv.GenerateToken(k1, c.req)
		wantStatus(t, err, codes.InvalidArgument, c.msg)
	}
	// Without a caller (the interceptor did not run): never a token.
	_, err := h.srv.GenerateTokenV1(context.Background(), &accessv1.GenerateTokenV1Request{UserId: "u", UserProperties: &accessv1.UserPropertiesV1{OrganizationId: "o"}})
	wantStatus(t, err, codes.Internal, "Internal error.")
}

func TestJwks(t *testing.T) {
	h := newHarness(t)
	resp, err := h.srv.GetJwks(context.Background(), &accessv1.GetJwksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Always the current key, even before any token.
	if len(resp.GetKeys()) != 1 {
		t.Fatalf("keys %v", resp.GetKeys())
	}
	k := resp.GetKeys()[0]
	x, err := base64.RawURLEncoding.DecodeString(k.GetX())
	if k.GetKty() != "OKP" || k.GetCrv() != "Ed25519" || k.GetAlg() != "EdDSA" || k.GetUse() != "sig" || k.GetKid() != epochKid(start) || err != nil || len(x) != 32 {
		t.Fatalf("jwk %v", k)
	}
	set := jwksOf(t, h.srv)
	if !set.Keys[0].Valid() || !set.Keys[0].IsPublic() {
		t.Fatalf("not a valid public key: %+v", set.Keys[0])
	}
	// The private key is stored sealed only.
	stored, err := h.store.SigningKey(context.Background(), k.GetKid())
	if err != nil {
		t.Fatal(err)
	}
	seed := h.srv.keys.cache[k.GetKid()].private.Seed()
	if strings.Contains(string(stored.SealedPrivateKey), string(seed)) {
		t.Fatal("the stored key holds the private key in the clear")
	}
}

func TestKeyRotation(t *testing.T) {
	h := newHarness(t)
	epochN := start // one hour into period N
	tokN := h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	if kidOf(t, tokN) != epochKid(epochN) {
		t.Fatalf("kid %q, want %q", kidOf(t, tokN), epochKid(epochN))
	}

	// Period N+1: new tokens use the new key; the old token still verifies.
	h.clock.Advance(24 * time.Hour)
	tokN1 := h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u"})
	if kidOf(t, tokN1) == kidOf(t, tokN) || kidOf(t, tokN1) != epochKid(h.clock.Now()) {
		t.Fatalf("after rotation kid %q (before %q)", kidOf(t, tokN1), kidOf(t, tokN))
	}
	set := jwksOf(t, h.srv)
	if len(set.Keys) != 2 || set.Keys[0].KeyID != kidOf(t, tokN1) {
		t.Fatalf("key set in period N+1: %v (newest first)", set.Keys)
	}
	mustVerify(t, set, tokN, h.clock.Now())
	mustVerify(t, set, tokN1, h.clock.Now())

	// Period N+2, just before tokN expires: it still verifies against the served set.
	h.clock.Advance(24*time.Hour - time.Second) // start + 48h - 1s
	set = jwksOf(t, h.srv)
	if len(set.Keys) != 3 {
		t.Fatalf("key set in period N+2: %d keys", len(set.Keys))
	}
	mustVerify(t, set, tokN, h.clock.Now())
	h.clock.Advance(2 * time.Second) // past exp (go-jose accepts the exp second itself)
	if _, err := verify(set, tokN, h.clock.Now()); err == nil {
		t.Fatal("an expired token validated")
	}

	// Key N stays until every token it could have signed expired: its period's end + 48h.
	endN := time.Unix((epochN.Unix()/86400+1)*86400, 0)
	h.clock = clock.NewFake(endN.Add(TokenLifetime).Add(-time.Second))
	h.srv.clock = h.clock
	if last := jwksOf(t, h.srv); len(last.Key(kidOf(t, tokN))) != 1 {
		t.Fatal("key N left the set while its last tokens were valid")
	}
	h.clock.Advance(time.Second)
	set = jwksOf(t, h.srv)
	if len(set.Key(kidOf(t, tokN))) != 0 {
		t.Fatal("key N still served after its tokens expired")
	}
	if len(set.Key(kidOf(t, tokN1))) != 1 {
		t.Fatal("key N+1 left too early")
	}
	if _, err := verify(set, tokN, h.clock.Now()); err == nil {
		t.Fatal("token of a retired key verified")
	}
}

func TestShorterRotation(t *testing.T) {
	h := newHarness(t, WithKeyRotation(time.Hour))
	a := h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u"})
	h.clock.Advance(59 * time.Minute)
	if b := h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u"}); kidOf(t, b) != kidOf(t, a) {
		t.Fatal("key changed within the period")
	}
	h.clock.Advance(time.Minute)
	c := h.tokenV2(k1, &accessv1.GenerateTokenRequest{UserId: "u"})
	if kidOf(t, c) == kidOf(t, a) || kidOf(t, c) != fmt.Sprintf("k%d", h.clock.Now().Unix()/3600) {
		t.Fatalf("kid after an hour %q", kidOf(t, c))
	}
	set := jwksOf(t, h.srv)
	mustVerify(t, set, a, h.clock.Now())
	mustVerify(t, set, c, h.clock.Now())
}

func TestTamperedToken(t *testing.T) {
	h := newHarness(t)
	tok := h.tokenV1(k1, "u", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	set := jwksOf(t, h.srv)
	mustVerify(t, set, tok, start)
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	admin := strings.Replace(string(payload), `"isAdmin":false`, `"isAdmin":true`, 1)
	if admin == string(payload) {
		t.Fatalf("payload %s", payload)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	other := h.tokenV1(k1, "someone-else", &accessv1.UserPropertiesV1{OrganizationId: "o"})
	for name, forged := range map[string]string{
		"claims changed":    parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(admin)) + "." + parts[2],
		"signature flipped": parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig),
		"signature swapped": parts[0] + "." + parts[1] + "." + strings.Split(other, ".")[2],
		"unsigned":          base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
	} {
		if _, err := verify(set, forged, start); err == nil {
			t.Errorf("%s: a tampered token verified", name)
		}
	}
}

// Replicas on one store converge on one key per period, and a restarted process reuses it.
func TestReplicasShareOneKey(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"mongo": func(t *testing.T) Store {
			s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("access"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			clk := clock.NewFake(start)
			replicas := make([]*Server, 4)
			for i := range replicas {
				s, err := New(store, secret, newFakeDocs(), WithClock(clk), WithLogger(quiet))
				if err != nil {
					t.Fatal(err)
				}
				replicas[i] = s
			}
			toks := make([]string, 16)
			errs := make([]error, 16)
			var wg sync.WaitGroup
			for i := range toks {
				wg.Go(func() {
					resp, err := replicas[i%len(replicas)].GenerateToken(k1, &accessv1.GenerateTokenRequest{UserId: fmt.Sprintf("u%d", i)})
					toks[i], errs[i] = resp.GetData().GetToken(), err
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("replica token %d: %v", i, err)
				}
			}
			for _, r := range replicas {
				set := jwksOf(t, r)
				if len(set.Keys) != 1 {
					t.Fatalf("replica serves %d keys", len(set.Keys))
				}
				for _, tok := range toks {
					mustVerify(t, set, tok, start)
				}
			}
			// A restart (a new Server on the same data and secret) signs with the same key.
			restarted, err := New(store, secret, newFakeDocs(), WithClock(clk), WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := restarted.GenerateToken(k1, &accessv1.GenerateTokenRequest{UserId: "u"})
			if err != nil {
				t.Fatal(err)
			}
			if kidOf(t, resp.GetData().GetToken()) != kidOf(t, toks[0]) {
				t.Fatal("restart made a new key")
			}
			mustVerify(t, jwksOf(t, replicas[0]), resp.GetData().GetToken(), start)
			// A process with another master secret cannot use the stored key, and says so
			// rather than signing with something the key set does not hold.
			stranger, err := New(store, []byte("another secret entirely"), newFakeDocs(), WithClock(clk), WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			_, err = stranger.GenerateToken(k1, &accessv1.GenerateTokenRequest{UserId: "u"})
			wantStatus(t, err, codes.Internal, "Internal error.")
		})
	}
}
