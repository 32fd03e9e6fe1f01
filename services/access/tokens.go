package access

import (
	"context"
	"fmt"
	"strings"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/validate"
)

const msgTokenGenerated = "Token generated successfully."

// GenerateTokenV1 is Generate Token with credentials in data; the interceptor checked them.
func (s *Server) GenerateTokenV1(ctx context.Context, req *accessv1.GenerateTokenV1Request) (*accessv1.GenerateTokenResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.ID("userId", req.GetUserId()); err != nil {
		return nil, err
	}
	props := req.GetUserProperties()
	if err := validate.ID("userProperties.organizationId", props.GetOrganizationId()); err != nil {
		return nil, err
	}
	email, err := optionalEmail("userProperties.email", props.GetEmail())
	if err != nil {
		return nil, err
	}
	now := s.now()
	k, err := s.keys.current(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("generate token: %w", err)
	}
	return s.token(k, c, tokenClaims{
		UserID: req.GetUserId(), OrganizationID: props.GetOrganizationId(),
		Email: email, IsAdmin: props.GetIsAdmin(), IssuedAt: now.Unix(),
	})
}

// GenerateToken is Generate Token v2: it may grant permissions first, exactly as Add
// Permissions does; the token is made only when they were written.
func (s *Server) GenerateToken(ctx context.Context, req *accessv1.GenerateTokenRequest) (*accessv1.GenerateTokenResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	userID := req.GetUserId()
	if err := validate.ID("userId", userID); err != nil {
		return nil, err
	}
	props := req.GetUserProperties()
	name := strings.TrimSpace(props.GetName())
	if err := validate.Name("userProperties.name", name, maxNameLength); err != nil {
		return nil, err
	}
	email, err := optionalEmail("userProperties.email", props.GetEmail())
	if err != nil {
		return nil, err
	}
	if err := validate.OptionalID("userProperties.organizationId", props.GetOrganizationId()); err != nil {
		return nil, err
	}
	now := s.now()
	var plan *grantPlan
	// An empty permissions object asks for nothing; anything in it is checked like Add
	// Permissions.
	if p := req.GetPermissions(); p != nil && (len(p.GetResources()) > 0 || p.Context != nil) {
		if plan, err = s.planGrants(ctx, c.APIKey, userID, p, now); err != nil {
			return nil, err
		}
	}
	// The key first: if it cannot be had, nothing is written.
	k, err := s.keys.current(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("generate token: %w", err)
	}
	if plan != nil {
		if err := s.apply(ctx, c.APIKey, plan); err != nil {
			return nil, fmt.Errorf("generate token: %w", err)
		}
	}
	return s.token(k, c, tokenClaims{
		UserID: userID, OrganizationID: props.GetOrganizationId(),
		Email: email, Name: name, IsAdmin: props.GetIsAdmin(), IssuedAt: now.Unix(),
	})
}

// token completes the claims every token has, binding it to the caller's API key and the
// generation of the auth token it authenticated with, and signs them.
func (s *Server) token(k *signer, c authn.Caller, claims tokenClaims) (*accessv1.GenerateTokenResponse, error) {
	generation := c.TokenGeneration
	claims.Issuer = s.issuer
	claims.Subject = claims.UserID
	claims.APIKey, claims.Audience = c.APIKey, c.APIKey
	claims.AuthTokenGeneration = &generation
	claims.Expires = claims.IssuedAt + int64(TokenLifetime.Seconds())
	claims.ID = ids.Random(24)
	tok, err := k.sign(claims)
	if err != nil {
		return nil, fmt.Errorf("generate token: %w", err)
	}
	return &accessv1.GenerateTokenResponse{Status: statusSuccess, Message: msgTokenGenerated, Data: &accessv1.Token{Token: tok}}, nil
}

// GetJwks returns the public keys of every token that has not expired.
func (s *Server) GetJwks(ctx context.Context, _ *accessv1.GetJwksRequest) (*accessv1.Jwks, error) {
	keys, err := s.keys.published(ctx, s.now())
	if err != nil {
		return nil, fmt.Errorf("get jwks: %w", err)
	}
	out := &accessv1.Jwks{Keys: make([]*accessv1.Jwk, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, jwk(k))
	}
	return out, nil
}
