package comments

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/protobuf/proto"

	commentsv1 "github.com/collab/collab/proto/collab/comments/v1"

	"github.com/collab/collab/internal/testkit/mongotest"
)

// The speed goals of issue 24 (docs/benchmarks.md, "Comments (issue 24)"): a page of Get
// Comment Annotations costs the same at any depth of a document of 100,000 threads, under
// 10 ms in the store; Count for 30 documents of 10,000 threads each under 5 ms.

// benchRef is a benchmark document, under the generations fakeDocs gives it, so the server
// finds what the benchmarks put in the store.
func benchRef(doc string) Ref {
	return Ref{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: doc, DocGen: "dg-" + doc}
}

// benchThread is thread i of a document (its id unique in the organization): four threads a
// millisecond (so the order's ties are broken by id), every third one resolved, one comment,
// read by benchReader when i%3 == 1.
func benchThread(r Ref, i int) *Annotation {
	author := fmt.Sprintf("u%02d", i%50)
	a := &Annotation{
		Ref: r, ID: fmt.Sprintf("%s-t%06d", r.DocumentID, i), From: User{UserID: author, Name: "User " + author},
		Status:   defaultStatus,
		Comments: []Comment{{ID: 1, Text: "A comment of about sixty bytes, as most comments are.", From: User{UserID: author}}},
		Authors:  []string{author}, LastCommentID: 1, Version: 1,
		CreatedAt: 1_700_000_000_000 + int64(i/4), LastUpdated: 1_700_000_000_000 + int64(i/4),
	}
	if i%3 == 0 {
		a.Status = Status{ID: "DONE", Name: "Done", Type: statusTerminal}
	}
	if i%3 == 1 {
		a.ReadBy = []string{benchReader}
	}
	a.Bytes = contentBytes(a)
	return a
}

const benchReader = "reader"

// fillMemory puts n threads in each document through the store's own Insert and MarkRead.
func fillMemory(b *testing.B, st Store, docs []Ref, n int) {
	b.Helper()
	ctx := context.Background()
	for _, r := range docs {
		var read []string
		for i := range n {
			a := benchThread(r, i)
			if len(a.ReadBy) > 0 {
				read = append(read, a.ID)
			}
			a.ReadBy = nil
			if err := st.Insert(ctx, a, MaxThreadsPerDocument); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := st.MarkRead(ctx, r, benchReader, read); err != nil {
			b.Fatal(err)
		}
	}
}

// benchThreads is how many threads the FerretDB benchmarks put in a document:
// COLLAB_BENCH_THREADS, else def.
func benchThreads(b *testing.B, def int) int {
	b.Helper()
	if v := os.Getenv("COLLAB_BENCH_THREADS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("COLLAB_BENCH_THREADS=%q: want a positive number", v)
		}
		return n
	}
	return def
}

// fillMongo writes n threads in each document straight into the store's collections, 1,000 a
// request, with the counts the store keeps for them (the total and the reader's reads): Store.Insert takes two round trips a
// thread (BenchmarkMongoInsert measures it), too slow for 100,000.
func fillMongo(b *testing.B, st *MongoStore, docs []Ref, n int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	defer func() {
		d := time.Since(start)
		b.Logf("filled %d documents of %d threads in %v: %.0f threads/s", len(docs), n, d.Round(time.Millisecond), float64(len(docs)*n)/d.Seconds())
	}()
	for _, r := range docs {
		batch := make([]any, 0, 1000)
		flush := func() {
			if len(batch) == 0 {
				return
			}
			if _, err := st.annotations.InsertMany(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		read := 0
		for i := range n {
			a := benchThread(r, i)
			read += len(a.ReadBy)
			batch = append(batch, annotationDoc{Key: annotationKey(r.APIKey, r.OrganizationID, r.OrgGen, a.ID), Annotation: a})
			if len(batch) == cap(batch) {
				flush()
			}
		}
		flush()
		for key, count := range map[string]int{countKey(r): n, readCountKey(r, benchReader): read} {
			if _, err := st.counts.UpdateOne(ctx, bson.M{"_id": key}, bson.M{"$set": bson.M{"n": count}}, options.UpdateOne().SetUpsert(true)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func newBenchMongo(b *testing.B) *MongoStore {
	b.Helper()
	st, err := NewMongoStore(context.Background(), mongotest.Connect(b).Database("comments"))
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkList lists a page of one document of 100,000 threads on the memory store: the first
// page and one 50,000 threads deep, newest first (desc) and oldest first (asc), pages of 100
// and 1,000. A keyset page's cost does not depend on its depth.
func BenchmarkList(b *testing.B) {
	const n = 100_000
	st := NewMemoryStore()
	r := benchRef("d")
	fillMemory(b, st, []Ref{r}, n)
	benchList(b, st, r, n, 50_000)
}

// BenchmarkMongoList is BenchmarkList on the embedded FerretDB, with COLLAB_BENCH_THREADS
// threads (10,000 unless set) and the deep page half way down.
func BenchmarkMongoList(b *testing.B) {
	n := benchThreads(b, 10_000)
	st := newBenchMongo(b)
	r := benchRef("d")
	fillMongo(b, st, []Ref{r}, n)
	benchList(b, st, r, n, n/2)
}

// benchList runs the page benchmarks on a document of n threads (benchThread), the deep pages
// starting after depth threads; each checks the page it got starts where it must.
func benchList(b *testing.B, st Store, r Ref, n, depth int) {
	ctx := context.Background()
	f := Filter{Documents: []Ref{r}}
	pos := func(i int) *Position { a := benchThread(r, i); return &Position{LastUpdated: a.LastUpdated, ID: a.ID} }
	for _, size := range []int{100, 1000} {
		for _, o := range []struct {
			name          string
			desc          bool
			deep          *Position
			first, second int // the indexes of the first threads of the first page and the deep one
		}{
			{"desc", true, pos(n - depth), n - 1, n - depth - 1},
			{"asc", false, pos(depth - 1), 0, depth},
		} {
			page := func(b *testing.B, after *Position, from int) func() {
				return func() {
					got, err := st.List(ctx, f, after, o.desc, size)
					if err != nil || len(got) != size || got[0].ID != benchThread(r, from).ID {
						b.Fatalf("a page of %d (%v), want %d from %s", len(got), err, size, benchThread(r, from).ID)
					}
				}
			}
			name := fmt.Sprintf("%s/size=%d", o.name, size)
			pages(b, name, func(b *testing.B) (first, deep func()) {
				return page(b, nil, o.first), page(b, o.deep, o.second)
			})
		}
	}
}

// pages runs three benchmarks of a first page and a deep one: each alone, and both, one after
// the other (in turns, each first half of the time), reporting each one's mean time and their
// ratio: measured side by side, the machine's load weighs on both alike.
func pages(b *testing.B, name string, calls func(b *testing.B) (first, deep func())) {
	b.Run(name+"/first", func(b *testing.B) {
		first, _ := calls(b)
		first()
		b.ReportAllocs()
		for b.Loop() {
			first()
		}
	})
	b.Run(name+"/deep", func(b *testing.B) {
		_, deep := calls(b)
		deep()
		b.ReportAllocs()
		for b.Loop() {
			deep()
		}
	})
	b.Run(name+"/both", func(b *testing.B) {
		first, deep := calls(b)
		var tFirst, tDeep time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if i%2 == 0 {
				first()
				t1 := time.Now()
				deep()
				tFirst, tDeep = tFirst+t1.Sub(t0), tDeep+time.Since(t1)
			} else {
				deep()
				t1 := time.Now()
				first()
				tDeep, tFirst = tDeep+t1.Sub(t0), tFirst+time.Since(t1)
			}
			i++
		}
		b.ReportMetric(float64(tFirst.Nanoseconds())/float64(b.N), "first-ns/op")
		b.ReportMetric(float64(tDeep.Nanoseconds())/float64(b.N), "deep-ns/op")
		b.ReportMetric(float64(tDeep)/float64(tFirst), "deep/first")
	})
}

// BenchmarkGetCommentAnnotations is the whole server path of Get Comment Annotations (a
// backend's K call: documents resolved by a fake client, the store listed, the page turned
// into protobuf, the next page's token sealed) on a memory store of 100,000 threads: the first
// page and the page after 50 pages of 1,000 (its token made by walking there), of 100 and
// 1,000 threads.
func BenchmarkGetCommentAnnotations(b *testing.B) {
	const n = 100_000
	st := NewMemoryStore()
	fillMemory(b, st, []Ref{benchRef("d")}, n)
	s, _ := newServer(b, st)
	get := func(size int32, tok string) *commentsv1.GetCommentAnnotationsResponse {
		res, err := s.GetCommentAnnotations(k1, &commentsv1.GetCommentAnnotationsRequest{OrganizationId: "o", DocumentId: "d", PageSize: proto.Int32(size), PageToken: tok})
		if err != nil || int32(len(res.GetData())) != size {
			b.Fatalf("a page of %d (%v), want %d", len(res.GetData()), err, size)
		}
		return res
	}
	deepToken := ""
	for range 50 {
		deepToken = get(1000, deepToken).GetPageToken()
	}
	for _, size := range []int32{100, 1000} {
		pages(b, fmt.Sprintf("size=%d", size), func(*testing.B) (first, deep func()) {
			return func() { get(size, "") }, func() { get(size, deepToken) }
		})
	}
}

// benchDocs are the documents of the Count benchmarks.
func benchDocs(n int) []Ref {
	docs := make([]Ref, n)
	for i := range docs {
		docs[i] = benchRef(fmt.Sprintf("d%02d", i))
	}
	return docs
}

// BenchmarkCount counts 30 documents of 10,000 threads each on the memory store: the totals,
// the totals with a user's unread (a third of the threads read by the user), and both in a
// status (two thirds of the threads).
func BenchmarkCount(b *testing.B) {
	docs := benchDocs(30)
	st := NewMemoryStore()
	fillMemory(b, st, docs, 10_000)
	benchCount(b, st, docs, 10_000, true)
}

// BenchmarkMongoCount is BenchmarkCount on the embedded FerretDB, with COLLAB_BENCH_THREADS
// threads a document (1,000 unless set).
func BenchmarkMongoCount(b *testing.B) {
	n := benchThreads(b, 1_000)
	docs := benchDocs(30)
	st := newBenchMongo(b)
	fillMongo(b, st, docs, n)
	benchCount(b, st, docs, n, false)
}

// benchCount runs the Count benchmarks on documents of n threads each (benchThread), also in
// a status when statuses; each checks the counts it got.
func benchCount(b *testing.B, st Store, docs []Ref, n int, statuses bool) {
	ctx := context.Background()
	cases := []struct {
		name, user string
		statusIDs  []string
	}{{"total", "", nil}, {"unread", benchReader, nil}}
	if statuses {
		cases = append(cases, struct {
			name, user string
			statusIDs  []string
		}{"unread-in-status", benchReader, []string{"OPEN"}})
	}
	for _, c := range cases {
		wantTotal, wantUnread := 0, 0
		for i := range n {
			a := benchThread(docs[0], i)
			if len(c.statusIDs) == 0 || slices.Contains(c.statusIDs, a.Status.ID) {
				wantTotal++
				if c.user != "" && !slices.Contains(a.ReadBy, c.user) {
					wantUnread++
				}
			}
		}
		b.Run(c.name, func(b *testing.B) {
			check := func(total, unread []int, err error) {
				if err != nil || len(total) != len(docs) || total[0] != wantTotal || total[len(docs)-1] != wantTotal ||
					unread[0] != wantUnread || unread[len(docs)-1] != wantUnread {
					b.Fatalf("totals %v unread %v (%v), want %d and %d each", total, unread, err, wantTotal, wantUnread)
				}
			}
			check(st.Count(ctx, docs, c.statusIDs, c.user))
			b.ReportAllocs()
			for b.Loop() {
				check(st.Count(ctx, docs, c.statusIDs, c.user))
			}
		})
	}
}

// BenchmarkCountCommentAnnotations is the whole server path of Count Comment Annotations for
// 30 documents of 10,000 threads each on the memory store, with a user's unread.
func BenchmarkCountCommentAnnotations(b *testing.B) {
	docs := benchDocs(30)
	st := NewMemoryStore()
	fillMemory(b, st, docs, 10_000)
	s, _ := newServer(b, st)
	req := &commentsv1.CountCommentAnnotationsRequest{OrganizationId: "o", UserId: benchReader}
	for _, d := range docs {
		req.DocumentIds = append(req.DocumentIds, d.DocumentID)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.CountCommentAnnotations(k1, req)
		if err != nil || res.GetData()["d00"].GetTotal() != 10_000 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkMongoInsert adds threads one by one through Store.Insert on the embedded FerretDB
// (a place taken in the document's count, then the insert): its rate is how fast a document
// fills through the API.
func BenchmarkMongoInsert(b *testing.B) {
	st := newBenchMongo(b)
	r := benchRef("d")
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := st.Insert(ctx, benchThread(r, i), MaxThreadsPerDocument); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
