// Package embedmongo runs an embedded MongoDB-wire server (FerretDB on SQLite) inside the
// process: the persistent local run (COLLAB_DATA_DIR) and the MongoDB conformance tests use it,
// so neither needs a MongoDB installation.
package embedmongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a running embedded server.
type Server struct {
	uri    string
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs FerretDB with its SQLite files in dir, listening on a random loopback port. log
// receives FerretDB's own logging; pass a quiet one, it logs every wire message at debug level.
func Start(dir string, log *slog.Logger) (*Server, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("embedded mongo: data dir: %w", err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: abs + "/"}).String(),
		Logger:    log,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded mongo: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = f.Run(ctx)
	}()
	// MongoDBURI blocks until the listener has its address.
	uriCh := make(chan string, 1)
	go func() { uriCh <- f.MongoDBURI() }()
	select {
	case s.uri = <-uriCh:
	case <-time.After(30 * time.Second):
		cancel()
		return nil, errors.New("embedded mongo: listener did not start within 30s")
	}
	return s, nil
}

// URI is the mongodb:// URI of the server.
func (s *Server) URI() string { return s.uri }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.cancel()
	<-s.done
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
