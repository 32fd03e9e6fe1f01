package activity

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	activityv1 "github.com/collab/collab/proto/collab/activity/v1"

	"github.com/collab/collab/internal/authn"
)

const benchRecords = 1_000_000

var (
	benchOnce  sync.Once
	benchStore *MemoryStore
)

var benchFeatures = []string{"comment", "reaction", "recorder", "crdt", "custom"}

// benchTimestamp is record i's: 1 ms after the one before, except that every thousandth
// record shares the timestamp of the one before it, its id breaking the tie.
func benchTimestamp(i int) int64 {
	ts := int64(1_700_000_000_000 + i)
	if i%1000 == 999 {
		ts--
	}
	return ts
}

func benchID(i int) string { return fmt.Sprintf("a%07d", i) }

// benchData is one organization of a million records over 100 documents, 50 users and 5
// feature types, in (Timestamp, ID) order of i.
func benchData(b *testing.B) *MemoryStore {
	benchOnce.Do(func() {
		s := NewMemoryStore()
		docs, users, targets := make([]string, 100), make([]string, 50), make([]string, 500)
		for i := range docs {
			docs[i] = fmt.Sprintf("d%02d", i)
		}
		for i := range users {
			users[i] = fmt.Sprintf("u%02d", i)
		}
		for i := range targets {
			targets[i] = fmt.Sprintf("t%03d", i)
		}
		batch := make([]*Record, 0, 10_000)
		for i := range benchRecords {
			batch = append(batch, &Record{
				APIKey: "k1", OrganizationID: "o1", ID: benchID(i),
				OrganizationGeneration: "g1", DocumentID: docs[i%len(docs)], DocumentGeneration: "g1",
				FeatureType: benchFeatures[i%len(benchFeatures)], ActionType: "add",
				ActionUser:             User{UserID: users[i%len(users)], Name: "Ann", Email: "ann@example.com"},
				TargetEntityID:         targets[i%len(targets)],
				DisplayMessageTemplate: "{{user}} did something", DisplayMessageTemplateData: `{"user":"Ann"}`,
				Changes: `{"a":{"from":1,"to":2}}`, EntityData: `{"id":"e1"}`, ActionIcon: "icon",
				Timestamp: benchTimestamp(i),
			})
			if len(batch) == cap(batch) {
				if existing, err := s.Insert(context.Background(), batch); err != nil || len(existing) != 0 {
					panic(fmt.Sprint(existing, err))
				}
				batch = batch[:0]
			}
		}
		benchStore = s
		runtime.GC() // the building's garbage is not the first listing's to collect
	})
	return benchStore
}

func BenchmarkMemoryList(b *testing.B) {
	s := benchData(b)
	// Record 900,000 in descending order.
	deep := benchRecords - 1 - 900_000
	after := &Position{Timestamp: benchTimestamp(deep), ID: benchID(deep)}
	for _, c := range []struct {
		name  string
		f     Filter
		after *Position
		first string // the id the page must start with
	}{
		{"first page", Filter{}, nil, benchID(benchRecords - 1)},
		{"deep page", Filter{}, after, benchID(deep - 1)},
		// Document d42 holds records 42, 142, ...: the deep page starts at the last of them
		// before record 99,999.
		{"document/first page", Filter{DocumentID: "d42"}, nil, benchID(999_942)},
		{"document/deep page", Filter{DocumentID: "d42"}, after, benchID(99_942)},
		{"features/first page", Filter{FeatureTypes: []string{"recorder"}}, nil, benchID(999_997)},
		{"features/deep page", Filter{FeatureTypes: []string{"recorder"}}, after, benchID(99_997)},
	} {
		got, err := s.List(context.Background(), "k1", "o1", c.f, c.after, true, 1000)
		if err != nil || len(got) != 1000 || got[0].ID != c.first {
			b.Fatalf("%s: %d records from %v (%v), want 1000 from %s", c.name, len(got), idsOf(got[:min(1, len(got))]), err, c.first)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.List(context.Background(), "k1", "o1", c.f, c.after, true, 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetActivityLogs is the whole read of Get Activity Logs at the handler (checks, page
// token, store, records to messages) over the same million records, pages of 1000.
func BenchmarkGetActivityLogs(b *testing.B) {
	s := benchData(b)
	srv, err := New(s, &fakeDocs{}, make([]byte, 32), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})
	for _, c := range []struct {
		name string
		req  *activityv1.GetActivityLogsRequest
	}{
		{"no filter", &activityv1.GetActivityLogsRequest{OrganizationId: "o1"}},
		{"document", &activityv1.GetActivityLogsRequest{OrganizationId: "o1", DocumentId: "d42"}},
		{"feature type", &activityv1.GetActivityLogsRequest{OrganizationId: "o1", FeatureTypes: []string{"recorder"}}},
	} {
		// The token of the page 900,000 records deep: page through once to get it.
		first, err := srv.GetActivityLogs(ctx, c.req)
		if err != nil || len(first.GetData()) != 1000 {
			b.Fatalf("%s: %v", c.name, err)
		}
		deep := proto.Clone(c.req).(*activityv1.GetActivityLogsRequest)
		at := benchRecords - 1 - 900_000
		tok, err := srv.pages.Seal((&listing{org: "o1", filter: filterOf(c.req), desc: true}).scope("k1"), tokenPosition{Timestamp: benchTimestamp(at), ID: benchID(at)})
		if err != nil {
			b.Fatal(err)
		}
		deep.PageToken = tok
		if page, err := srv.GetActivityLogs(ctx, deep); err != nil || len(page.GetData()) != 1000 {
			b.Fatalf("%s deep: %v", c.name, err)
		}
		for _, p := range []struct {
			name string
			req  *activityv1.GetActivityLogsRequest
		}{{"first page", c.req}, {"deep page", deep}} {
			b.Run(c.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := srv.GetActivityLogs(ctx, p.req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func filterOf(req *activityv1.GetActivityLogsRequest) Filter {
	l, err := checkGet(req)
	if err != nil {
		panic(err)
	}
	return l.filter
}
