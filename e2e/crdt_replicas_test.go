package e2e

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/yjstest"
)

// Two replicas of the crdt service on one MongoDB-wire server serve the same document: one
// process runs every service, the other only crdt (its HTTP listener serves the sync route
// alone, without a gateway). A client on each; an edit made through one replica reaches the
// client of the other, both ways, and the data holds both.
func TestCrdtReplicasShareADocument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := embedmongo.Start(filepath.Join(dir, "db"), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Stop)
	shared := []string{"--mongo-uri=" + db.URI(), "--internal-token=" + testInternalToken}

	s := &system{t: t}
	p, err := collabd.Start(context.Background(), config(t, append(shared, "--dev-workspace=true")...), collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	s.proc, s.base = p, "http://"+p.HTTPAddr
	peers := []string{"--services=crdt"}
	for _, name := range []string{"workspace", "documents", "access", "activity", "webhooks"} {
		peers = append(peers, "--"+name+"-addr="+p.GRPCAddr)
	}
	replica, err := collabd.Start(context.Background(), config(t, append(shared, peers...)...), collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Shutdown(context.Background()) })
	if replica.HTTPAddr == "" {
		t.Fatal("the crdt-only process serves no HTTP: the sync route needs its listener")
	}
	other := &system{t: t, proc: replica, base: "http://" + replica.HTTPAddr}

	k := s.devKey()
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true,
		"documents": []any{map[string]any{"documentId": "d", "documentName": "D"}}}).data(t, "")
	s.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "shared", "type": "text"}).data(t, "CRDT data added successfully.")

	a := yjstest.StartClient(t, s.syncURL(), "o/d/e", s.syncToken(t, k, "ua", "editor"))
	b := yjstest.StartClient(t, other.syncURL(), "o/d/e", s.syncToken(t, k, "ub", "editor"))
	next(t, a, "synced")
	next(t, b, "synced")
	waitText(t, a, "shared")
	waitText(t, b, "shared")

	start := time.Now()
	if err := a.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 6, "text": " by a"}); err != nil {
		t.Fatal(err)
	}
	waitText(t, b, "shared by a")
	// Replicas poll the log every 250 ms (docs/crdt.md); the time is logged, not asserted
	// (speed is for benchmarks).
	t.Logf("replica to replica: %v", time.Since(start))
	start = time.Now()
	if err := b.Send(map[string]any{"cmd": "insertText", "root": "content", "index": 0, "text": "b: "}); err != nil {
		t.Fatal(err)
	}
	waitText(t, a, "b: shared by a")
	t.Logf("replica to replica: %v", time.Since(start))
	// A REST change through the first process reaches the second's client.
	statusOnly(t, s.call("/v2/crdt/update", k, map[string]any{"organizationId": "o", "documentId": "d", "editorId": "e", "data": "b: shared by a and REST", "type": "text"}), "CRDT data updated successfully.")
	waitText(t, b, "b: shared by a and REST")
	if got := s.restText(t, k); got != "b: shared by a and REST" {
		t.Fatalf("stored %q", got)
	}
	// Anything else on the crdt-only listener is not found, in the error envelope.
	other.call("/v2/crdt/get", k, map[string]any{"organizationId": "o", "documentId": "d"}).fails(t, 404, "NOT_FOUND", "Not found: this process serves no gateway.")
}
