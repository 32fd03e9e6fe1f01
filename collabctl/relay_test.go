package collabctl

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/collab/collab/services"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A process whose webhooks service is elsewhere and down keeps the events it publishes for
// webhooks: relay backlog shows that lane's backlog as the process's /metrics holds it, and
// reading the same process twice takes the maximum, not the sum (replicas share a store).
func TestRelayBacklog(t *testing.T) {
	var local []string
	for _, m := range services.All() {
		if m.Name != "webhooks" {
			local = append(local, m.Name)
		}
	}
	p := startProcess(t, "--services=gateway,"+strings.Join(local, ","), "--webhooks-addr="+closedAddr(t),
		"--internal-token="+strings.Repeat("0123456789abcdef", 4), "--metrics-addr=127.0.0.1:0")
	ctx := context.Background()
	env := devEnv(p)
	run(ctx, env, `{"organizations": [{"organizationId": "o", "organizationName": "O"}]}`, "call", "/v2/organizations/add", "-f", "-").ok(t)
	for _, id := range []string{"e1", "e2"} {
		run(ctx, env, `{"id": "`+id+`", "type": "comment.add", "organizationId": "o"}`, "call", "/v2/events/publish", "-f", "-").ok(t)
	}

	metrics := "http://" + p.MetricsAddr + "/metrics"
	// Local consumers take their events at once; the lane to the absent webhooks service keeps
	// both. Wait for that state, which then holds still, to compare with.
	stuck := [2]string{"events", "webhooks"}
	var scraped map[[2]string]float64
	eventually(t, "only the lane to webhooks holding events", func() bool {
		scraped = scrapeOutbox(t, metrics)
		for lane, n := range scraped {
			if (lane == stuck) != (n > 0) {
				return false
			}
		}
		return scraped[stuck] == 2
	})
	o := run(ctx, env, "", "-o", "json", "relay", "backlog", "--metrics-url", metrics, "--metrics-url", p.MetricsAddr).ok(t)
	var lanes []lane
	if err := json.Unmarshal([]byte(o.stdout), &lanes); err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	if len(lanes) != len(scraped) {
		t.Fatalf("%d lanes, the scrape has %d: %s", len(lanes), len(scraped), o.stdout)
	}
	for _, l := range lanes {
		want, ok := scraped[[2]string{l.Producer, l.Subscriber}]
		if !ok || l.Pending != want || l.Sources != 2 || l.ReadError {
			t.Errorf("lane %+v, the scrape says %v", l, want)
		}
		if l.Producer == "events" && l.Subscriber == "webhooks" && l.OldestAge < 0 {
			t.Errorf("oldest age %v", l.OldestAge)
		}
	}

	// The table, from the environment's list; a URL that cannot be read makes the run fail
	// (exit 1) after printing what the others hold.
	env["COLLABCTL_METRICS_URLS"] = metrics + ", " + closedAddr(t)
	o = run(ctx, env, "", "relay", "backlog")
	if o.code != ExitFailed || !strings.Contains(o.stderr, "1 of 2 metrics URLs could not be read") || !strings.Contains(o.stderr, "connection refused") {
		t.Fatalf("one dead URL: %+v", o)
	}
	var row string
	for _, line := range strings.Split(o.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "events" && f[1] == "webhooks" {
			row = line
		}
	}
	if f := strings.Fields(row); len(f) != 6 || f[2] != "2" || f[4] != "no" || f[5] != "1" {
		t.Fatalf("table row %q in:\n%s", row, o.stdout)
	}
	// The API's listener is not a metrics listener.
	if o := run(ctx, env, "", "relay", "backlog", "--metrics-url", "http://"+p.HTTPAddr); o.code != ExitFailed || !strings.Contains(o.stderr, "HTTP 404") || !strings.Contains(o.stderr, "no metrics URL could be read") {
		t.Fatalf("the API as metrics: %+v", o)
	}
	// Through something that drops the TYPE lines (the values become untyped) and adds series
	// of its own, one of them malformed: the backlog is read all the same. A page that is not
	// an exposition fails.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/html" {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>collab_outbox_pending_events 7</body></html>")
			return
		}
		resp, err := http.Get(metrics)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		for line := range strings.Lines(string(body)) {
			if !strings.HasPrefix(line, "# TYPE ") {
				_, _ = io.WriteString(w, line)
			}
		}
		_, _ = io.WriteString(w, "# TYPE proxy_up gauge\nproxy_up 1\nproxy_broken{le=\"1\" 3 not a sample\n# TYPE proxy_up counter\n")
	}))
	defer front.Close()
	o = run(ctx, env, "", "-o", "json", "relay", "backlog", "--metrics-url", front.URL+"/metrics").ok(t)
	lanes = nil
	if err := json.Unmarshal([]byte(o.stdout), &lanes); err != nil {
		t.Fatalf("%v\n%s", err, o.stdout)
	}
	var through *lane
	for i, l := range lanes {
		if l.Producer == stuck[0] && l.Subscriber == stuck[1] {
			through = &lanes[i]
		}
	}
	if len(lanes) != len(scraped) || through == nil || through.Pending != 2 || through.OldestAge <= 0 {
		t.Fatalf("through the front: %s", o.stdout)
	}
	if o := run(ctx, env, "", "relay", "backlog", "--metrics-url", front.URL+"/html"); o.code != ExitFailed || !strings.Contains(o.stderr, `answered "text/html", not a Prometheus text exposition`) {
		t.Fatalf("an HTML page: %+v", o)
	}
	delete(env, "COLLABCTL_METRICS_URLS")
	if o := run(ctx, env, "", "relay", "backlog"); o.code != ExitUsage {
		t.Fatalf("no URL: %+v", o)
	}
}

// scrapeOutbox reads collab_outbox_pending_events from a metrics listener directly.
func scrapeOutbox(t *testing.T, url string) map[[2]string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, m := range families["collab_outbox_pending_events"].GetMetric() {
		var key [2]string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "producer":
				key[0] = l.GetValue()
			case "subscriber":
				key[1] = l.GetValue()
			}
		}
		out[key] = m.GetGauge().GetValue()
	}
	return out
}
