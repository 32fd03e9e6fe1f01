package memory

import (
	"context"
	"errors"
	"fmt"
	"go.mongodb.org/mongo-driver/v2/bson"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/collab/collab/internal/testkit/mongotest"
)

func TestMain(m *testing.M) { os.Exit(mongotest.Run(m)) }

// The conformance suite: every Store implementation must pass it unchanged.
func TestMemoryStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return NewMemoryStore() })
}

func TestMongoStore(t *testing.T) {
	runStoreSuite(t, func(t *testing.T) Store { return newMongoStore(t) })
}

func newMongoStore(t *testing.T) *MongoStore {
	t.Helper()
	s, err := NewMongoStore(context.Background(), mongotest.Connect(t).Database("memory"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var bg = context.Background()

// judgment is a judgment of tenant k1, organization o1, with bag vectors of its texts.
func judgment(id, doc string, created int64) *Judgment {
	j := &Judgment{
		APIKey: "k1", OrganizationID: "o1", RecordID: id, DocumentID: doc, CreatedAt: created,
		Decision: "approve", Reasoning: "reason " + id, JudgeType: JudgeHuman, Content: "content " + id,
		Rev: "r-" + id, Embedder: "bag-8", Dim: 8,
	}
	j.ReviewVector, j.ContentVector = bagVector(reviewText(j), 8), bagVector(j.Content, 8)
	return j
}

func put(t *testing.T, s Store, js ...*Judgment) {
	t.Helper()
	for _, j := range js {
		if _, err := s.PutJudgment(bg, j); err != nil {
			t.Fatal(err)
		}
	}
}

// scan returns the sorted record ids the scope and filter select.
func scan(t *testing.T, s Store, sc Scope, f Filter) []string {
	t.Helper()
	var out []string
	if err := s.ScanJudgments(bg, sc, f, EmbedReview, func(j *Judgment) bool {
		out = append(out, j.RecordID)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func want(t *testing.T, what string, got []string, w ...string) {
	t.Helper()
	if len(got) == 0 && len(w) == 0 {
		return
	}
	if !slices.Equal(got, w) {
		t.Errorf("%s: %v, want %v", what, got, w)
	}
}

func i64(v int64) *int64 { return &v }

func runStoreSuite(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("PutCreatesThenReplaces", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		j := judgment("a", "d1", 5)
		c := 0.5
		j.Confidence = &c
		j.Agent = &Agent{ID: "ag", Name: "Reviewer", Version: 2}
		j.ActionUser = User{UserID: "u", Name: "Ada", Email: "ada@example.com"}
		created, err := s.PutJudgment(bg, j)
		if err != nil || !created {
			t.Fatalf("first put: created %v, %v", created, err)
		}
		var got *Judgment
		_ = s.ScanJudgments(bg, Scope{APIKey: "k1"}, Filter{}, EmbedContent, func(x *Judgment) bool { got = copyJudgment(x); return true })
		if got == nil || *got.Confidence != 0.5 || got.Agent.Version != 2 || got.ActionUser.Email != "ada@example.com" || got.Decision != "approve" ||
			!slices.Equal(got.ContentVector, j.ContentVector) || got.Embedder != "bag-8" || got.Dim != 8 {
			t.Fatalf("stored %+v", got)
		}
		j2 := judgment("a", "d2", 6)
		j2.Decision = "reject"
		if created, err := s.PutJudgment(bg, j2); err != nil || created {
			t.Fatalf("second put: created %v, %v", created, err)
		}
		want(t, "org", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{}), "a")
		want(t, "old document", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d1"}, Filter{}))
		want(t, "new document", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d2"}, Filter{Decision: "reject"}), "a")
	})

	t.Run("ScanScopesAndFilters", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a, b, c, d := judgment("a", "d1", 10), judgment("b", "d1", 20), judgment("c", "d2", 30), judgment("d", "", 40)
		b.Decision, b.JudgeType, b.Agent = "reject", JudgeAgent, &Agent{ID: "x"}
		c.ContentType, c.ReviewerID, c.AnnotationID = "text", "r1", "t1"
		other := judgment("e", "d1", 10)
		other.OrganizationID = "o2"
		tenant := judgment("f", "d1", 10)
		tenant.APIKey = "k2"
		put(t, s, a, b, c, d, other, tenant)
		want(t, "tenant", scan(t, s, Scope{APIKey: "k1"}, Filter{}), "a", "b", "c", "d", "e")
		want(t, "org", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{}), "a", "b", "c", "d")
		want(t, "doc", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d1"}, Filter{}), "a", "b")
		want(t, "unknown doc", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "zz"}, Filter{}))
		want(t, "decision", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{Decision: "reject"}), "b")
		want(t, "judgeType", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{JudgeType: JudgeHuman}), "a", "c", "d")
		want(t, "contentType", scan(t, s, Scope{APIKey: "k1"}, Filter{ContentType: "text"}), "c")
		want(t, "reviewer", scan(t, s, Scope{APIKey: "k1"}, Filter{ReviewerID: "r1"}), "c")
		want(t, "annotation", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{AnnotationID: "t1"}), "c")
		want(t, "since", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{Since: i64(20)}), "b", "c", "d")
		want(t, "until", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{Until: i64(20)}), "a", "b")
		want(t, "window", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1"}, Filter{Since: i64(20), Until: i64(30)}), "b", "c")
		// fn returning false stops the scan.
		n := 0
		if err := s.ScanJudgments(bg, Scope{APIKey: "k1"}, Filter{}, "", func(*Judgment) bool { n++; return false }); err != nil || n != 1 {
			t.Fatalf("stopped after %d, %v", n, err)
		}
		// The vector asked for comes back exactly.
		_ = s.ScanJudgments(bg, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d2"}, Filter{}, EmbedReview, func(j *Judgment) bool {
			if !slices.Equal(j.ReviewVector, c.ReviewVector) {
				t.Errorf("review vector %v, want %v", j.ReviewVector, c.ReviewVector)
			}
			return true
		})
	})

	t.Run("DeleteJudgments", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		other := judgment("a", "", 1)
		other.OrganizationID = "o2"
		put(t, s, judgment("a", "", 1), judgment("b", "d", 2), other)
		got, err := s.DeleteJudgments(bg, "k1", "o1", []string{"a", "missing", "b"})
		if err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("deleted %v, %v", got, err)
		}
		want(t, "left", scan(t, s, Scope{APIKey: "k1"}, Filter{}), "a") // o2's
		if got, _ := s.DeleteJudgments(bg, "k2", "o2", []string{"a"}); len(got) != 0 {
			t.Fatalf("another tenant deleted %v", got)
		}
	})

	t.Run("StaleAndSetVectors", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a, b := judgment("a", "", 1), judgment("b", "", 2)
		b.Embedder = "old"
		b.Content = ""
		b.ContentVector = nil
		put(t, s, a, b)
		if n, err := s.CountStale(bg, "bag-8", 0); err != nil || n != 1 {
			t.Fatalf("stale count %d, %v", n, err)
		}
		// Same name, another dimension (a remote model's server changed): stale too.
		if n, err := s.CountStale(bg, "bag-8", a.Dim+1); err != nil || n != 2 {
			t.Fatalf("stale count by dimension %d, %v", n, err)
		}
		if got, err := s.StaleJudgments(bg, "bag-8", a.Dim+1, 10, nil); err != nil || len(got) != 2 {
			t.Fatalf("stale by dimension %d, %v", len(got), err)
		}
		stale, err := s.StaleJudgments(bg, "bag-8", 0, 10, nil)
		if err != nil || len(stale) != 1 || stale[0].RecordID != "b" || stale[0].Reasoning != "reason b" {
			t.Fatalf("stale %v, %v", stale, err)
		}
		if err := s.SetVectors(bg, &Judgment{APIKey: "k1", OrganizationID: "o1", RecordID: "b", Rev: "wrong"}, "bag-8", a.ReviewVector, nil); !errors.Is(err, ErrChanged) {
			t.Fatalf("set vectors of another revision: %v", err)
		}
		if err := s.SetVectors(bg, stale[0], "bag-8", a.ReviewVector, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SetVectors(bg, stale[0], "bag-8", a.ReviewVector, nil); !errors.Is(err, ErrChanged) {
			t.Fatalf("set vectors twice from one read: %v", err)
		}
		if n, _ := s.CountStale(bg, "bag-8", 0); n != 0 {
			t.Fatalf("stale after re-embedding: %d", n)
		}
		_ = s.ScanJudgments(bg, Scope{APIKey: "k1"}, Filter{}, EmbedReview, func(j *Judgment) bool {
			if j.RecordID == "b" && (!slices.Equal(j.ReviewVector, a.ReviewVector) || j.Embedder != "bag-8" || j.Dim != 8) {
				t.Errorf("re-embedded %+v", j)
			}
			return true
		})
		if err := s.SetVectors(bg, &Judgment{APIKey: "k1", OrganizationID: "o1", RecordID: "gone", Rev: "x"}, "bag-8", a.ReviewVector, nil); !errors.Is(err, ErrChanged) {
			t.Fatalf("set vectors of a missing judgment: %v", err)
		}
	})

	t.Run("Executions", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		for i, e := range []*Execution{
			{ID: "e1", AgentID: "a1", OrganizationID: "o1", DocumentID: "d1", StartedAt: 10},
			{ID: "e2", AgentID: "a2", OrganizationID: "o1", StartedAt: 20},
			{ID: "e3", AgentID: "a1", OrganizationID: "o2", StartedAt: 20},
			{ID: "e4", AgentID: "a1", StartedAt: 30},
		} {
			e.APIKey, e.Status, e.AgentName, e.AgentVersion, e.Trigger = "k1", StatusRunning, "n", float64(i), "manual"
			if err := s.InsertExecution(bg, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.InsertExecution(bg, &Execution{APIKey: "k2", ID: "e1", StartedAt: 1, Status: StatusRunning}); err != nil {
			t.Fatal(err)
		}
		e, err := s.FinishExecution(bg, "k1", "e1", StatusPassed, "ok", 25)
		if err != nil || e.Status != StatusPassed || e.Message != "ok" || *e.CompletedAt != 25 || *e.DurationMs != 15 || e.AgentName != "n" {
			t.Fatalf("finish: %+v, %v", e, err)
		}
		if _, err := s.FinishExecution(bg, "k1", "e1", StatusFailed, "", 30); !errors.Is(err, ErrFinished) {
			t.Fatalf("finish twice: %v", err)
		}
		if _, err := s.FinishExecution(bg, "k1", "nope", StatusFailed, "", 30); !errors.Is(err, ErrNotFound) {
			t.Fatalf("finish missing: %v", err)
		}
		list := func(f ExecutionFilter, after *ExecutionPosition, desc bool, limit int) []string {
			es, err := s.ListExecutions(bg, "k1", f, after, desc, limit)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range es {
				out = append(out, e.ID)
			}
			return out
		}
		want(t, "asc", list(ExecutionFilter{}, nil, false, 0), "e1", "e2", "e3", "e4")
		want(t, "desc", list(ExecutionFilter{}, nil, true, 0), "e4", "e3", "e2", "e1")
		want(t, "limit", list(ExecutionFilter{}, nil, true, 2), "e4", "e3")
		want(t, "after asc", list(ExecutionFilter{}, &ExecutionPosition{20, "e2"}, false, 0), "e3", "e4")
		want(t, "after desc", list(ExecutionFilter{}, &ExecutionPosition{20, "e3"}, true, 0), "e2", "e1")
		want(t, "agent", list(ExecutionFilter{AgentID: "a1"}, nil, false, 0), "e1", "e3", "e4")
		want(t, "org", list(ExecutionFilter{OrganizationID: "o1"}, nil, false, 0), "e1", "e2")
		want(t, "doc", list(ExecutionFilter{DocumentID: "d1"}, nil, false, 0), "e1")
		want(t, "status", list(ExecutionFilter{Status: StatusRunning}, nil, false, 0), "e2", "e3", "e4")
		want(t, "nothing", list(ExecutionFilter{Status: StatusSkipped}, nil, false, 0))
		got, _ := s.ListExecutions(bg, "k1", ExecutionFilter{AgentID: "a2"}, nil, false, 0)
		if len(got) != 1 || got[0].CompletedAt != nil || got[0].DurationMs != nil || got[0].AgentVersion != 1 || got[0].Trigger != "manual" {
			t.Fatalf("running execution %+v", got[0])
		}
	})

	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		a, b, c, d := judgment("a", "d1", 1), judgment("b", "d1", 2), judgment("c", "d2", 3), judgment("d", "", 4)
		a.OrganizationGeneration, a.DocumentGeneration = "g1", "dg1"
		b.OrganizationGeneration, b.DocumentGeneration = "g0", "dg0" // an older incarnation
		c.OrganizationGeneration, c.DocumentGeneration = "g1", "dg2"
		put(t, s, a, b, c, d)
		for _, e := range []*Execution{
			{APIKey: "k1", ID: "x1", OrganizationID: "o1", OrganizationGeneration: "g1", DocumentID: "d1", DocumentGeneration: "dg1", Status: StatusRunning},
			{APIKey: "k1", ID: "x2", OrganizationID: "o1", OrganizationGeneration: "g1", DocumentID: "d2", DocumentGeneration: "dg2", Status: StatusRunning},
		} {
			if err := s.InsertExecution(bg, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.MoveDocument(bg, "k1", "o1", "d1", "d9", "dg1"); err != nil {
			t.Fatal(err)
		}
		want(t, "moved", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d9"}, Filter{}), "a")
		want(t, "left", scan(t, s, Scope{APIKey: "k1", OrganizationID: "o1", DocumentID: "d1"}, Filter{}), "b")
		es, _ := s.ListExecutions(bg, "k1", ExecutionFilter{DocumentID: "d9"}, nil, false, 0)
		if len(es) != 1 || es[0].ID != "x1" {
			t.Fatalf("moved executions %v", es)
		}
		if err := s.DeleteDocument(bg, "k1", "o1", "d2", "dg2"); err != nil {
			t.Fatal(err)
		}
		want(t, "after document deletion", scan(t, s, Scope{APIKey: "k1"}, Filter{}), "a", "b", "d")
		if es, _ := s.ListExecutions(bg, "k1", ExecutionFilter{}, nil, false, 0); len(es) != 1 {
			t.Fatalf("executions after document deletion: %d", len(es))
		}
		if err := s.DeleteOrganization(bg, "k1", "o1", "g1"); err != nil {
			t.Fatal(err)
		}
		want(t, "after organization deletion", scan(t, s, Scope{APIKey: "k1"}, Filter{}), "b") // d had no generation: gone too
		if es, _ := s.ListExecutions(bg, "k1", ExecutionFilter{}, nil, false, 0); len(es) != 0 {
			t.Fatalf("executions after organization deletion: %d", len(es))
		}
		for _, kind := range []string{KindOrganization, KindDocument} {
			if ok, err := s.Buried(bg, "k1", "o1", kind, "x", "g"); ok || err != nil {
				t.Fatalf("buried before: %v %v", ok, err)
			}
			for range 2 {
				if err := s.Bury(bg, "k1", "o1", kind, "x", "g"); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := s.Buried(bg, "k1", "o1", kind, "x", "g"); !ok || err != nil {
				t.Fatalf("buried after: %v %v", ok, err)
			}
		}
		if to, _ := s.MovedTo(bg, "k1", "o1", "d1", "dg1"); to != "" {
			t.Fatalf("moved before marking: %q", to)
		}
		if err := s.MarkMoved(bg, "k1", "o1", "d1", "dg1", "d9"); err != nil {
			t.Fatal(err)
		}
		if to, _ := s.MovedTo(bg, "k1", "o1", "d1", "dg1"); to != "d9" {
			t.Fatalf("moved to %q", to)
		}
	})

	// A repeated record id under concurrent writers leaves exactly one judgment, and exactly one
	// writer created it.
	t.Run("ConcurrentPutsOfOneRecord", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const writers, rounds = 12, 10
		for round := range rounds {
			id := fmt.Sprint("same", round)
			var wg sync.WaitGroup
			created := make(chan bool, writers)
			errs := make(chan error, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					j := judgment(id, "", int64(i))
					j.Reasoning = fmt.Sprint("writer ", i)
					c, err := s.PutJudgment(bg, j)
					created <- c
					errs <- err
				}()
			}
			wg.Wait()
			close(created)
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			for c := range created {
				if c {
					n++
				}
			}
			if n != 1 {
				t.Errorf("round %d: %d writers created the judgment, want 1", round, n)
			}
		}
		var want []string
		for round := range rounds {
			want = append(want, fmt.Sprint("same", round))
		}
		sort.Strings(want)
		if got := scan(t, s, Scope{APIKey: "k1"}, Filter{}); !slices.Equal(got, want) {
			t.Errorf("judgments %v, want one per record id", got)
		}
	})

	// Concurrent finishes of one execution: exactly one wins, the others see ErrFinished.
	t.Run("ConcurrentFinishes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const finishers, rounds = 12, 10
		statuses := []string{StatusPassed, StatusFailed, StatusError, StatusSkipped}
		for round := range rounds {
			id := fmt.Sprint("e", round)
			if err := s.InsertExecution(bg, &Execution{APIKey: "k1", ID: id, StartedAt: 1, Status: StatusRunning}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			results := make(chan error, finishers)
			for i := range finishers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.FinishExecution(bg, "k1", id, statuses[i%4], fmt.Sprint(i), int64(10+i))
					results <- err
				}()
			}
			wg.Wait()
			close(results)
			won := 0
			for err := range results {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrFinished):
					t.Fatal(err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d finishes won, want 1", round, won)
			}
		}
		es, _ := s.ListExecutions(bg, "k1", ExecutionFilter{}, nil, false, 0)
		for _, e := range es {
			if e.Status == StatusRunning || e.CompletedAt == nil || *e.DurationMs != *e.CompletedAt-1 {
				t.Fatalf("after the race: %+v", e)
			}
		}
	})

	runConcurrencySuite(t, newStore)
}

// A finished execution's marker (it holds the caller's message) goes with its organization's
// deletion and follows its document's migration, like the execution.
func TestMongoFinishMarkersFollowTheirExecution(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	for _, id := range []string{"x1", "x2"} {
		e := &Execution{APIKey: "k", ID: id, OrganizationID: "o", OrganizationGeneration: "og", DocumentID: "d", DocumentGeneration: "dg", AgentID: "a", Status: StatusRunning, StartedAt: 1}
		if err := s.InsertExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishExecution(ctx, "k", id, "passed", "secret words", 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MoveDocument(ctx, "k", "o", "d", "d2", "dg"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.finished.CountDocuments(ctx, bson.M{"documentId": "d2"}); err != nil || n != 2 {
		t.Fatalf("markers moved: %d, %v", n, err)
	}
	if err := s.DeleteOrganization(ctx, "k", "o", "og"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.finished.CountDocuments(ctx, bson.M{}); err != nil || n != 0 {
		t.Fatalf("%d finish markers outlived their organization (%v)", n, err)
	}
}

// Records a crash left under a buried generation (written, then the deletion came, and the
// writer never settled) are never read: not by searches' scans, not by execution lists.
func TestMongoRecordsUnderDeadGenerationsAreNotRead(t *testing.T) {
	s := newMongoStore(t)
	ctx := context.Background()
	for i, gen := range []string{"og-dead", "og-live"} {
		j := &Judgment{APIKey: "k", OrganizationID: fmt.Sprint("o", i), RecordID: "r", OrganizationGeneration: gen, Decision: "approve", Reasoning: "x", Embedder: "e"}
		if _, err := s.PutJudgment(ctx, j); err != nil {
			t.Fatal(err)
		}
		e := &Execution{APIKey: "k", ID: fmt.Sprint("x", i), OrganizationID: fmt.Sprint("o", i), OrganizationGeneration: gen, AgentID: "a", Status: StatusRunning, StartedAt: int64(i + 1)}
		if err := s.InsertExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// The deletion of o0's generation is recorded; its sweep never ran (the crash).
	if err := s.Bury(ctx, "k", "o0", KindOrganization, "o0", "og-dead"); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := s.ScanJudgments(ctx, Scope{APIKey: "k"}, Filter{}, "", func(j *Judgment) bool {
		seen = append(seen, j.OrganizationID)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"o1"}) {
		t.Fatalf("scan read %v", seen)
	}
	es, err := s.ListExecutions(ctx, "k", ExecutionFilter{}, nil, false, 1)
	if err != nil || len(es) != 1 || es[0].ID != "x1" {
		t.Fatalf("list read %v, %v", es, err)
	}
}
