package collabd

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/services"
)

// startProcess runs every service in memory on free ports, with extra flags.
func startProcess(t *testing.T, extra ...string) *Process {
	t.Helper()
	return startWith(t, Deps{}, extra...)
}

// startWith runs a process on free ports with extra flags (later flags win) and deps (the real
// clock, and no log unless deps names an output); it stops with the test.
func startWith(t *testing.T, deps Deps, extra ...string) *Process {
	t.Helper()
	args := append([]string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}, extra...)
	cfg, err := parse(t, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if deps.LogOutput == nil {
		deps.LogOutput = io.Discard
	}
	p, err := Start(context.Background(), cfg, deps)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// sample returns the sum of the series name whose labels include every one of labels
// (`k="v"`), 0 when there is none.
func sample(t *testing.T, text, name string, labels ...string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	sum := 0.0
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func post(t *testing.T, p *Process, path string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.HTTPAddr+path, bytes.NewReader([]byte(`{"data":{}}`)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Real calls through the gateway move the per-RPC and per-route series by exactly their
// number, with the code the caller got; /metrics is on its own listener, not the API's.
func TestMetricsCountCalls(t *testing.T) {
	p := startProcess(t, "--metrics-addr=127.0.0.1:0")
	if p.MetricsAddr == "" || p.MetricsAddr == p.HTTPAddr {
		t.Fatalf("metrics address %q (http %q)", p.MetricsAddr, p.HTTPAddr)
	}
	const route = "/v2/workspace/activityconfig/get"
	rpc := []string{`grpc_service="collab.activity.v1.ActivityService"`, `grpc_method="GetActivityConfig"`}
	ok := append([]string{`grpc_code="OK"`}, rpc...)
	refused := append([]string{`grpc_code="InvalidArgument"`}, rpc...) // a wrong token: 400 in the API
	httpOK := []string{`route="` + route + `"`, `method="POST"`, `code="2xx"`}
	http4xx := []string{`route="` + route + `"`, `method="POST"`, `code="4xx"`}

	before := scrape(t, p.MetricsAddr)
	good := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}
	bad := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": "wrong"}
	for range 3 {
		if code := post(t, p, route, good); code != http.StatusOK {
			t.Fatalf("good call: %d", code)
		}
	}
	for range 2 {
		if code := post(t, p, route, bad); code != http.StatusBadRequest {
			t.Fatalf("bad call: %d", code)
		}
	}
	post(t, p, "/v2/no/such/route/123", good)
	after := scrape(t, p.MetricsAddr)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"grpc_server_handled_total", ok, 3},
		{"grpc_server_handled_total", refused, 2},
		{"grpc_server_started_total", rpc, 5},
		{"grpc_server_handling_seconds_count", rpc, 5},
		{"collab_http_requests_total", httpOK, 3},
		{"collab_http_requests_total", http4xx, 2},
		{"collab_http_request_duration_seconds_count", []string{`route="` + route + `"`, `method="POST"`}, 5},
		{"collab_http_requests_total", []string{`route="other"`, `code="4xx"`}, 1},
	} {
		if got := sample(t, after, c.name, c.labels...) - sample(t, before, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Services' own series are registered on the process's registry.
	for _, name := range []string{"collab_crdt_rooms 0", "collab_crdt_connections 0", "collab_webhook_pending_deliveries 0", "collab_webhook_due_lag_seconds 0"} {
		if !strings.Contains(after, "\n"+name+"\n") {
			t.Errorf("no %q in the scrape", name)
		}
	}
	if !strings.Contains(after, "collab_outbox_pending_events{producer=") {
		t.Error("no outbox backlog series in the scrape")
	}
	if strings.Contains(after, "/v2/no/such/route/123") {
		t.Error("a raw path became a label value")
	}
	// The API's listener does not serve the metrics.
	if code := post(t, p, "/metrics", nil); code == http.StatusOK {
		t.Error("/metrics answered on the HTTP API")
	}
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "grpc_server_handled_total") {
		t.Errorf("/metrics on the HTTP API: %d", resp.StatusCode)
	}
}

// Calls over TCP (from another process) pass the same interceptor, so they count too.
func TestMetricsCountTCPCalls(t *testing.T) {
	p := startProcess(t, "--metrics-addr=127.0.0.1:0")
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	labels := []string{`grpc_service="grpc.health.v1.Health"`, `grpc_method="Check"`, `grpc_code="OK"`}
	before := sample(t, scrape(t, p.MetricsAddr), "grpc_server_handled_total", labels...)
	for range 4 {
		if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := sample(t, scrape(t, p.MetricsAddr), "grpc_server_handled_total", labels...) - before; got != 4 {
		t.Fatalf("health checks over TCP moved the count by %v, want 4", got)
	}
}

// In split mode the caller's side counts too: a gateway alone calls the services' process over
// TCP, and both scrapes move by the number of calls.
func TestMetricsCountPeerCalls(t *testing.T) {
	token := "--internal-token=" + strings.Repeat("0123456789abcdef", 4)
	svc := startProcess(t, "--metrics-addr=127.0.0.1:0", token)
	args := []string{"--services=gateway", "--metrics-addr=127.0.0.1:0", token}
	for _, m := range services.All() {
		args = append(args, "--"+m.Name+"-addr="+svc.GRPCAddr)
	}
	gw := startProcess(t, args...)
	good := map[string]string{"x-service-api-key": svc.Dev.APIKey, "x-service-auth-token": svc.Dev.AuthToken}
	rpc := []string{`grpc_service="collab.activity.v1.ActivityService"`, `grpc_method="GetActivityConfig"`, `grpc_code="OK"`}
	clientBefore := sample(t, scrape(t, gw.MetricsAddr), "grpc_client_handled_total", rpc...)
	serverBefore := sample(t, scrape(t, svc.MetricsAddr), "grpc_server_handled_total", rpc...)
	for range 3 {
		if code := post(t, gw, "/v2/workspace/activityconfig/get", good); code != http.StatusOK {
			t.Fatalf("call through the gateway: %d", code)
		}
	}
	if got := sample(t, scrape(t, gw.MetricsAddr), "grpc_client_handled_total", rpc...) - clientBefore; got != 3 {
		t.Errorf("the gateway's client count moved by %v, want 3", got)
	}
	if got := sample(t, scrape(t, svc.MetricsAddr), "grpc_server_handled_total", rpc...) - serverBefore; got != 3 {
		t.Errorf("the service's count moved by %v, want 3", got)
	}
}

// Without --metrics-addr the process opens no metrics listener.
func TestNoMetricsWithoutTheFlag(t *testing.T) {
	p := startProcess(t)
	if p.MetricsAddr != "" {
		t.Fatalf("metrics served at %s", p.MetricsAddr)
	}
	for _, addr := range []string{p.HTTPAddr} {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "go_goroutines") {
			t.Fatalf("/metrics on %s: %d", addr, resp.StatusCode)
		}
	}
}

// On MongoDB (here the embedded server of --data-dir) every command is timed by database, so
// by service.
func TestMetricsTimeStoreCommands(t *testing.T) {
	p := startProcess(t, "--metrics-addr=127.0.0.1:0", "--data-dir="+t.TempDir())
	good := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}
	before := scrape(t, p.MetricsAddr)
	if code := post(t, p, "/v2/workspace/activityconfig/get", good); code != http.StatusOK {
		t.Fatalf("call: %d", code)
	}
	after := scrape(t, p.MetricsAddr)
	labels := []string{`database="collab_activity"`, `outcome="ok"`}
	if got := sample(t, after, "collab_store_command_seconds_count", labels...) - sample(t, before, "collab_store_command_seconds_count", labels...); got < 1 {
		t.Errorf("activity's store commands moved by %v", got)
	}
}
