package memory

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	memoryv1 "github.com/collab/collab/proto/collab/memory/v1"
)

// Each call to the model is timed under its outcome, and the texts embedded are counted.
func TestEmbedMetrics(t *testing.T) {
	h := newHarness(t)
	m := h.srv.metrics
	if _, err := h.srv.RecordJudgments(k1, &memoryv1.RecordJudgmentsRequest{OrganizationId: "o",
		Judgments: []*memoryv1.NewJudgment{jdg("a", "approve", "fine"), jdg("b", "reject", "not fine")}}); err != nil {
		t.Fatal(err)
	}
	h.emb.failWith(errModelDown)
	if _, err := h.srv.SearchJudgments(k1, &memoryv1.SearchJudgmentsRequest{Query: "fine"}); err == nil {
		t.Fatal("searched with the model down")
	}
	if got := testutil.ToFloat64(m.texts); got != 2 {
		t.Errorf("embedded texts %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.seconds); n != 2 {
		t.Errorf("%d outcome series, want ok and error", n)
	}
}
