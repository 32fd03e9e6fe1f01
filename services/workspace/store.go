package workspace

import (
	"context"
	"errors"
	"time"
)

// Store errors. Implementations return them (possibly wrapped) so the server can tell the
// caller what happened.
var (
	ErrNotFound        = errors.New("not found")
	ErrOwnerEmailTaken = errors.New("owner email already owns a workspace")
	ErrKeyExists       = errors.New("api key already exists")
	ErrWorkspaceExists = errors.New("workspace id already exists")
	ErrKeyLimit        = errors.New("the workspace has as many api keys as it may")
)

// Store keeps workspaces and API keys. Times are stored with millisecond precision; callers
// pass them truncated so every implementation returns exactly what it was given.
type Store interface {
	// CreateWorkspace stores ws and its first API key. It returns ErrOwnerEmailTaken when another
	// workspace has ws.OwnerEmail, ErrWorkspaceExists when ws.ID is taken, ErrKeyExists when the
	// key exists; on error nothing is left stored.
	CreateWorkspace(ctx context.Context, ws *Workspace, key *APIKey) error
	// Workspace returns the workspace with id, or ErrNotFound.
	Workspace(ctx context.Context, id string) (*Workspace, error)
	// WorkspaceByOwnerEmail returns the workspace owned by email (lower-cased), or ErrNotFound.
	WorkspaceByOwnerEmail(ctx context.Context, email string) (*Workspace, error)
	// UpdateSettings applies the patch (the switches and the Slack webhook URL) in one atomic
	// write and returns the workspace after it, or ErrNotFound.
	UpdateSettings(ctx context.Context, id string, patch SettingsPatch) (*Workspace, error)
	// SetWorkspaceToken replaces the workspace auth token's hash, or ErrNotFound.
	SetWorkspaceToken(ctx context.Context, id, hash, last4 string) error
	// VerifyEmail marks the owner email verified if tokenHash is the pending verification token
	// and consumes it; activateKeys also sets KeysActive. It returns the workspace after the
	// change, or ErrNotFound when no workspace id has that pending token.
	VerifyEmail(ctx context.Context, id, tokenHash string, activateKeys bool) (*Workspace, error)
	// ActivateKeys sets KeysActive, or returns ErrNotFound.
	ActivateKeys(ctx context.Context, id string) error

	// CreateAPIKey stores a key of an existing workspace, or returns ErrKeyExists, or
	// ErrNotFound when there is no such workspace. With limit > 0 it returns ErrKeyLimit when
	// the workspace has limit keys already; the limit holds under concurrent calls, without
	// transactions.
	CreateAPIKey(ctx context.Context, key *APIKey, limit int) error
	// CountAPIKeys counts the workspace's keys.
	CountAPIKeys(ctx context.Context, workspaceID string) (int, error)
	// APIKey returns the key with that value in any workspace, or ErrNotFound. Only
	// authentication uses it; everything a tenant asks for goes through WorkspaceAPIKey.
	APIKey(ctx context.Context, key string) (*APIKey, error)
	// WorkspaceAPIKey returns the key if it belongs to workspaceID, or ErrNotFound.
	WorkspaceAPIKey(ctx context.Context, workspaceID, key string) (*APIKey, error)
	// ListAPIKeys returns up to limit keys of the workspace in (CreatedAt, Key) order, starting
	// after the position when it is not nil.
	ListAPIKeys(ctx context.Context, workspaceID string, after *KeyPosition, limit int) ([]*APIKey, error)
	// SetAuthTokens replaces the tokens of a key of workspaceID, increments its TokenGeneration
	// in the same atomic write, and returns the key after it, or ErrNotFound.
	SetAuthTokens(ctx context.Context, workspaceID, key string, tokens []AuthToken) (*APIKey, error)
	// SetAllowedDomains replaces the allowed domains of a key and returns the key after it, or
	// ErrNotFound.
	SetAllowedDomains(ctx context.Context, key string, domains []string) (*APIKey, error)

	// Ping reports whether the store can serve requests.
	Ping(ctx context.Context) error
}

// storeTime is the precision every store keeps.
func storeTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
