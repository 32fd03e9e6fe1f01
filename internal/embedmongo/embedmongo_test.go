package embedmongo

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/collab/collab/internal/mongodb"
)

// The embedded server answers on a private Unix socket only, and its data is its user's alone.
func TestServerIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil { // as a careless operator would leave it
		t.Fatal(err)
	}
	srv, err := Start(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	host, ok := strings.CutPrefix(strings.TrimSuffix(srv.URI(), "/"), "mongodb://")
	if !ok {
		t.Fatalf("URI %q", srv.URI())
	}
	sock, err := url.PathUnescape(host)
	if err != nil || !strings.HasPrefix(sock, "/") || !strings.HasSuffix(sock, ".sock") {
		t.Fatalf("URI %q does not name a Unix socket", srv.URI())
	}
	fi, err := os.Stat(filepath.Dir(sock))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}

	ctx := context.Background()
	conn, err := mongodb.Connect(ctx, srv.URI())
	if err != nil {
		t.Fatalf("connect over the socket: %v", err)
	}
	if _, err := conn.Database("x").Collection("c").InsertOne(ctx, bson.M{"_id": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.MasterSecret(ctx); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := srv.Protect(); err != nil {
		t.Fatal(err)
	}

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	files := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		files++
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	if files == 0 {
		t.Fatal("no data files written")
	}

	srv.Stop()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("socket directory left behind: %v", err)
	}
}

// Servers start in parallel (the e2e tests start several at once): under the race detector,
// this fails when ferretdb.New's write of its package variable is not serialised.
func TestServersStartInParallel(t *testing.T) {
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			srv, err := Start(t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Error(err)
				return
			}
			srv.Stop()
		})
	}
	wg.Wait()
}
