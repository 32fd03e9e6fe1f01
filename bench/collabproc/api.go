package collabproc

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/collab/collab/bench/apiclient"
)

// Headers are the development workspace's API key credentials (auth class K).
func (s *Server) Headers() map[string]string {
	return map[string]string{"x-service-api-key": s.APIKey, "x-service-auth-token": s.AuthToken}
}

// Call posts {"data": data} to path (/v2/...) with the API key's credentials and decodes the
// answer into out when it is not nil; a status other than 200 is an error holding the answer.
func (s *Server) Call(ctx context.Context, path string, data, out any) error {
	if err := apiclient.PostContext(ctx, s.BaseURL+path, s.Headers(), data, out); err != nil {
		return fmt.Errorf("collabproc: %w", err)
	}
	return nil
}

// CreateDocument makes document doc in organization org (and the organization), restricted:
// only users granted a role on it may read it, so a viewer is a viewer (a public document lets
// any token of the API key read).
func (s *Server) CreateDocument(ctx context.Context, org, doc string) error {
	err := s.Call(ctx, "/v2/organizations/documents/add", map[string]any{"organizationId": org, "createOrganization": true,
		"documents": []any{map[string]any{"documentId": doc, "documentName": doc}}}, nil)
	if err != nil {
		return err
	}
	return s.Call(ctx, "/v1/organizations/documents/access/update", map[string]any{
		"organizationId": org, "documentIds": []string{doc}, "accessType": "restricted"}, nil)
}

// Roles a sync token's user may be granted on a document.
const (
	RoleEditor = "editor"
	RoleViewer = "viewer"
)

// SyncToken grants user role on document doc of org and returns a token for it (Generate
// Token v2 with permissions), as a live-sync client presents it.
func (s *Server) SyncToken(ctx context.Context, user, org, doc, role string) (string, error) {
	var out struct {
		Result struct {
			Data struct {
				Token string `json:"token"`
			} `json:"data"`
		} `json:"result"`
	}
	err := s.Call(ctx, "/v2/auth/generate_token", map[string]any{
		"userId":         user,
		"userProperties": map[string]any{"name": user, "email": user + "@example.com"},
		"permissions": map[string]any{"resources": []any{map[string]any{
			"type": "document", "id": doc, "organizationId": org, "accessRole": role}}},
	}, &out)
	if err != nil {
		return "", err
	}
	if out.Result.Data.Token == "" {
		return "", fmt.Errorf("collabproc: Generate Token for %s answered no token", user)
	}
	return out.Result.Data.Token, nil
}

// SyncURL is the live-sync WebSocket URL of an editor's data with a token.
func (s *Server) SyncURL(org, doc, editor, token string) string {
	return "ws" + strings.TrimPrefix(s.BaseURL, "http") + "/v2/crdt/sync/" +
		url.PathEscape(org) + "/" + url.PathEscape(doc) + "/" + url.PathEscape(editor) + "?token=" + url.QueryEscape(token)
}
