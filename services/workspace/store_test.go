package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store {
		s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("workspace"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

func sampleWorkspace(n int) (*Workspace, *APIKey) {
	ws := &Workspace{
		ID: fmt.Sprintf("ws%d", n), Name: "W", OwnerID: "o", OwnerEmail: fmt.Sprintf("owner%d@example.com", n),
		TokenHash: "h", TokenLast4: "abcd", Settings: Settings{AdvancedQueries: true}, CreatedAt: t0,
		VerifyTokenHash: "vh",
	}
	key := &APIKey{Key: fmt.Sprintf("key%d", n), WorkspaceID: ws.ID, Name: "k", Type: KeyTypeTesting,
		AllowedDomains: []string{"example.com"}, Tokens: []AuthToken{{Hash: "th", Last4: "wxyz", Name: "default", CreatedAt: t0}}, CreatedAt: t0,
		TokenGeneration: int64(40 + n)}
	return ws, key
}

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("create and read a workspace", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		if err := s.CreateWorkspace(ctx, ws, key); err != nil {
			t.Fatal(err)
		}
		got, err := s.Workspace(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		if *got != *ws {
			t.Fatalf("read %+v, stored %+v", got, ws)
		}
		byEmail, err := s.WorkspaceByOwnerEmail(ctx, ws.OwnerEmail)
		if err != nil || byEmail.ID != ws.ID {
			t.Fatalf("by email: %v %v", byEmail, err)
		}
		k, err := s.APIKey(ctx, key.Key)
		if err != nil {
			t.Fatal(err)
		}
		if k.WorkspaceID != ws.ID || !k.CreatedAt.Equal(t0) || len(k.Tokens) != 1 || k.Tokens[0] != key.Tokens[0] || !slices.Equal(k.AllowedDomains, key.AllowedDomains) || k.TokenGeneration != key.TokenGeneration {
			t.Fatalf("key read back as %+v", k)
		}
	})

	t.Run("missing records are ErrNotFound", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		if _, err := s.Workspace(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Workspace: %v", err)
		}
		if _, err := s.WorkspaceByOwnerEmail(ctx, "nope@example.com"); !errors.Is(err, ErrNotFound) {
			t.Errorf("WorkspaceByOwnerEmail: %v", err)
		}
		if _, err := s.APIKey(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("APIKey: %v", err)
		}
		if _, err := s.UpdateSettings(ctx, "nope", SettingsPatch{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("UpdateSettings: %v", err)
		}
		if err := s.ActivateKeys(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ActivateKeys: %v", err)
		}
		if err := s.SetWorkspaceToken(ctx, "nope", "h", "l"); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetWorkspaceToken: %v", err)
		}
		if _, err := s.SetAllowedDomains(ctx, "nope", nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetAllowedDomains: %v", err)
		}
	})

	t.Run("owner email is unique and a refused create leaves nothing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		if err := s.CreateWorkspace(ctx, ws, key); err != nil {
			t.Fatal(err)
		}
		ws2, key2 := sampleWorkspace(2)
		ws2.OwnerEmail = ws.OwnerEmail
		if err := s.CreateWorkspace(ctx, ws2, key2); !errors.Is(err, ErrOwnerEmailTaken) {
			t.Fatalf("second workspace for the email: %v", err)
		}
		if _, err := s.Workspace(ctx, ws2.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("refused workspace stored: %v", err)
		}
		if _, err := s.APIKey(ctx, key2.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("key of refused workspace stored: %v", err)
		}
	})

	t.Run("workspace id and key are unique", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		if err := s.CreateWorkspace(ctx, ws, key); err != nil {
			t.Fatal(err)
		}
		ws2, key2 := sampleWorkspace(2)
		ws2.ID = ws.ID
		if err := s.CreateWorkspace(ctx, ws2, key2); !errors.Is(err, ErrWorkspaceExists) {
			t.Fatalf("same id: %v", err)
		}
		if _, err := s.APIKey(ctx, key2.Key); !errors.Is(err, ErrNotFound) {
			t.Errorf("key of refused workspace stored: %v", err)
		}
		ws3, _ := sampleWorkspace(3)
		if err := s.CreateWorkspace(ctx, ws3, key); !errors.Is(err, ErrKeyExists) {
			t.Fatalf("same key: %v", err)
		}
		if _, err := s.Workspace(ctx, ws3.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("workspace with a duplicate key stored: %v", err)
		}
		if err := s.CreateAPIKey(ctx, key, 0); !errors.Is(err, ErrKeyExists) {
			t.Fatalf("CreateAPIKey duplicate: %v", err)
		}
	})

	t.Run("settings patch changes only what is set", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		on, off := true, false
		got, err := s.UpdateSettings(ctx, ws.ID, SettingsPatch{Notifications: &on, AdvancedQueries: &off})
		if err != nil {
			t.Fatal(err)
		}
		want := Settings{AdvancedQueries: false, Notifications: true, AdvancedWebhooks: false}
		if got.Settings != want {
			t.Fatalf("after patch %+v, want %+v", got.Settings, want)
		}
		got, err = s.UpdateSettings(ctx, ws.ID, SettingsPatch{AdvancedWebhooks: &on})
		if err != nil {
			t.Fatal(err)
		}
		want.AdvancedWebhooks = true
		if got.Settings != want {
			t.Fatalf("after second patch %+v, want %+v", got.Settings, want)
		}
		read, _ := s.Workspace(ctx, ws.ID)
		if read.Settings != want {
			t.Fatalf("read back %+v", read.Settings)
		}
	})

	t.Run("the slack webhook url is set, kept by other patches, and removed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		if read, _ := s.Workspace(ctx, ws.ID); read.SlackWebhookURL != "" {
			t.Fatalf("new workspace has a webhook: %q", read.SlackWebhookURL)
		}
		url, on := "https://hooks.slack.com/services/T000/B000/XXXXabcd", true
		got, err := s.UpdateSettings(ctx, ws.ID, SettingsPatch{SlackWebhookURL: &url, Notifications: &on})
		if err != nil {
			t.Fatal(err)
		}
		if got.SlackWebhookURL != url || !got.Settings.Notifications || !got.Settings.AdvancedQueries {
			t.Fatalf("after setting the url: %+v", got)
		}
		off := false
		got, err = s.UpdateSettings(ctx, ws.ID, SettingsPatch{AdvancedQueries: &off})
		if err != nil || got.SlackWebhookURL != url {
			t.Fatalf("a patch without the url changed it: %+v %v", got, err)
		}
		if read, _ := s.Workspace(ctx, ws.ID); read.SlackWebhookURL != url || read.Settings.AdvancedQueries {
			t.Fatalf("read back %+v", read)
		}
		other, otherKey := sampleWorkspace(2)
		_ = s.CreateWorkspace(ctx, other, otherKey)
		if read, _ := s.Workspace(ctx, other.ID); read.SlackWebhookURL != "" {
			t.Fatalf("another workspace got the url: %q", read.SlackWebhookURL)
		}
		empty := ""
		got, err = s.UpdateSettings(ctx, ws.ID, SettingsPatch{SlackWebhookURL: &empty})
		if err != nil || got.SlackWebhookURL != "" {
			t.Fatalf("removing: %+v %v", got, err)
		}
		if read, _ := s.Workspace(ctx, ws.ID); read.SlackWebhookURL != "" || read.Settings.AdvancedQueries || !read.Settings.Notifications {
			t.Fatalf("read back after removing: %+v", read)
		}
	})

	t.Run("verification token is single use and must match", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		if _, err := s.VerifyEmail(ctx, ws.ID, "wrong", true); !errors.Is(err, ErrNotFound) {
			t.Fatalf("wrong token: %v", err)
		}
		if _, err := s.VerifyEmail(ctx, ws.ID, "", true); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty token: %v", err)
		}
		got, err := s.VerifyEmail(ctx, ws.ID, "vh", false)
		if err != nil {
			t.Fatal(err)
		}
		if !got.EmailVerified || got.KeysActive || got.VerifyTokenHash != "" {
			t.Fatalf("after verify: %+v", got)
		}
		if _, err := s.VerifyEmail(ctx, ws.ID, "vh", false); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second use: %v", err)
		}
		if err := s.ActivateKeys(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		read, _ := s.Workspace(ctx, ws.ID)
		if !read.KeysActive || !read.EmailVerified {
			t.Fatalf("after activate: %+v", read)
		}
	})

	t.Run("verify can activate keys", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		got, err := s.VerifyEmail(ctx, ws.ID, "vh", true)
		if err != nil || !got.KeysActive {
			t.Fatalf("verify with activation: %+v %v", got, err)
		}
	})

	t.Run("workspace token is replaced", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		if err := s.SetWorkspaceToken(ctx, ws.ID, "h2", "9999"); err != nil {
			t.Fatal(err)
		}
		read, _ := s.Workspace(ctx, ws.ID)
		if read.TokenHash != "h2" || read.TokenLast4 != "9999" {
			t.Fatalf("token not replaced: %+v", read)
		}
	})

	t.Run("keys are scoped to their workspace", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		wsA, keyA := sampleWorkspace(1)
		wsB, keyB := sampleWorkspace(2)
		_ = s.CreateWorkspace(ctx, wsA, keyA)
		_ = s.CreateWorkspace(ctx, wsB, keyB)
		if _, err := s.WorkspaceAPIKey(ctx, wsA.ID, keyB.Key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("A read B's key: %v", err)
		}
		if k, err := s.WorkspaceAPIKey(ctx, wsA.ID, keyA.Key); err != nil || k.Key != keyA.Key {
			t.Fatalf("A's own key: %v %v", k, err)
		}
		if _, err := s.SetAuthTokens(ctx, wsA.ID, keyB.Key, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("A changed B's tokens: %v", err)
		}
		k, _ := s.APIKey(ctx, keyB.Key)
		if len(k.Tokens) != 1 || k.TokenGeneration != keyB.TokenGeneration {
			t.Fatalf("B's tokens changed: %+v, generation %d", k.Tokens, k.TokenGeneration)
		}
		list, err := s.ListAPIKeys(ctx, wsA.ID, nil, 10)
		if err != nil || len(list) != 1 || list[0].Key != keyA.Key {
			t.Fatalf("A's list: %v %v", list, err)
		}
	})

	t.Run("tokens and domains are replaced", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		newTokens := []AuthToken{{Hash: "n1", Last4: "1111", Name: "default", CreatedAt: t0.Add(time.Hour)}}
		got, err := s.SetAuthTokens(ctx, ws.ID, key.Key, newTokens)
		if err != nil || len(got.Tokens) != 1 || got.Tokens[0] != newTokens[0] {
			t.Fatalf("SetAuthTokens: %+v %v", got, err)
		}
		got, err = s.SetAuthTokens(ctx, ws.ID, key.Key, nil)
		if err != nil || len(got.Tokens) != 0 {
			t.Fatalf("clearing tokens: %+v %v", got, err)
		}
		got, err = s.SetAllowedDomains(ctx, key.Key, []string{"a.com", "b.com"})
		if err != nil || !slices.Equal(got.AllowedDomains, []string{"a.com", "b.com"}) {
			t.Fatalf("SetAllowedDomains: %+v %v", got, err)
		}
		read, _ := s.APIKey(ctx, key.Key)
		if !slices.Equal(read.AllowedDomains, []string{"a.com", "b.com"}) {
			t.Fatalf("read back %v", read.AllowedDomains)
		}
		got, err = s.SetAllowedDomains(ctx, key.Key, nil)
		if err != nil || len(got.AllowedDomains) != 0 {
			t.Fatalf("clearing domains: %+v %v", got, err)
		}
	})

	t.Run("replacing the tokens moves the generation on, and nothing else does", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, key := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, key)
		gen := key.TokenGeneration
		for i := range 3 {
			got, err := s.SetAuthTokens(ctx, ws.ID, key.Key, []AuthToken{{Hash: fmt.Sprint("h", i), Name: "default", CreatedAt: t0}})
			if err != nil {
				t.Fatal(err)
			}
			gen++
			if got.TokenGeneration != gen {
				t.Fatalf("reset %d: generation %d, want %d", i, got.TokenGeneration, gen)
			}
		}
		if _, err := s.SetAllowedDomains(ctx, key.Key, []string{"a.com"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateSettings(ctx, ws.ID, SettingsPatch{}); err != nil {
			t.Fatal(err)
		}
		read, err := s.APIKey(ctx, key.Key)
		if err != nil || read.TokenGeneration != gen {
			t.Fatalf("read back generation %d, want %d (%v)", read.TokenGeneration, gen, err)
		}
		// A key created without one starts at 0 and counts from there.
		fresh := &APIKey{Key: "fresh", WorkspaceID: ws.ID, Type: KeyTypeTesting, CreatedAt: t0}
		if err := s.CreateAPIKey(ctx, fresh, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := s.SetAuthTokens(ctx, ws.ID, "fresh", nil); err != nil || got.TokenGeneration != 1 {
			t.Fatalf("first reset of a fresh key: %+v %v", got, err)
		}
	})

	t.Run("listing pages in creation order and holds under inserts", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, first := sampleWorkspace(1)
		_ = s.CreateWorkspace(ctx, ws, first)
		// Two keys share a timestamp, so the key breaks the tie.
		for i, spec := range []struct {
			key string
			at  time.Duration
		}{{"k-b", time.Second}, {"k-a", time.Second}, {"k-c", 2 * time.Second}, {"k-d", 3 * time.Second}} {
			k := &APIKey{Key: spec.key, WorkspaceID: ws.ID, Type: KeyTypeTesting, CreatedAt: t0.Add(spec.at)}
			if err := s.CreateAPIKey(ctx, k, 0); err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		if n, err := s.CountAPIKeys(ctx, ws.ID); err != nil || n != 5 {
			t.Fatalf("CountAPIKeys = %d, %v", n, err)
		}
		page1, err := s.ListAPIKeys(ctx, ws.ID, nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(page1); !slices.Equal(got, []string{first.Key, "k-a"}) {
			t.Fatalf("page 1 = %v", got)
		}
		last := page1[len(page1)-1]
		// A key created between pages lands after everything listed so far.
		_ = s.CreateAPIKey(ctx, &APIKey{Key: "k-0", WorkspaceID: ws.ID, CreatedAt: t0.Add(time.Hour)}, 0)
		page2, err := s.ListAPIKeys(ctx, ws.ID, &KeyPosition{last.CreatedAt, last.Key}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(page2); !slices.Equal(got, []string{"k-b", "k-c", "k-d", "k-0"}) {
			t.Fatalf("page 2 = %v", got)
		}
		empty, err := s.ListAPIKeys(ctx, "other", nil, 10)
		if err != nil || len(empty) != 0 {
			t.Fatalf("other workspace's list: %v %v", empty, err)
		}
	})

	// The limit is checked in the same atomic write that counts the key, so concurrent creations
	// never pass it, on MongoDB without transactions as in memory.
	t.Run("the key limit holds under concurrent creations", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ws, first := sampleWorkspace(1)
		if err := s.CreateWorkspace(ctx, ws, first); err != nil { // its first key counts
			t.Fatal(err)
		}
		const limit, tries = 10, 40
		var made, refused atomic.Int32
		var wg sync.WaitGroup
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.CreateAPIKey(ctx, &APIKey{Key: fmt.Sprintf("race-%d", i), WorkspaceID: ws.ID, Type: KeyTypeTesting, CreatedAt: t0}, limit)
				switch {
				case err == nil:
					made.Add(1)
				case errors.Is(err, ErrKeyLimit):
					refused.Add(1)
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n, err := s.CountAPIKeys(ctx, ws.ID); err != nil || n != limit || made.Load() != limit-1 || refused.Load() != tries-limit+1 {
			t.Fatalf("%d keys (%v), %d made, %d refused; want %d keys", n, err, made.Load(), refused.Load(), limit)
		}
		// A key refused as a duplicate gives its place back.
		if err := s.CreateAPIKey(ctx, &APIKey{Key: first.Key, WorkspaceID: ws.ID, CreatedAt: t0}, limit+1); !errors.Is(err, ErrKeyExists) {
			t.Fatalf("duplicate: %v", err)
		}
		if err := s.CreateAPIKey(ctx, &APIKey{Key: "last", WorkspaceID: ws.ID, CreatedAt: t0}, limit+1); err != nil {
			t.Fatalf("the place a duplicate took was not given back: %v", err)
		}
		// Keys made without a limit (the development key) count too.
		if err := s.CreateAPIKey(ctx, &APIKey{Key: "unlimited", WorkspaceID: ws.ID, CreatedAt: t0}, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateAPIKey(ctx, &APIKey{Key: "over", WorkspaceID: ws.ID, CreatedAt: t0}, limit+2); !errors.Is(err, ErrKeyLimit) {
			t.Fatalf("a key made without a limit was not counted: %v", err)
		}
		if err := s.CreateAPIKey(ctx, &APIKey{Key: "nowhere", WorkspaceID: "no-such", CreatedAt: t0}, limit); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing workspace: %v", err)
		}
	})

	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		if err := newStore(t).Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})

	runConcurrencySuite(t, newStore)
}

func keysOf(keys []*APIKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Key
	}
	return out
}
