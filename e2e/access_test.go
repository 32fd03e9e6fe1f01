package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

func grant(s *system, user string, resources ...map[string]any) {
	s.t.Helper()
	var list []any
	for _, r := range resources {
		list = append(list, r)
	}
	s.call("/v2/auth/permissions/add", s.devKey(), map[string]any{"user": map[string]any{"userId": user}, "permissions": map[string]any{"resources": list}}).data(s.t, "Permissions added successfully.")
}

func TestGetPermissions(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	s.folder("o", "private", "", "restricted")
	s.docs("o", "private", "secret")
	s.docs("o", "", "open")
	s.call("/v1/organizations/documents/access/update", k, map[string]any{"organizationId": "o", "documentIds": []string{"open"}, "accessType": "organizationPrivate"}).data(t, "")
	expires := float64(s.clock.Now().Add(2 * time.Hour).Unix())
	grant(s, "member", map[string]any{"type": "organization", "id": "o", "organizationId": "o", "accessRole": "editor"})
	grant(s, "guest", map[string]any{"type": "document", "id": "secret", "organizationId": "o", "accessRole": "viewer", "expiresAt": expires})
	s.call("/v2/auth/permissions/add", k, map[string]any{"user": map[string]any{"userId": "member"}, "permissions": map[string]any{
		"resources": []any{map[string]any{"type": "folder", "id": "private", "organizationId": "o", "accessRole": "viewer"}},
		"context":   map[string]any{"access": map[string]any{"region": "eu", "projectId": []any{"p2", 7}}},
	}}).data(t, "")

	r := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"member", "guest"}, "documentIds": []string{"secret", "open"}, "folderIds": []string{"private"}})
	d := r.data(t, "User permissions retrieved successfully.")
	member, guest := d["member"].(map[string]any), d["guest"].(map[string]any)

	if got := member["organization"].(map[string]any)["o"].(map[string]any); got["accessRole"] != "editor" || len(got) != 1 {
		t.Fatalf("member organization %v", got)
	}
	if got := member["documents"].(map[string]any)["secret"].(map[string]any); got["accessRole"] != "viewer" || got["accessType"] != "restricted" {
		t.Fatalf("member/secret (folder grant) %v", got)
	}
	if got := member["documents"].(map[string]any)["open"].(map[string]any); got["accessRole"] != "editor" || got["accessType"] != "organizationPrivate" {
		t.Fatalf("member/open %v", got)
	}
	if got := member["context"].(map[string]any)["accessFields"]; !equalStrings(got, "projectId:7", "projectId:p2", "region:eu") {
		t.Fatalf("member context %v", got)
	}

	g := guest["documents"].(map[string]any)["secret"].(map[string]any)
	if g["accessRole"] != "viewer" || g["expiresAt"] != expires || g["accessType"] != "restricted" {
		t.Fatalf("guest/secret (temporary) %v", g)
	}
	denied := guest["documents"].(map[string]any)["open"].(map[string]any)
	if denied["errorCode"] != "permission_denied" || denied["error"] != "User does not have access to document" || denied["accessType"] != "organizationPrivate" {
		t.Fatalf("guest/open %v", denied)
	}
	if _, has := denied["accessRole"]; has {
		t.Fatalf("denied entry has a role: %v", denied)
	}
	if _, has := guest["context"]; has {
		t.Fatalf("context without access context: %v", guest)
	}
	if len(guest["organization"].(map[string]any)) != 0 {
		t.Fatalf("guest is not a member: %v", guest["organization"])
	}

	// Temporary access lapses by itself.
	s.clock.Advance(3 * time.Hour)
	d = s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"guest"}, "documentIds": []string{"secret"}}).data(t, "")
	if got := d["guest"].(map[string]any)["documents"].(map[string]any)["secret"].(map[string]any); got["errorCode"] != "permission_denied" {
		t.Fatalf("after expiry %v", got)
	}

	// A missing document: NOT_FOUND with the per-user structure in details.
	nf := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"member"}, "documentIds": []string{"open", "ghost"}})
	nf.fails(t, 404, "NOT_FOUND", "Folder or document does not exist")
	details := nf.body["error"].(map[string]any)["details"].(map[string]any)
	docs := details["member"].(map[string]any)["documents"].(map[string]any)
	if ghost := docs["ghost"].(map[string]any); ghost["errorCode"] != "does_not_exist" || ghost["error"] != "Document does not exist" {
		t.Fatalf("missing entry %v", ghost)
	}
	if open := docs["open"].(map[string]any); open["accessRole"] != "editor" {
		t.Fatalf("present entry in details %v", open)
	}
}

func TestPermissionsBadInput(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	s.docs("o", "", "d")
	res := func(m map[string]any) map[string]any {
		return map[string]any{"user": map[string]any{"userId": "u"}, "permissions": map[string]any{"resources": []any{m}}}
	}
	many := make([]string, 31)
	for i := range many {
		many[i] = "d"
	}
	cases := []struct {
		path string
		data map[string]any
		http int
		code string
	}{
		{"/v2/auth/permissions/get", map[string]any{"userIds": []string{"u"}}, 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/get", map[string]any{"organizationId": "o"}, 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/get", map[string]any{"organizationId": "o", "userIds": []string{"u"}, "documentIds": many}, 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/get", map[string]any{"organizationId": "nope", "userIds": []string{"u"}}, 404, "NOT_FOUND"},
		{"/v2/auth/permissions/add", res(map[string]any{"type": "page", "id": "d", "organizationId": "o"}), 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/add", res(map[string]any{"type": "document", "id": "d", "organizationId": "o", "accessRole": "owner"}), 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/add", res(map[string]any{"type": "document", "id": "d", "organizationId": "o", "expiresAt": 1000}), 400, "INVALID_ARGUMENT"},
		{"/v2/auth/permissions/add", res(map[string]any{"type": "document", "id": "ghost", "organizationId": "o"}), 404, "NOT_FOUND"},
		{"/v2/auth/permissions/add", map[string]any{"permissions": map[string]any{"resources": []any{}}}, 400, "INVALID_ARGUMENT"},
	}
	for _, c := range cases {
		s.call(c.path, k, c.data).fails(t, c.http, c.code, "")
	}
	d := s.call("/v2/auth/permissions/get", k, map[string]any{"organizationId": "o", "userIds": []string{"u"}, "documentIds": []string{"d"}}).data(t, "")
	if entry := d["u"].(map[string]any)["documents"].(map[string]any)["d"].(map[string]any); entry["accessRole"] != "viewer" {
		t.Fatalf("refused grants were written: %v", entry)
	}
}

// Tokens verify with a standard JOSE library against the served key set.
func TestGenerateTokenAndJWKS(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.org("o")
	v1 := s.call("/v1/auth/token/get", nil, map[string]any{
		"apiKey": s.proc.Dev.APIKey, "authToken": s.proc.Dev.AuthToken, "userId": "u1",
		"userProperties": map[string]any{"organizationId": "o", "isAdmin": true, "email": "u1@example.com"},
	}).data(t, "Token generated successfully.")
	v2 := s.call("/v2/auth/generate_token", k, map[string]any{"userId": "u2", "userProperties": map[string]any{"name": "U2", "email": "u2@example.com"}}).data(t, "Token generated successfully.")

	jwks := s.do(http.MethodGet, "/.well-known/jwks.json", nil, nil)
	if jwks.status != 200 {
		t.Fatalf("jwks %d %s", jwks.status, jwks.raw)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks.raw, &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("jwks %s: %v", jwks.raw, err)
	}
	verify := func(tok string) map[string]any {
		parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		keys := set.Key(parsed.Headers[0].KeyID)
		if len(keys) != 1 {
			t.Fatalf("kid %q not in the key set", parsed.Headers[0].KeyID)
		}
		claims := map[string]any{}
		if err := parsed.Claims(keys[0].Key, &claims); err != nil {
			t.Fatalf("verify: %v", err)
		}
		return claims
	}
	c1 := verify(v1["token"].(string))
	if c1["userId"] != "u1" || c1["organizationId"] != "o" || c1["isAdmin"] != true || c1["email"] != "u1@example.com" {
		t.Fatalf("v1 claims %v", c1)
	}
	if c1["exp"].(float64)-c1["iat"].(float64) != 48*3600 {
		t.Fatalf("lifetime %v", c1["exp"].(float64)-c1["iat"].(float64))
	}
	c2 := verify(v2["token"].(string))
	if c2["userId"] != "u2" || c2["isAdmin"] != false || c2["name"] != "U2" {
		t.Fatalf("v2 claims %v", c2)
	}

	// Body credentials are checked like headers.
	s.call("/v1/auth/token/get", nil, map[string]any{"apiKey": s.proc.Dev.APIKey, "authToken": "wrong", "userId": "u", "userProperties": map[string]any{"organizationId": "o"}}).fails(t, 400, "INVALID_ARGUMENT", "Auth token not found.")
	s.call("/v1/auth/token/get", nil, map[string]any{"apiKey": "nope", "authToken": "x", "userId": "u", "userProperties": map[string]any{"organizationId": "o"}}).fails(t, 403, "PERMISSION_DENIED", "Invalid API key.")
	s.call("/v1/auth/token/get", nil, map[string]any{"apiKey": s.proc.Dev.APIKey, "authToken": s.proc.Dev.AuthToken, "userId": "u"}).fails(t, 400, "INVALID_ARGUMENT", "userProperties.organizationId is required.")
	s.call("/v2/auth/generate_token", k, map[string]any{}).fails(t, 400, "INVALID_ARGUMENT", "")

	// A tampered token does not verify.
	tok := v2["token"].(string)
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	if parsed, err := jwt.ParseSigned(forged, []jose.SignatureAlgorithm{jose.EdDSA}); err == nil {
		claims := map[string]any{}
		if parsed.Claims(set.Keys[0].Key, &claims) == nil {
			t.Fatal("a tampered token verified")
		}
	}
}

// A generated token is bound to the auth token that made it: Reset Auth Token revokes it, as
// VerifyToken (internal gRPC, no HTTP route) tells the services that accept tokens. The
// access service learns of the reset from the workspace service, not from the token.
func TestResetAuthTokenRevokesTokens(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "--internal-token="+testInternalToken)
	wsID, wsToken := s.newWorkspace("owner@example.com")
	resetKey, resetAuth := s.newKey(wsID, wsToken)
	keptKey, keptAuth := s.newKey(wsID, wsToken)
	revoked := s.call("/v2/auth/generate_token", keyHeaders(resetKey, resetAuth), map[string]any{"userId": "u1"}).data(t, "Token generated successfully.")["token"].(string)
	kept := s.call("/v1/auth/token/get", nil, map[string]any{"apiKey": keptKey, "authToken": keptAuth, "userId": "u2",
		"userProperties": map[string]any{"organizationId": "o"}}).data(t, "Token generated successfully.")["token"].(string)

	conn, err := grpc.NewClient(s.proc.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	access := accessv1.NewAccessServiceClient(conn)
	internal := metadata.AppendToOutgoingContext(context.Background(), "x-collab-internal-token", testInternalToken)
	verifyToken := func(tok, audience string) (*accessv1.VerifyTokenResponse, error) {
		return access.VerifyToken(internal, &accessv1.VerifyTokenRequest{Token: tok, Audience: audience})
	}
	if _, err := access.VerifyToken(context.Background(), &accessv1.VerifyTokenRequest{Token: kept}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("VerifyToken without the internal token: %v", err)
	}
	for tok, key := range map[string]string{revoked: resetKey, kept: keptKey} {
		resp, err := verifyToken(tok, key)
		if err != nil || resp.GetApiKey() != key || resp.GetWorkspaceId() != wsID {
			t.Fatalf("before the reset: %v %v", resp, err)
		}
	}

	s.call("/v2/workspace/authtoken/reset", workspaceHeaders(wsID, wsToken), map[string]any{"apiKey": resetKey}).data(t, "Auth token reset successfully.")
	_, err = verifyToken(revoked, resetKey)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != "Token was revoked: the API key's auth token was reset." {
		t.Fatalf("the reset key's token: %v", st)
	}
	if resp, err := verifyToken(kept, keptKey); err != nil || resp.GetUserId() != "u2" || resp.GetOrganizationId() != "o" {
		t.Fatalf("the untouched key's token: %v %v", resp, err)
	}
	_, err = verifyToken(kept, resetKey)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != "Token was issued for another audience." {
		t.Fatalf("a token checked for another key: %v", st)
	}
	s.clock.Advance(48 * time.Hour)
	_, err = verifyToken(kept, keptKey)
	if st := status.Convert(err); st.Code() != codes.Unauthenticated || st.Message() != "Token has expired." {
		t.Fatalf("after 48 hours: %v", st)
	}
	// No HTTP route reaches it.
	s.call("/v2/auth/token/verify", keyHeaders(keptKey, keptAuth), map[string]any{"token": kept}).fails(t, 404, "NOT_FOUND", "")
}
