package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/collab/collab/bench/collabproc"
)

// server is one fresh server process that one measurement drives.
type server struct {
	kind string
	pid  int
	// url is the driver's --url: ours ws://host/v2/crdt/sync (the room, org/doc/editor,
	// follows it), a peer's ws://127.0.0.1:port.
	url    string
	collab *collabproc.Server // ours
	peer   *nodeProc          // a peer
}

// org is the organization of ours' documents; the peers' rooms take the same names.
const org = "bench"

// startServer starts a server of kind on loopback and returns once it accepts connections.
func startServer(ctx context.Context, env environment, kind string) (*server, error) {
	if kind == kindOurs {
		// The REST limiter is off: the setup makes a thousand documents and a hundred tokens.
		s, err := collabproc.Start(ctx, "--rate-limit=off", "--log-level=warn")
		if err != nil {
			return nil, fmt.Errorf("crdtsync: starting collabd: %w", err)
		}
		return &server{kind: kind, pid: s.PID, url: "ws" + strings.TrimPrefix(s.BaseURL, "http") + "/v2/crdt/sync", collab: s}, nil
	}
	p, err := startNode(env.node, "peerserver.mjs", "--kind", kind)
	if err != nil {
		return nil, err
	}
	first, err := p.line(ctx, 30*time.Second, "the peer server's port")
	if err != nil {
		_ = p.stop(stopGrace)
		return nil, err
	}
	var ready struct {
		Port int `json:"port"`
		PID  int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(first), &ready); err != nil || ready.Port == 0 || ready.PID != p.pid() {
		_ = p.stop(stopGrace)
		return nil, fmt.Errorf("crdtsync: peerserver.mjs --kind %s said %q, want {\"port\":N,\"pid\":%d}", kind, first, p.pid())
	}
	return &server{kind: kind, pid: ready.PID, url: "ws://127.0.0.1:" + strconv.Itoa(ready.Port), peer: p}, nil
}

// stopGrace is how long a stopping process may take before it is killed.
const stopGrace = 10 * time.Second

// stop ends the server and waits for it.
func (s *server) stop() error {
	if s.collab != nil {
		if err := s.collab.Stop(); err != nil {
			return fmt.Errorf("crdtsync: stopping collabd: %w", err)
		}
		return nil
	}
	return s.peer.stop(stopGrace)
}

// stats reads the server's RSS and CPU time from /proc.
func (s *server) stats() (collabproc.Stats, error) {
	st, err := collabproc.ReadStats(s.pid)
	if err != nil {
		return st, fmt.Errorf("crdtsync: %s server's figures: %w", s.kind, err)
	}
	return st, nil
}

// log is what the server wrote to stderr so far: ours logs warnings and errors only, so
// anything there is worth reading.
func (s *server) log() string {
	if s.collab != nil {
		return strings.TrimSpace(s.collab.Logs())
	}
	return s.peer.stderr.String()
}

// fanoutRoom makes the fan-out's room and returns it with the driver's token arguments. For
// ours: a document and one member's token per client (the writer, then the readers), in a
// file under dir, since a user may hold at most 20 connections to a room. The peers need
// neither.
func (s *server) fanoutRoom(ctx context.Context, readers int, dir string) (room string, tokenArgs []string, err error) {
	room = org + "/fanout/editor"
	if s.collab == nil {
		return room, nil, nil
	}
	if err := s.collab.AddDocuments(ctx, org, []string{"fanout"}); err != nil {
		return "", nil, err
	}
	var b strings.Builder
	for i := range readers + 1 {
		user := "writer"
		if i > 0 {
			user = "reader-" + strconv.Itoa(i)
		}
		tok, err := s.collab.MemberToken(ctx, user, org, collabproc.RoleEditor)
		if err != nil {
			return "", nil, err
		}
		b.WriteString(tok + "\n")
	}
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return "", nil, fmt.Errorf("crdtsync: %w", err)
	}
	return room, []string{"--token-file", file}, nil
}

// memoryRooms makes the memory measurement's docs documents and returns the driver's room
// pattern with its token arguments. For ours: the documents and one member's token for all.
func (s *server) memoryRooms(ctx context.Context, docs int) (pattern string, tokenArgs []string, err error) {
	pattern = org + "/doc-{i}/editor"
	if s.collab == nil {
		return pattern, nil, nil
	}
	ids := make([]string, docs)
	for i := range ids {
		ids[i] = "doc-" + strconv.Itoa(i)
	}
	if err := s.collab.AddDocuments(ctx, org, ids); err != nil {
		return "", nil, err
	}
	tok, err := s.collab.MemberToken(ctx, "holder", org, collabproc.RoleEditor)
	if err != nil {
		return "", nil, err
	}
	return pattern, []string{"--token", tok}, nil
}
