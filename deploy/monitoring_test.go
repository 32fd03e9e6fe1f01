package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The compose deployment's Prometheus scrapes every collabd container, the gateway's too, on
// the metrics port the compose file gives them, and loads the alert rules it mounts.
func TestPrometheusScrapesEveryProcess(t *testing.T) {
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "../"+PrometheusFile, &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName != "collab" {
			t.Errorf("scrape job %q: the alerts select job=\"collab\"", sc.JobName)
		}
		for _, c := range sc.StaticConfigs {
			targets = append(targets, c.Targets...)
		}
	}
	want := []string{fmt.Sprintf("gateway:%d", MetricsPort)}
	for _, n := range names() {
		want = append(want, fmt.Sprintf("%s:%d", n, MetricsPort))
	}
	slices.Sort(targets)
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Errorf("targets %v, want %v", targets, want)
	}
	if !slices.Equal(prom.RuleFiles, []string{"/etc/prometheus/alerts.yml"}) {
		t.Errorf("rule_files %v", prom.RuleFiles)
	}

	var compose struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
			Volumes  []string `yaml:"volumes"`
			Ports    []string `yaml:"ports"`
		} `yaml:"services"`
	}
	readYAML(t, "../"+ComposeFile, &compose)
	p, ok := compose.Services["prometheus"]
	if !ok {
		t.Fatal("compose has no prometheus service")
	}
	if !slices.Equal(p.Profiles, []string{"monitoring"}) {
		t.Errorf("prometheus runs without the monitoring profile: %v", p.Profiles)
	}
	for _, mount := range []string{"./" + PrometheusFile + ":/etc/prometheus/prometheus.yml:ro", "./deploy/monitoring/alerts.yml:/etc/prometheus/alerts.yml:ro"} {
		if !slices.Contains(p.Volumes, mount) {
			t.Errorf("prometheus does not mount %s: %v", mount, p.Volumes)
		}
	}
	for _, port := range p.Ports {
		if !strings.HasPrefix(port, "127.0.0.1:") {
			t.Errorf("prometheus publishes %q beyond the host's loopback", port)
		}
	}
}

// Every alert rule is explained in docs/operations.md, and every series it reads is one the
// metrics table there documents (a renamed series breaks the alert silently otherwise).
func TestAlertsAreDocumented(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "monitoring/alerts.yml", &rules)
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)`(?:, `([a-z_]+)`)*").FindAllStringSubmatch(doc, -1) {
		for _, name := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[0], -1) {
			documented[name[1]] = true
		}
	}
	series := regexp.MustCompile(`\b(?:collab|grpc)_[a-z_]+`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !strings.Contains(doc, "`"+r.Alert+"`") {
				t.Errorf("alert %s is not explained in docs/operations.md", r.Alert)
			}
			// The table says how long the condition must hold (its for:), in minutes.
			if d, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			} else if row := firesWhen(doc, r.Alert); !regexp.MustCompile(fmt.Sprintf(`\b%d min\b`, int(d.Minutes()))).MatchString(row) {
				t.Errorf("alert %s holds for %s, which its row (fires when) in docs/operations.md does not say: %q", r.Alert, r.For, row)
			}
			if r.Expr == "" || r.For == "" || r.Annotations["summary"] == "" || (r.Labels["severity"] != "page" && r.Labels["severity"] != "ticket") {
				t.Errorf("alert %s lacks an expression, a for, a summary or a severity (page, ticket)", r.Alert)
			}
			// The series are what is left once grouping clauses and label matchers are gone.
			expr := regexp.MustCompile(`\b(?:by|without) \([^)]*\)|\{[^}]*\}`).ReplaceAllString(r.Expr, "")
			for _, name := range series.FindAllString(expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !documented[base] {
					t.Errorf("alert %s reads %s, which the metrics table of docs/operations.md does not list", r.Alert, base)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules")
	}
}

// firesWhen returns the "fires when" cell (the third) of the row of doc's alerts table whose
// first cell is name in backquotes.
func firesWhen(doc, name string) string {
	for line := range strings.Lines(doc) {
		if cells := strings.Split(line, "|"); strings.HasPrefix(line, "| `"+name+"` |") && len(cells) > 3 {
			return cells[3]
		}
	}
	return ""
}
