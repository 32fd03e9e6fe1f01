// Package mongotest gives tests a real MongoDB-wire server: the server named by
// COLLAB_TEST_MONGO_URI, or an embedded FerretDB started once per test binary. Each caller gets
// its own database prefix, so tests never see each other's data.
package mongotest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/mongodb"
)

// EnvURI names an external server to test against instead of the embedded one.
const EnvURI = "COLLAB_TEST_MONGO_URI"

var (
	once    sync.Once
	server  *embedmongo.Server
	dir     string
	uri     string
	initErr error
	counter atomic.Int64
)

// Run is for TestMain: it runs the tests, then stops the embedded server and removes its files.
func Run(m *testing.M) int {
	code := m.Run()
	if server != nil {
		server.Stop()
		_ = os.RemoveAll(dir)
	}
	return code
}

func start() {
	if u := os.Getenv(EnvURI); u != "" {
		uri = u
		return
	}
	dir, initErr = os.MkdirTemp("", "collab-ferretdb-")
	if initErr != nil {
		return
	}
	server, initErr = embedmongo.Start(dir, embedmongo.QuietLogger(slog.Default()))
	if initErr == nil {
		uri = server.URI()
	}
}

// Connect returns a connection whose database prefix is unique to this call; its databases
// are dropped when the test ends.
func Connect(t testing.TB) *mongodb.Conn {
	t.Helper()
	once.Do(start)
	if initErr != nil {
		t.Fatalf("mongotest: %v", initErr)
	}
	conn, err := mongodb.Connect(context.Background(), uri)
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	conn.Prefix = fmt.Sprintf("t%d_%d", os.Getpid(), counter.Add(1))
	t.Cleanup(func() {
		ctx := context.Background()
		names, err := conn.Client.ListDatabaseNames(ctx, map[string]any{})
		if err == nil {
			for _, n := range names {
				if len(n) > len(conn.Prefix) && n[:len(conn.Prefix)+1] == conn.Prefix+"_" {
					_ = conn.Client.Database(n).Drop(ctx)
				}
			}
		}
		_ = conn.Close(ctx)
	})
	return conn
}
