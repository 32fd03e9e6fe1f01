package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// The notes service answers through the gateway, in one process and in its own process behind
// a gateway that runs every other service.
func TestNotes(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, s *system, k map[string]string) {
		s.call("/v2/notes/add", k, map[string]any{"documentId": "d", "text": "hello"}).data(t, "Note added.")
		got := s.call("/v2/notes/get", k, map[string]any{"documentId": "d"}).data(t, "Notes retrieved.")
		if fmt.Sprint(got["texts"]) != "[hello]" {
			t.Fatalf("notes %v", got)
		}
		s.call("/v2/notes/get", k, map[string]any{"documentId": "nope"}).fails(t, 404, "NOT_FOUND", "Document has no notes.")
		s.call("/v2/notes/add", k, map[string]any{"documentId": "d"}).fails(t, 400, "INVALID_ARGUMENT", "documentId and text are required.")
		s.call("/v2/notes/get", nil, map[string]any{"documentId": "d"}).fails(t, 400, "INVALID_ARGUMENT", "API key not found in headers.")
	}
	t.Run("all-in-one", func(t *testing.T) {
		s := newSystem(t)
		check(t, s, s.devKey())
	})
	t.Run("split", func(t *testing.T) {
		addr := freeAddr(t)
		rest := start(t, config(t, "--services=gateway,"+strings.Join(serviceNames("notes"), ","), "--notes-addr="+addr, "--internal-token="+testInternalToken))
		start(t, config(t, "--services=notes", "--grpc-addr="+addr, "--workspace-addr="+rest.proc.GRPCAddr, "--internal-token="+testInternalToken))
		id, token := rest.newWorkspace("notes@example.com")
		key, auth := rest.newKey(id, token)
		check(t, rest, keyHeaders(key, auth))
	})
}
