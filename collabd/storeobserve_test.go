package collabd

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Every service of the process observes its store on the one registry (the histogram is
// registered once, however many services build an observer): a call moves the series of the
// store operation it makes, by service.
func TestMetricsTimeStoreOperations(t *testing.T) {
	p := startProcess(t, "--metrics-addr=127.0.0.1:0")
	good := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}
	labels := []string{`service="activity"`, `operation="Config"`}
	before := sample(t, scrape(t, p.MetricsAddr), "collab_store_operation_seconds_count", labels...)
	for range 3 {
		if code := post(t, p, "/v2/workspace/activityconfig/get", good); code != http.StatusOK {
			t.Fatalf("call: %d", code)
		}
	}
	after := scrape(t, p.MetricsAddr)
	if got := sample(t, after, "collab_store_operation_seconds_count", labels...) - before; got != 3 {
		t.Errorf("activity's Config moved by %v, want 3", got)
	}
	// The workspace service answered the call's authentication from its store.
	for _, service := range []string{"activity", "workspace"} {
		if !hasSeries(after, "collab_store_operation_seconds_count", `service="`+service+`"`) {
			t.Errorf("%s: no store series", service)
		}
	}
	// The outboxes' relays poll their stores (Due) as they start, observed as "<service>.outbox".
	deadline := time.Now().Add(10 * time.Second)
	for !hasSeries(scrape(t, p.MetricsAddr), "collab_store_operation_seconds_count", `service="documents.outbox"`, `operation="Due"`) {
		if time.Now().After(deadline) {
			t.Fatal("documents.outbox: no store series")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasSeries reports whether the exposition text has a series of name whose labels include
// every one of labels, whatever its value.
func hasSeries(text, name string, labels ...string) bool {
next:
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		return true
	}
	return false
}

// With tracing, a request's store calls are spans under the server span of the RPC that made
// them, naming the store's kind; store calls outside a request (the workers' polls, readiness
// pings) start no traces of their own.
func TestTracingStoreCalls(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p := startTraced(t, exp)
	creds := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}
	if code := postJSON(t, p, "/v2/organizations/add", creds, map[string]any{"organizations": []any{map[string]any{"organizationId": "org1", "organizationName": "O"}}}); code != http.StatusOK {
		t.Fatalf("add organization: %d", code)
	}
	spans := exp.GetSpans()
	server := find(t, spans, "documents' span", named(trace.SpanKindServer, "collab.documents.v1.DocumentsService/AddOrganizations"))
	store := find(t, spans, "the store call", named(trace.SpanKindInternal, "documents.store/CreateOrganization"))
	childOf(t, store, server)
	if !slices.Contains(store.Attributes, attribute.String("db.system", "memory")) {
		t.Errorf("attributes %v", store.Attributes)
	}
	for _, s := range spans {
		if strings.Contains(s.Name, ".store/") && !s.Parent.IsValid() {
			t.Errorf("store span %q is a trace of its own", s.Name)
		}
	}
}
