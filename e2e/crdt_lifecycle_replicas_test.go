package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/testkit/yjstest"
)

// A document deleted or migrated away closes its live-sync clients on every replica at once,
// not only on the replica whose crdt service ran the lifecycle event: it tells the others on
// the wake-up engine (docs/crdt.md, "Live sync (`services/crdt/live`)"). With the access
// recheck off and a safety poll of ten minutes, nothing else would close the other replica's clients in time (a
// migrated document's data is still found under its generation, so no poll ever would).
func TestLifecycleClosesRoomsOnEveryReplica(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := embedmongo.Start(filepath.Join(dir, "db"), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Stop)
	engine := natstest.Server(t, natstest.Options{})
	shared := []string{"--mongo-uri=" + db.URI(), "--internal-token=" + testInternalToken,
		"--wakeup-url=" + engine.ClientURL(), "--wakeup-safety-poll=10m", "--crdt-sync-recheck=0s"}

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
	other := &system{t: t, proc: replica, base: "http://" + replica.HTTPAddr}

	k := s.devKey()
	s.call("/v2/organizations/documents/add", k, map[string]any{"organizationId": "o", "createOrganization": true,
		"documents": []any{map[string]any{"documentId": "gone", "documentName": "G"}, map[string]any{"documentId": "moved", "documentName": "M"}}}).data(t, "")
	// A client of each document on each replica: whichever process runs the lifecycle event,
	// the other one's clients are closed only by its announcement.
	clients := map[string][]*yjstest.Client{}
	var resources []any
	for _, doc := range []string{"gone", "moved"} {
		resources = append(resources, map[string]any{"type": "document", "id": doc, "organizationId": "o", "accessRole": "editor"})
	}
	token := s.call("/v2/auth/generate_token", k, map[string]any{"userId": "u", "userProperties": map[string]any{"name": "U", "email": "u@example.com"},
		"permissions": map[string]any{"resources": resources}}).data(t, "Token generated successfully.")["token"].(string)
	for _, doc := range []string{"gone", "moved"} {
		s.call("/v2/crdt/add", k, map[string]any{"organizationId": "o", "documentId": doc, "editorId": "e", "data": "text of " + doc, "type": "text"}).data(t, "CRDT data added successfully.")
		for _, sys := range []*system{s, other} {
			c := yjstest.StartClient(t, sys.syncURL(), "o/"+doc+"/e", token)
			next(t, c, "synced")
			waitText(t, c, "text of "+doc)
			clients[doc] = append(clients[doc], c)
		}
	}
	s.call("/v2/organizations/documents/delete", k, map[string]any{"organizationId": "o", "documentIds": []string{"gone"}}).ok(t)
	s.call("/v2/organizations/documents/migrate", k, map[string]any{"organizationId": "o", "documentId": "moved", "newDocumentId": "new"}).data(t, "")
	for doc, cs := range clients {
		for i, c := range cs {
			if closed := next(t, c, "close"); fmt.Sprint(closed["code"]) != "4410" {
				t.Fatalf("the client of %q on replica %d closed with %v, want 4410", doc, i, closed)
			}
		}
	}
}
