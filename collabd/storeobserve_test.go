package collabd

import (
	"net/http"
	"strings"
	"testing"
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
