package collabctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
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
	// outboxPrefix starts each of them.
	outboxPrefix = "collab_outbox_"
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
	if failed == len(targets) {
		return fmt.Errorf("no metrics URL could be read; no backlog to show")
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
	// Only the outbox's lines are parsed (outboxLines), so a page that is no exposition at all
	// (a proxy's HTML) is told by its type rather than by a parse error.
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/plain" {
		return nil, fmt.Errorf("%s answered %q, not a Prometheus text exposition: is it a process's --metrics-addr?", target, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, connectionError(u, err)
	}
	if len(body) > MaxResponse {
		return nil, fmt.Errorf("%s: the exposition is larger than %d MiB; not read", target, MaxResponse>>20)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(outboxLines(body)))
	if err != nil {
		return nil, fmt.Errorf("%s is not a Prometheus text exposition: %w", target, err)
	}
	return families, nil
}

// outboxLines keeps the lines of an exposition that speak of the outbox's series: the parser is
// strict about the whole text, and a series collabctl does not read (a library's, a new one,
// one it cannot parse) must not stop it from reading the backlog.
func outboxLines(body []byte) []byte {
	var out []byte
	for line := range bytes.Lines(body) {
		name := bytes.TrimLeft(line, " \t")
		if rest, ok := bytes.CutPrefix(name, []byte("#")); ok {
			// "# HELP name ..." and "# TYPE name ...": other comments are dropped.
			f := bytes.Fields(rest)
			if len(f) < 2 || (string(f[0]) != "HELP" && string(f[0]) != "TYPE") {
				continue
			}
			name = f[1]
		}
		if bytes.HasPrefix(name, []byte(outboxPrefix)) {
			out = append(out, line...)
			if !bytes.HasSuffix(line, []byte("\n")) {
				out = append(out, '\n')
			}
		}
	}
	return out
}

// value is a sample's value whatever type the exposition gave it: a gauge here, untyped when
// something between (a federating proxy, an exporter) dropped the TYPE lines.
func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
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
			v := value(m)
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
