package collabctl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The outbox's series (internal/outbox/metrics.go, docs/operations.md).
const (
	seriesPending    = "collab_outbox_pending_events"
	seriesOldest     = "collab_outbox_oldest_pending_age_seconds"
	seriesReadErrors = "collab_outbox_backlog_read_errors"
)

// lane is one (producer, subscriber) backlog, merged over the processes scraped.
type lane struct {
	Producer   string  `json:"producer"`
	Subscriber string  `json:"subscriber"`
	Pending    float64 `json:"pending"`
	OldestAge  float64 `json:"oldestPendingAgeSeconds"`
	ReadError  bool    `json:"readError"`
	// Sources counts the processes that reported the lane (a producer's replicas all do).
	Sources int `json:"sources"`
}

func relayBacklog(ctx context.Context, s *session, args []string) error {
	fs := s.flags("relay backlog")
	var urls stringList
	fs.Var(&urls, "metrics-url", "a process's metrics listener (its --metrics-addr), e.g. http://10.0.0.5:9100/metrics or 10.0.0.5:9100; repeatable ("+EnvName("metrics-urls")+": comma-separated)")
	if _, err := s.parse(fs, args); err != nil {
		return err
	}
	if len(urls) == 0 {
		for _, u := range strings.Split(s.getenv(EnvName("metrics-urls")), ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	if len(urls) == 0 {
		return usagef("relay backlog needs --metrics-url (a process started with --metrics-addr)")
	}
	targets := make([]string, len(urls))
	for i, u := range urls {
		t, err := metricsURL(u)
		if err != nil {
			return err
		}
		targets[i] = t
	}
	lanes := map[[2]string]*lane{}
	failed := 0
	for _, t := range targets {
		families, err := s.client.scrape(ctx, t)
		if err != nil {
			failed++
			fmt.Fprintf(s.stderr, "collabctl: %s\n", sanitize(err.Error()))
			continue
		}
		found := mergeBacklog(lanes, families)
		if found == 0 {
			fmt.Fprintf(s.stderr, "collabctl: %s has no outbox series (a process that publishes no events, or not a collab metrics listener)\n", sanitize(t))
		}
	}
	out := make([]lane, 0, len(lanes))
	for _, l := range lanes {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Producer != out[j].Producer {
			return out[i].Producer < out[j].Producer
		}
		return out[i].Subscriber < out[j].Subscriber
	})
	if failed < len(targets) {
		if err := printLanes(s, out); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d metrics URLs could not be read; the backlog shown is partial", failed, len(targets))
	}
	return nil
}

func printLanes(s *session, lanes []lane) error {
	if s.output == "json" {
		return printValue(s.stdout, lanes)
	}
	t := newTable(s.stdout, "PRODUCER", "SUBSCRIBER", "PENDING", "OLDEST", "READ ERROR", "PROCESSES")
	for _, l := range lanes {
		oldest := "-"
		if l.Pending > 0 {
			oldest = (time.Duration(l.OldestAge * float64(time.Second))).Round(time.Second).String()
		}
		readErr := "no"
		if l.ReadError {
			readErr = "yes"
		}
		t.row(l.Producer, l.Subscriber, fmt.Sprintf("%.0f", l.Pending), oldest, readErr, fmt.Sprint(l.Sources))
	}
	return t.flush()
}

// metricsURL completes an address: http:// when no scheme is given, /metrics when no path.
func metricsURL(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", usagef("--metrics-url %s is not an http(s) address without credentials, such as http://127.0.0.1:9100/metrics", shownURL(raw))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// scrape reads one Prometheus text exposition, bounded like every answer.
func (c *Client) scrape(ctx context.Context, target string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, usagef("--metrics-url %s: %v", target, err)
	}
	// The text format: the one expfmt's parser reads, and every Prometheus client serves.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	u, _ := url.Parse(target)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, connectionError(u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered HTTP %d: is it a process's --metrics-addr?", target, resp.StatusCode)
	}
	body := io.LimitReader(resp.Body, MaxResponse+1)
	counted := &countingReader{r: body}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(counted)
	if counted.n > MaxResponse {
		return nil, fmt.Errorf("%s: the exposition is larger than %d MiB; not read", target, MaxResponse>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not a Prometheus text exposition: %w", target, err)
	}
	return families, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// mergeBacklog adds one process's outbox series to lanes and returns how many it had. Replicas
// of a producer read the same store, so values merge with max, as the alerts aggregate them.
func mergeBacklog(lanes map[[2]string]*lane, families map[string]*dto.MetricFamily) int {
	found := 0
	here := map[[2]string]bool{}
	for _, name := range []string{seriesPending, seriesOldest, seriesReadErrors} {
		for _, m := range families[name].GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "producer":
					key[0] = l.GetValue()
				case "subscriber":
					key[1] = l.GetValue()
				}
			}
			l := lanes[key]
			if l == nil {
				l = &lane{Producer: key[0], Subscriber: key[1]}
				lanes[key] = l
			}
			if !here[key] {
				here[key] = true
				l.Sources++
			}
			found++
			v := m.GetGauge().GetValue()
			switch name {
			case seriesPending:
				l.Pending = max(l.Pending, v)
			case seriesOldest:
				l.OldestAge = max(l.OldestAge, v)
			case seriesReadErrors:
				l.ReadError = l.ReadError || v > 0
			}
		}
	}
	return found
}
