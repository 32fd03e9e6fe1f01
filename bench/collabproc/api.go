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
	return s.token(ctx, user, map[string]any{"type": "document", "id": doc, "organizationId": org, "accessRole": role})
}

// MemberToken makes user a member of organization org with role and returns a token for it
// (Generate Token v2 with a grant on the organization). The member has that role on every
// document of org that is not restricted (AddDocuments' documents): one call grants a
// benchmark's thousand documents.
func (s *Server) MemberToken(ctx context.Context, user, org, role string) (string, error) {
	return s.token(ctx, user, map[string]any{"type": "organization", "id": org, "organizationId": org, "accessRole": role})
}

// token grants user one resource and returns a token for the user.
func (s *Server) token(ctx context.Context, user string, resource map[string]any) (string, error) {
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
		"permissions":    map[string]any{"resources": []any{resource}},
	}, &out)
	if err != nil {
		return "", err
	}
	if out.Result.Data.Token == "" {
		return "", fmt.Errorf("collabproc: Generate Token for %s answered no token", user)
	}
	return out.Result.Data.Token, nil
}

// addDocumentsBatch is the most documents Add Documents takes at once.
const addDocumentsBatch = 100

// AddDocuments makes the documents docs in organization org (and the organization), with the
// default access type (public: members have their organization role on them), in batches of
// 100, one call each.
func (s *Server) AddDocuments(ctx context.Context, org string, docs []string) error {
	for len(docs) > 0 {
		n := min(len(docs), addDocumentsBatch)
		items := make([]any, n)
		for i, d := range docs[:n] {
			items[i] = map[string]any{"documentId": d, "documentName": d}
		}
		var out struct {
			Result struct {
				Data map[string]struct {
					Success bool   `json:"success"`
					Message string `json:"message"`
				} `json:"data"`
			} `json:"result"`
		}
		err := s.Call(ctx, "/v2/organizations/documents/add", map[string]any{
			"organizationId": org, "createOrganization": true, "documents": items}, &out)
		if err != nil {
			return err
		}
		for _, d := range docs[:n] {
			if item := out.Result.Data[d]; !item.Success {
				return fmt.Errorf("collabproc: Add Documents: %s of %s not added: %q", d, org, item.Message)
			}
		}
		docs = docs[n:]
	}
	return nil
}

// SyncURL is the live-sync WebSocket URL of an editor's data with a token.
func (s *Server) SyncURL(org, doc, editor, token string) string {
	return "ws" + strings.TrimPrefix(s.BaseURL, "http") + "/v2/crdt/sync/" +
		url.PathEscape(org) + "/" + url.PathEscape(doc) + "/" + url.PathEscape(editor) + "?token=" + url.QueryEscape(token)
}
