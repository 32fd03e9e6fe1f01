// Package embedmongo runs an embedded MongoDB-wire server (FerretDB on SQLite) inside the
// process: the persistent local run (COLLAB_DATA_DIR) and the MongoDB conformance tests use it,
// so neither needs a MongoDB installation.
//
// Clients reach FerretDB through a proxy (proxy.go) that never lets two writes of one document
// overlap: FerretDB alone applies concurrent updates of one document as read, change, write
// back, so they overwrite each other. Behind it the embedded server gives what the stores rely
// on from MongoDB: single-document atomicity of every write, findAndModify, unique indexes
// under concurrency (docs/deployment.md, "Embedded store"). It has no transactions; nothing
// uses them.
//
// The server has no authentication, so nothing but this process may reach it or its files: it
// listens on Unix sockets (the proxy's, which the URI names, and FerretDB's own behind it) in a
// fresh directory only its user can enter (0700), never on TCP, and the data directory and its
// files are made private to the user (0700, 0600). The master secret lives in that data
// (collab_system.secrets).
package embedmongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running embedded server.
type Server struct {
	uri     string
	dataDir string
	sockDir string
	proxy   *proxy
	cancel  context.CancelFunc
	done    chan struct{}
}

// newMu makes calls of ferretdb.New one at a time: it writes a package variable of FerretDB's
// (the version's package name), a data race when two servers start at once (two tests in
// parallel did, and the race detector failed the test command).
var newMu sync.Mutex

// Start runs FerretDB with its SQLite files in dir, behind the write lock's proxy, both on Unix
// sockets of their own. log receives FerretDB's own logging and the proxy's; pass a quiet one,
// FerretDB logs every wire message at debug level.
func Start(dir string, log *slog.Logger) (*Server, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	// An existing directory may have been made with wider permissions (by hand, or by an older
	// version): the data is ours alone.
	if err := os.Chmod(abs, 0o700); err != nil { //nolint:gosec // G302: a directory, which needs x; owner only
		return nil, fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	// The socket's path must stay short (about 100 bytes at most), so it lives in a new
	// directory under the temporary directory rather than in the data directory; MkdirTemp
	// makes it 0700.
	sockDir, err := os.MkdirTemp("", "collab-mongo-")
	if err != nil {
		return nil, fmt.Errorf("embedded mongo: socket dir: %w", err)
	}
	newMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: filepath.Join(sockDir, "ferretdb.sock")},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: abs + "/"}).String(),
		Logger:    log,
	})
	newMu.Unlock()
	if err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("embedded mongo: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{dataDir: abs, sockDir: sockDir, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = f.Run(ctx)
	}()
	// MongoDBURI blocks until the listener has its address.
	uriCh := make(chan string, 1)
	go func() { uriCh <- f.MongoDBURI() }()
	select {
	case <-uriCh:
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, errors.New("embedded mongo: listener did not start within 30s")
	}
	sock := filepath.Join(sockDir, "mongodb.sock")
	if s.proxy, err = listenProxy(sock, filepath.Join(sockDir, "ferretdb.sock"), log); err != nil {
		s.Stop()
		return nil, err
	}
	// As FerretDB writes its own: the socket's path as the host.
	s.uri = (&url.URL{Scheme: "mongodb", Host: sock, Path: "/"}).String()
	if err := s.Protect(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// URI is the mongodb:// URI of the server (its proxy's socket path, percent-encoded, as the
// host).
func (s *Server) URI() string { return s.uri }

// Protect makes every file in the data directory readable by its user only. SQLite creates a
// database file (one per MongoDB database) with the default mode, so the caller runs this again
// once the services have created theirs; the 0700 directory keeps them closed meanwhile.
func (s *Server) Protect() error {
	entries, err := os.ReadDir(s.dataDir)
	if err != nil {
		return fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(s.dataDir, e.Name()), 0o600); err != nil {
				return fmt.Errorf("embedded mongo: protect %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// Stop shuts the server down (the proxy first, so that no request reaches FerretDB while it
// stops), waits for it and removes its sockets.
func (s *Server) Stop() {
	if s.proxy != nil {
		s.proxy.close()
	}
	s.cancel()
	<-s.done
	_ = os.RemoveAll(s.sockDir)
}

// QuietLogger is a logger for FerretDB that keeps only its errors.
func QuietLogger(base *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{base.Handler(), slog.LevelError})
}

type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (h levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelFilter{h.Handler.WithAttrs(attrs), h.min}
}

func (h levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{h.Handler.WithGroup(name), h.min}
}
