package activity

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

const benchRecords = 1_000_000

var (
	benchOnce  sync.Once
	benchStore *MemoryStore
)

var benchFeatures = []string{"comments", "reactions", "presence", "mentions", "tasks"}

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
		{"features/first page", Filter{FeatureTypes: []string{"presence"}}, nil, benchID(999_997)},
		{"features/deep page", Filter{FeatureTypes: []string{"presence"}}, after, benchID(99_997)},
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
