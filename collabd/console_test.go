package collabd

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestConsoleIsServedWithTheGateway: the process with the gateway serves the console beside the
// API, and its sign-in page gets the development workspace's credentials only when they are the
// published ones (docs/console.md).
func TestConsoleIsServedWithTheGateway(t *testing.T) {
	devOf := func(p *Process) map[string]any {
		t.Helper()
		resp, err := http.Get(p.HTTPURL() + "/console/config.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var cfg map[string]map[string]any
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") == "" {
			t.Fatalf("config.json: %d %v", resp.StatusCode, resp.Header)
		}
		if err := json.NewDecoder(resp.Body).Decode(&cfg); err != nil {
			t.Fatal(err)
		}
		return cfg["devWorkspace"]
	}
	p := startProcess(t)
	for _, page := range []string{"/console/", "/console/playground"} {
		resp, err := http.Get(p.HTTPURL() + page)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s: %d %s", page, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if dev := devOf(p); dev["apiKey"] != p.Dev.APIKey || dev["authToken"] != "dev-auth-token" || dev["workspaceAuthToken"] != p.Dev.WorkspaceToken {
		t.Errorf("published credentials: %v", dev)
	}
	chosen := startProcess(t, "--dev-workspace-token=an-own-secret-workspace-token-0123456789", "--dev-auth-token=an-own-secret-auth-token-0123456789")
	if dev := devOf(chosen); dev != nil {
		t.Errorf("chosen tokens served to the console: %v", dev)
	}
	// One token of the operator's own beside a published one: the published one alone would
	// sign in to the workspace's settings (W) or to every other operation (K), and the chosen
	// one is a secret, so neither is served.
	for _, own := range []string{"--dev-auth-token=an-own-secret-auth-token-0123456789", "--dev-workspace-token=an-own-secret-workspace-token-0123456789"} {
		if dev := devOf(startProcess(t, own)); dev != nil {
			t.Errorf("with %s: %v served to the console", own, dev)
		}
	}
	if off := startProcess(t, "--dev-workspace=false"); devOf(off) != nil {
		t.Error("credentials served without a development workspace")
	}
}
