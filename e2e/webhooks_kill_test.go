package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/testkit/webhooktest"
)

// A delivery process killed (SIGKILL) while its receiver holds the request loses nothing: once
// its lease runs out, another process on the same store delivers the message, and the real
// receiver verifies it. Three processes share one MongoDB-wire server: one that runs every
// service but sends no webhooks, the delivery process that is killed, and the one that takes
// over.
func TestWebhookWorkerKilledMidDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := embedmongo.Start(filepath.Join(dir, "db"), embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Stop)
	rcv := webhooktest.Start(t)
	shared := []string{"--mongo-uri=" + db.URI(), "--internal-token=" + testInternalToken, "--webhook-private-targets=allow", "--webhook-lease=20s"}

	// Every service; its webhooks service stores messages but sends none.
	s := &system{t: t}
	p, err := collabd.Start(context.Background(), config(t, append(shared, "--dev-workspace=true", "--webhook-workers=0")...), collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	s.proc, s.base = p, "http://"+p.HTTPAddr
	k := s.devKey()
	s.addOrganization(t, k, "o")
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	hook(t, s, k, rcv, "/slow", map[string]any{}, webhooktest.WithResponses(webhooktest.Response{Hang: true}, webhooktest.Response{Status: 200}))

	// The delivery process: the real binary, killed mid-delivery.
	bin := filepath.Join(dir, "collabd")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/collabd").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	worker := exec.Command(bin, append(shared, "--services=webhooks", "--grpc-addr=127.0.0.1:0", "--workspace-addr="+p.GRPCAddr, "--log-level=error")...)
	worker.Env = append(os.Environ(), "COLLAB_DATA_DIR=")
	worker.Stdout, worker.Stderr = io.Discard, io.Discard
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Kill(); _ = worker.Wait() })

	// The worker polls the store: the first attempt reaches the receiver once it is up.
	s.publish(t, k, map[string]any{"id": "kill-1", "type": "comment.add", "organizationId": "o"})
	first := rcv.WaitFor(t, "/slow", 1, 20*time.Second)[0]
	if !first.Verified {
		t.Fatalf("first attempt not verified: %s", first.VerifyError)
	}
	if err := worker.Process.Kill(); err != nil { // SIGKILL: no cleanup, the lease stays
		t.Fatal(err)
	}
	_ = worker.Wait()

	// The process that takes over: same store, its own workers.
	taker, err := collabd.Start(context.Background(), config(t, append(shared, "--services=webhooks", "--workspace-addr="+p.GRPCAddr)...), collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taker.Shutdown(context.Background()) })
	got := rcv.WaitFor(t, "/slow", 2, 40*time.Second)
	if got[1].ID != first.ID || payloadOf(t, got[1])["event"] != "comment.add" {
		t.Fatalf("after the takeover: %+v", got[1])
	}
	if got[1].ReceivedAtMs-first.ReceivedAtMs < 19_000 {
		t.Fatalf("taken over after %d ms, before the lease ran out", got[1].ReceivedAtMs-first.ReceivedAtMs)
	}
}
