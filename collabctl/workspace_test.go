package collabctl

import (
	"context"
	"strings"
	"testing"
)

// A workspace created with collabctl exists with its name and owner, and its token (printed
// once) works: collabctl reads it back with it, and so does a direct call.
func TestWorkspaceCreateAndGet(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := map[string]string{"COLLABCTL_URL": "http://" + p.HTTPAddr}
	res := run(ctx, env, "", "-o", "json", "workspace", "create", "--owner-email", "ops@example.com", "--name", "Olga", "--workspace-name", "Acme").ok(t).json(t)
	ws, _ := res["data"].(map[string]any)
	id, _ := ws["id"].(string)
	token, _ := ws["authToken"].(string)
	if id == "" || token == "" || ws["name"] != "Acme" {
		t.Fatalf("created %v", res)
	}
	code, got := post(t, p, "/v2/workspace/get", workspaceHeaders(id, token), map[string]any{})
	if code != 200 || got["result"].(map[string]any)["data"].(map[string]any)["owner"].(map[string]any)["email"] != "ops@example.com" {
		t.Fatalf("direct get: %d %v", code, got)
	}

	env["COLLABCTL_WORKSPACE_ID"], env["COLLABCTL_WORKSPACE_TOKEN"] = id, token
	table := run(ctx, env, "", "workspace", "get").ok(t)
	for _, want := range []string{id, "Acme", "Olga <ops@example.com>", "settings.advancedWebhooks:"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("workspace get table lacks %q:\n%s", want, table.stdout)
		}
	}
	if strings.Contains(table.stdout+table.stderr, token) {
		t.Error("workspace get printed the workspace token it was given")
	}

	// The same owner again: the API's refusal, from its envelope, exit 1.
	again := run(ctx, env, "", "workspace", "create", "--owner-email", "ops@example.com")
	if again.code != ExitFailed || !strings.Contains(again.stderr, "ALREADY_EXISTS (HTTP 409): A workspace already exists for this email.") {
		t.Fatalf("second create: %+v", again)
	}
	// No owner email: a usage error, nothing sent.
	if o := run(ctx, env, "", "workspace", "create"); o.code != ExitUsage || !strings.Contains(o.stderr, "--owner-email") {
		t.Fatalf("create without email: %+v", o)
	}
	// A wrong token: the API's UNAUTHENTICATED.
	env["COLLABCTL_WORKSPACE_TOKEN"] = "wrong-token"
	if o := run(ctx, env, "", "workspace", "get"); o.code != ExitFailed || !strings.Contains(o.stderr, "UNAUTHENTICATED (HTTP 401)") || strings.Contains(o.stderr, "wrong-token") {
		t.Fatalf("wrong token: %+v", o)
	}
}

// A key created with collabctl is in the workspace's list (read directly and with collabctl),
// and its auth token, printed once, authenticates key operations.
func TestKeysCreateAndList(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	created := run(ctx, env, "", "keys", "create", "--name", "ops key", "--type", "production", "--domain", "example.com", "-o", "json").ok(t).json(t)
	data, _ := created["data"].(map[string]any)
	key, _ := data["apiKey"].(string)
	token, _ := data["authToken"].(string)
	if key == "" || token == "" {
		t.Fatalf("created %v", created)
	}

	_, list := post(t, p, "/v2/workspace/apikeys/get", workspaceHeaders(p.Dev.WorkspaceID, p.Dev.WorkspaceToken), map[string]any{})
	found := false
	for _, k := range list["result"].(map[string]any)["data"].([]any) {
		k := k.(map[string]any)
		if k["id"] == key {
			found = k["apiKeyName"] == "ops key" && k["type"] == "production"
		}
	}
	if !found {
		t.Fatalf("key %s not listed as created: %v", key, list)
	}
	code, domains := post(t, p, "/v2/workspace/domains/get", keyHeaders(key, token), map[string]any{})
	if code != 200 || !strings.Contains(strings.Join(anyStrings(domains["result"].(map[string]any)["data"].(map[string]any)["allowedDomains"]), ","), "example.com") {
		t.Fatalf("the new key's token: %d %v", code, domains)
	}

	table := run(ctx, env, "", "keys", "list").ok(t)
	var row string
	for _, line := range strings.Split(table.stdout, "\n") {
		if strings.Contains(line, key) {
			row = line
		}
	}
	if !strings.Contains(row, "ops key") || !strings.Contains(row, "production") || !strings.Contains(table.stdout, p.Dev.APIKey) {
		t.Fatalf("keys list:\n%s", table.stdout)
	}
	if o := run(ctx, env, "", "keys", "list", "stray"); o.code != ExitUsage {
		t.Fatalf("stray argument: %+v", o)
	}
	// Without workspace credentials: a usage error naming the variables, nothing sent.
	delete(env, "COLLABCTL_WORKSPACE_TOKEN")
	if o := run(ctx, env, "", "keys", "list"); o.code != ExitUsage || !strings.Contains(o.stderr, "COLLABCTL_WORKSPACE_TOKEN") {
		t.Fatalf("no credentials: %+v", o)
	}
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// Settings toggled with collabctl are what the API reads back, and they take effect: with
// advancedWebhooks off, a webhooks operation is refused, and collabctl prints the refusal.
func TestWorkspaceSettingsToggle(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	settings := func() map[string]any {
		_, ws := post(t, p, "/v2/workspace/get", workspaceHeaders(p.Dev.WorkspaceID, p.Dev.WorkspaceToken), map[string]any{})
		return ws["result"].(map[string]any)["data"].(map[string]any)["settings"].(map[string]any)
	}
	if s := settings(); s["advancedWebhooks"] != true || s["notifications"] != true {
		t.Fatalf("initial settings %v", s)
	}
	out := run(ctx, env, "", "workspace", "settings", "--set", "advanced-webhooks=off", "--set", "notifications=false").ok(t)
	if s := settings(); s["advancedWebhooks"] != false || s["notifications"] != false || s["advancedQueries"] != true {
		t.Fatalf("after the toggle: %v", s)
	}
	if !strings.Contains(out.stdout, "advancedWebhooks:") {
		t.Errorf("settings table:\n%s", out.stdout)
	}
	refused := run(ctx, env, "", "call", "/v2/workspace/advancedwebhookconfig/get")
	if refused.code != ExitFailed || !strings.Contains(refused.stderr, "FAILED_PRECONDITION (HTTP 400): Advanced webhooks are not available for this workspace.") {
		t.Fatalf("webhooks with the switch off: %+v", refused)
	}
	run(ctx, env, "", "workspace", "settings", "--set", "advancedWebhooks=true").ok(t)
	if s := settings(); s["advancedWebhooks"] != true || s["notifications"] != false {
		t.Fatalf("after the second toggle: %v", s)
	}
	run(ctx, env, "", "call", "/v2/workspace/advancedwebhookconfig/get").ok(t)

	// The current settings, as JSON.
	shown := run(ctx, env, "", "workspace", "settings", "-o", "json").ok(t).json(t)
	if shown["advancedWebhooks"] != true || shown["notifications"] != false {
		t.Fatalf("settings shown %v", shown)
	}
	for _, bad := range [][]string{{"--set", "colour=blue"}, {"--set", "notifications=maybe"}, {"--set", "notifications"}} {
		if o := run(ctx, env, "", append([]string{"workspace", "settings"}, bad...)...); o.code != ExitUsage {
			t.Errorf("%v: %+v", bad, o)
		}
	}
	// A value the API refuses: its message.
	if o := run(ctx, env, "", "workspace", "settings", "--set", "slackWebhookUrl=not a url"); o.code != ExitFailed || !strings.Contains(o.stderr, "INVALID_ARGUMENT") {
		t.Fatalf("bad slack URL: %+v", o)
	}
}

// tokens reset replaces the key's auth tokens: the old one stops working, the printed one works;
// tokens list shows the new one masked.
func TestTokensResetAndList(t *testing.T) {
	p := startProcess(t)
	ctx := context.Background()
	env := devEnv(p)
	reset := run(ctx, env, "", "-o", "json", "tokens", "reset", p.Dev.APIKey).ok(t).json(t)
	newToken, _ := reset["data"].(map[string]any)["newAuthToken"].(map[string]any)["token"].(string)
	if newToken == "" || newToken == p.Dev.AuthToken {
		t.Fatalf("reset %v", reset)
	}
	if code, _ := post(t, p, "/v2/workspace/domains/get", keyHeaders(p.Dev.APIKey, p.Dev.AuthToken), map[string]any{}); code == 200 {
		t.Fatal("the old auth token still works")
	}
	if code, body := post(t, p, "/v2/workspace/domains/get", keyHeaders(p.Dev.APIKey, newToken), map[string]any{}); code != 200 {
		t.Fatalf("the new auth token: %d %v", code, body)
	}
	list := run(ctx, env, "", "tokens", "list", p.Dev.APIKey).ok(t)
	lines := strings.Split(strings.TrimSpace(list.stdout), "\n")
	if len(lines) != 2 || strings.Contains(list.stdout, newToken) || !strings.Contains(lines[1], newToken[len(newToken)-4:]) {
		t.Fatalf("tokens list (want one masked token ending %s):\n%s", newToken[len(newToken)-4:], list.stdout)
	}
	if o := run(ctx, env, "", "tokens", "reset"); o.code != ExitUsage || !strings.Contains(o.stderr, "API_KEY") {
		t.Fatalf("reset without a key: %+v", o)
	}
	if o := run(ctx, env, "", "tokens", "reset", "no-such-key"); o.code != ExitFailed {
		t.Fatalf("reset of an unknown key: %+v", o)
	}
}
