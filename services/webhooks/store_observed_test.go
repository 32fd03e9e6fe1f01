package webhooks

import (
	"context"
	"flag"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/service"
)

// The module wraps its store in the observed one, which keeps the store's Backlogger: the
// queue's gauges, read through it at scrape time, are still there, and the reads are observed.
func TestModuleKeepsBacklogger(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := Module().Setup(service.NewFlags(flag.NewFlagSet("test", flag.ContinueOnError), func(string) string { return "" }))
	if _, err := build(context.Background(), service.Env{Log: slog.New(slog.DiscardHandler), Clock: clock.NewFake(t0), Metrics: reg}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "collab_webhook_pending_deliveries", "collab_webhook_due_lag_seconds"); err != nil || n != 2 {
		t.Fatalf("queue gauges: %d series, %v", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "collab_store_operation_seconds"); err != nil || n == 0 {
		t.Fatalf("store series: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var backlogs uint64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "Backlog" {
					backlogs += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if backlogs == 0 {
		t.Error("the scrape's Backlog call was not observed")
	}
}
