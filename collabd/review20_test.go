package collabd

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/service"
)

// Review of issue 20 (6): the HTTP listener reads at most MaxHeaderBytes (16 KiB) of headers,
// but the gRPC listener, which the same commit treats as reachable by callers it must not
// trust (x-forwarded-for, request limits), still reads grpc-go's default of 16 MiB of metadata
// per call, on any number of streams and connections: a gRPC caller gets a thousand times an
// HTTP one's header budget. A call with 1 MiB of metadata should be refused as HTTP refuses
// it; it reaches the operation.
func TestReview20GRPCMetadataIsBounded(t *testing.T) {
	p := startProcess(t)
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-big", strings.Repeat("a", 1<<20))
	// A public operation: no credentials needed to reach it.
	_, err = workspacev1.NewWorkspaceServiceClient(conn).GetEmailVerificationStatus(ctx, &workspacev1.GetEmailVerificationStatusRequest{OwnerEmail: "x@example.com"})
	if code := status.Code(err); code != codes.ResourceExhausted && code != codes.Internal && code != codes.Unavailable {
		t.Fatalf("a call with 1 MiB of metadata reached the operation (%v); HTTP refuses past %d bytes", err, MaxHeaderBytes)
	}
}

// Review of issue 20 (6): the published credentials are two secrets, and each opens the
// development workspace on its own: the workspace token (W: its keys, settings, webhooks) and
// the API key's auth token with the published dev-api-key (K: every API operation).
// Published is true only when both are the published ones, so an operator who replaces one
// (--dev-workspace-token) passes checkExposure on every interface while the other still opens
// the workspace to anyone. (The process here listens on loopback; checkExposure is asked about
// the image's 0.0.0.0 as Start would ask it.)
func TestReview20OnePublishedTokenIsStillRefusedBeyondLoopback(t *testing.T) {
	p := startProcess(t, "--dev-workspace-token=an-own-secret-workspace-token-0123456789")
	if p.Dev == nil {
		t.Fatal("no development workspace")
	}
	if p.Dev.AuthToken != "dev-auth-token" || p.Dev.APIKey != "dev-api-key" {
		t.Fatalf("dev credentials %+v: want the published API key and auth token kept", p.Dev)
	}
	// The published API key and auth token still work.
	req, err := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+"/v2/organizations/add", strings.NewReader(`{"data":{"organizations":[{"organizationId":"o","organizationName":"O"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-service-api-key", "dev-api-key")
	req.Header.Set("x-service-auth-token", "dev-auth-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the published API key and auth token: status %d", resp.StatusCode)
	}
	if err := checkExposure(Config{}, p.Dev, []string{"0.0.0.0:9090", "0.0.0.0:8080"}); err == nil {
		t.Fatal("a process whose published API key and auth token open its development workspace passes the exposure check on 0.0.0.0")
	}
}

// Review of issue 20 (6): an empty --http-addr is skipped by checkExposure (empty means
// "in-process only" for --grpc-addr), but Start still listens on it: net.Listen("tcp", "")
// binds every interface on a random port ("If the host in the address parameter is empty ...
// Listen listens on all available unicast and anycast IP addresses of the local system").
// Asked as Start asks it, the check lets such a process start with the published credentials.
func TestReview20EmptyHTTPAddrIsNotLoopback(t *testing.T) {
	cfg, err := parse(t, nil, "--http-addr=", "--grpc-addr=127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "" || !cfg.Runs(Gateway) {
		t.Fatalf("config %q, gateway %v", cfg.HTTPAddr, cfg.Runs(Gateway))
	}
	listens := []string{cfg.GRPCAddr, cfg.HTTPAddr} // as Start builds them for a process with the gateway
	if err := checkExposure(cfg, &service.DevCredentials{Published: true}, listens); err == nil {
		t.Fatal("--http-addr= (every interface) with the published credentials passes the exposure check")
	}
}

// Review of issue 20 (6): the compose file sets COLLAB_ALLOW_PUBLISHED_DEV_CREDENTIALS to
// whatever COLLAB_DEV_WORKSPACE is, but the two flags read different spellings:
// --dev-workspace takes on/yes (and true/1), --allow-published-dev-credentials only
// strconv.ParseBool's. COLLAB_DEV_WORKSPACE=on docker compose up, which worked before, now
// stops every service container at flag parsing.
func TestReview20ComposeDevWorkspaceSpellingsStillStart(t *testing.T) {
	for _, v := range []string{"true", "on", "yes"} {
		env := map[string]string{"COLLAB_DEV_WORKSPACE": v, "COLLAB_ALLOW_PUBLISHED_DEV_CREDENTIALS": v}
		if _, err := parse(t, env, "--services=workspace", "--internal-token=9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a38d5c2b9e6f1a4d7c0b3e8f5a2d9c6b1e", "--workspace-addr=", "--mongo-uri=mongodb://127.0.0.1:1/x"); err != nil {
			t.Errorf("COLLAB_DEV_WORKSPACE=%s as compose passes it: %v", v, err)
		}
	}
}
