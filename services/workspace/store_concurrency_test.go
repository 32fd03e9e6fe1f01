package workspace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/racetest"
	"github.com/collab/collab/internal/service"
)

// runConcurrencySuite is the part of the conformance suite that proves MongoDB's
// single-document atomicity, which every write here relies on: concurrent updates of one
// record, each to fields of its own, all land (issue 20, finding 1; the embedded server lost
// them).
func runConcurrencySuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("concurrent updates of one workspace's fields all land", func(t *testing.T) {
		t.Parallel()
		s, ok := newStore(t), errorsTo(t)
		const url = "https://hooks.slack.com/services/T000/B000/XXXXabcd"
		on, off, hook := true, false, url
		for round := range 10 {
			ws, key := sampleWorkspace(round)
			if err := s.CreateWorkspace(ctx, ws, key); err != nil {
				t.Fatal(err)
			}
			racetest.Together(
				func() { ok(s.UpdateSettings(ctx, ws.ID, SettingsPatch{AdvancedQueries: &off})) },
				func() { ok(s.UpdateSettings(ctx, ws.ID, SettingsPatch{SlackWebhookURL: &hook})) },
				func() { ok(s.UpdateSettings(ctx, ws.ID, SettingsPatch{Notifications: &on})) },
				func() { ok(nil, s.SetWorkspaceToken(ctx, ws.ID, "h2", "9999")) },
				func() { ok(nil, s.ActivateKeys(ctx, ws.ID)) },
			)
			got, err := s.Workspace(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Settings.AdvancedQueries || !got.Settings.Notifications || got.SlackWebhookURL != url ||
				got.TokenHash != "h2" || got.TokenLast4 != "9999" || !got.KeysActive {
				t.Fatalf("round %d: an acknowledged update was lost: %+v", round, got)
			}
		}
	})

	t.Run("concurrent updates of one key's tokens and domains all land", func(t *testing.T) {
		t.Parallel()
		s, ok := newStore(t), errorsTo(t)
		ws, key := sampleWorkspace(1)
		if err := s.CreateWorkspace(ctx, ws, key); err != nil {
			t.Fatal(err)
		}
		gen := key.TokenGeneration
		for round := range 10 {
			tokens := []AuthToken{{Hash: fmt.Sprint("h", round), Last4: "1234", Name: "default", CreatedAt: t0}}
			domains := []string{fmt.Sprintf("r%d.example.com", round)}
			racetest.Together(
				func() { ok(s.SetAuthTokens(ctx, ws.ID, key.Key, tokens)) },
				func() { ok(s.SetAllowedDomains(ctx, key.Key, domains)) },
			)
			gen++
			got, err := s.APIKey(ctx, key.Key)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Tokens) != 1 || got.Tokens[0] != tokens[0] || got.TokenGeneration != gen || !slices.Equal(got.AllowedDomains, domains) {
				t.Fatalf("round %d: an acknowledged update was lost: %+v (want generation %d)", round, got, gen)
			}
		}
	})

	// The response to a leaked token (Reset Auth Token) holds while its holder keeps calling
	// Update Allowed Domains: afterwards the old token is refused, the new one works, and the
	// generation moved on, so a JWT made before the reset no longer opens live sync. 100 rounds,
	// on four keys side by side.
	t.Run("a token reset racing domain updates with the old token holds", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		srv, _ := newTestServer(t, s)
		dev := service.DevCredentials{WorkspaceID: "w", WorkspaceToken: "wt-token", APIKey: "k", AuthToken: "t-token", OwnerEmail: "dev@localhost"}
		if err := srv.EnsureDevWorkspace(ctx, dev); err != nil {
			t.Fatal(err)
		}
		owner := authn.WithCaller(ctx, authn.Caller{WorkspaceID: "w"})
		reset := func(key string) string {
			resp, err := srv.ResetAuthToken(owner, &workspacev1.ResetAuthTokenRequest{ApiKey: key})
			if err != nil {
				t.Error(err)
				return ""
			}
			return resp.GetData().GetNewAuthToken().GetToken()
		}
		const keys, rounds = 4, 25
		racetest.N(keys, func(k int) {
			key := fmt.Sprint("race-key-", k)
			if err := s.CreateAPIKey(ctx, &APIKey{Key: key, WorkspaceID: "w", Type: KeyTypeTesting, CreatedAt: t0}, 0); err != nil {
				t.Error(err)
				return
			}
			old := reset(key)
			current, err := srv.AuthenticateKey(ctx, key, old)
			if err != nil {
				t.Errorf("key %d: %v", k, err)
				return
			}
			for round := range rounds {
				// The holder of the old token calls with a caller authenticated by it (as the
				// gateway's authentication cache keeps it), while the owner resets the token.
				var fresh string
				update := func(i int) func() {
					return func() {
						domains := []string{fmt.Sprintf("d%d.example.com", i)}
						if _, err := srv.UpdateAllowedDomains(authn.WithCaller(ctx, current), &workspacev1.UpdateAllowedDomainsRequest{AllowedDomains: domains}); err != nil {
							t.Error(err)
						}
					}
				}
				racetest.Together(func() { fresh = reset(key) }, update(0), update(1), update(2))
				if fresh == "" {
					return
				}
				if _, err := srv.AuthenticateKey(ctx, key, old); !errors.Is(err, errAuthTokenFound) {
					t.Errorf("key %d round %d: the old token still authenticates after the reset (%v)", k, round, err)
					return
				}
				after, err := srv.AuthenticateKey(ctx, key, fresh)
				if err != nil {
					t.Errorf("key %d round %d: the new token is refused: %v", k, round, err)
					return
				}
				if after.TokenGeneration != current.TokenGeneration+1 {
					t.Errorf("key %d round %d: generation %d -> %d, want %d", k, round, current.TokenGeneration, after.TokenGeneration, current.TokenGeneration+1)
					return
				}
				old, current = fresh, after
			}
			// What the verifier of generated tokens is told: a JWT of any earlier generation
			// no longer opens live sync.
			gen, err := srv.GetTokenGeneration(ctx, &workspacev1.GetTokenGenerationRequest{ApiKey: key})
			if err != nil || gen.GetTokenGeneration() != current.TokenGeneration {
				t.Errorf("key %d: the verifier is told generation %d (%v), want %d", k, gen.GetTokenGeneration(), err, current.TokenGeneration)
			}
		})
	})
}

// errorsTo returns a function that fails t (from any goroutine) when the call whose results
// it is given failed.
func errorsTo(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		if err != nil {
			t.Error(err)
		}
	}
}
