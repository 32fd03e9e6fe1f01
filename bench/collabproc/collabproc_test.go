package collabproc

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// A started server answers with the banner's credentials, makes a document and a sync token,
// shows its figures in /proc, and is gone after Stop.
func TestServer(t *testing.T) {
	s, err := Start(t.Context(), "--rate-limit=off", "--log-level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	if s.APIKey != "dev-api-key" || s.AuthToken != "dev-auth-token" || s.WorkspaceID != "dev-workspace" || s.GRPCAddr == "" {
		t.Errorf("banner read as key %q, token %q, workspace %q, gRPC %q", s.APIKey, s.AuthToken, s.WorkspaceID, s.GRPCAddr)
	}
	if err := s.CreateDocument(t.Context(), "o", "d"); err != nil {
		t.Fatal(err)
	}
	tok, err := s.SyncToken(t.Context(), "u", "o", "d", RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if u := s.SyncURL("o", "d", "e/1", tok); !strings.HasPrefix(u, "ws://127.0.0.1:") || !strings.Contains(u, "/v2/crdt/sync/o/d/e%2F1?token=") {
		t.Errorf("sync URL %s", u)
	}

	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS < 1<<20 || st.PeakRSS < st.RSS || st.CPU <= 0 {
		t.Errorf("figures %+v: want an RSS of at least 1 MiB, a peak at least that, some CPU", st)
	}
	if err := s.ResetPeak(); err != nil {
		t.Fatal(err)
	}

	w, _ := s.Watch(t.Context(), 64<<30)
	time.Sleep(3 * WatchEvery)
	if rep := w.Stop(); rep.Err != nil || rep.MaxRSS == 0 {
		t.Errorf("watchdog report %+v: want samples and no trip", rep)
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	default:
		t.Fatal("the process is still running after Stop")
	}
	if _, err := s.Stats(); err == nil {
		t.Error("figures of a stopped process")
	}
}

// A watchdog whose limit the server is over kills it and says so.
func TestWatchdogKills(t *testing.T) {
	s, err := Start(t.Context(), "--log-level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	w, ctx := s.Watch(t.Context(), 1<<20)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not trip within 5 s")
	}
	<-s.Exited()
	if !errors.Is(context.Cause(ctx), ErrOverLimit) {
		t.Errorf("the context ended with %v, want ErrOverLimit", context.Cause(ctx))
	}
	if rep := w.Stop(); !errors.Is(rep.Err, ErrOverLimit) || rep.PeakRSS < 1<<20 {
		t.Errorf("watchdog report %+v: want a trip past 1 MiB", rep)
	}
}

func TestWithoutRace(t *testing.T) {
	if got := withoutRace("-race -mod=mod --race -race=true -tags=x"); got != "-mod=mod -tags=x" {
		t.Errorf("withoutRace: %q", got)
	}
}

// AddDocuments makes more documents than one call takes, and a member's token opens them.
func TestAddDocumentsMemberToken(t *testing.T) {
	s, err := Start(t.Context(), "--rate-limit=off", "--log-level=warn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Kill() })
	docs := make([]string, addDocumentsBatch+3)
	for i := range docs {
		docs[i] = "d" + strconv.Itoa(i)
	}
	if err := s.AddDocuments(t.Context(), "o", docs); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDocuments(t.Context(), "o", docs[len(docs)-1:]); err == nil {
		t.Error("adding an existing document again: no error")
	}
	tok, err := s.MemberToken(t.Context(), "u", "o", RoleEditor)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result struct {
			Data map[string]struct {
				Documents map[string]struct {
					AccessRole string `json:"accessRole"`
				} `json:"documents"`
			} `json:"data"`
		} `json:"result"`
	}
	err = s.Call(t.Context(), "/v2/auth/permissions/get", map[string]any{
		"organizationId": "o", "userIds": []string{"u"}, "documentIds": []string{docs[0], docs[len(docs)-1]}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{docs[0], docs[len(docs)-1]} {
		if role := out.Result.Data["u"].Documents[d].AccessRole; role != RoleEditor {
			t.Errorf("the member's role on %s is %q, want editor (answer %+v)", d, role, out.Result.Data)
		}
	}
	if tok == "" {
		t.Error("no token")
	}
}
