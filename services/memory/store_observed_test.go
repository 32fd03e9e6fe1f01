package memory

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/collab/collab/internal/storeobserve"
)

// The observed store keeps the memory store's own vector search (the server type-asserts for
// it) and observes it.
func TestObservedStoreKeepsVectorSearch(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := storeobserve.New("memory", storeobserve.Config{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	vs, ok := observeStore(NewMemoryStore(), o).(vectorSearcher)
	if !ok {
		t.Fatal("the observed memory store hides vectorSearcher")
	}
	if _, n, err := vs.SearchVectors(bg, Scope{APIKey: "k1"}, Filter{}, "review", "e", []float32{1, 0}, 3); err != nil || n != 0 {
		t.Fatalf("search: %d %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var searches uint64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == "SearchVectors" && labels["outcome"] == "ok" {
				searches += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if searches != 1 {
		t.Errorf("%d observed searches, want 1", searches)
	}
}
