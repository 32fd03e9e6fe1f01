package yjs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/collab/collab/internal/testkit/yjstest"
	"github.com/collab/collab/internal/yjs"
)

// The benchmarks below do the work e2e/yjs/bench.mjs times with the npm yjs, on the same
// inputs (yjstest.BenchInputs), so the two compare; bench/crdt runs both and prints the ratios
// (docs/benchmarks.md). Each checks its result before it measures anything.

// benchInputs are bench.mjs's inputs, read once.
type benchInputs struct {
	original, edited string
	originalUpdate   []byte
	apply10k         [][]byte
	doc60k, doc1k    []byte
}

func loadBenchInputs(b *testing.B) benchInputs {
	b.Helper()
	dir := yjstest.BenchInputs(b)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	in := benchInputs{
		original:       string(read("original.txt")),
		edited:         string(read("edited.txt")),
		originalUpdate: read("original.update"),
		doc60k:         read("doc60k.update"),
		doc1k:          read("doc1k.update"),
	}
	if err := json.Unmarshal(read("apply10k.json"), &in.apply10k); err != nil {
		b.Fatal(err)
	}
	var manifest map[string]struct {
		UTF16Length int `json:"utf16Length"`
		Updates     int `json:"updates"`
		Bytes       int `json:"bytes"`
	}
	if err := json.Unmarshal(read("manifest.json"), &manifest); err != nil {
		b.Fatal(err)
	}
	check := func(what string, got, want int) {
		if got != want {
			b.Fatalf("bench inputs: %s is %d, the manifest says %d", what, got, want)
		}
	}
	check("original.txt's UTF-16 length", utf16Len(in.original), manifest["original.txt"].UTF16Length)
	check("edited.txt's UTF-16 length", utf16Len(in.edited), manifest["edited.txt"].UTF16Length)
	check("original.update's size", len(in.originalUpdate), manifest["original.update"].Bytes)
	check("apply10k.json's updates", len(in.apply10k), manifest["apply10k.json"].Updates)
	check("doc60k.update's size", len(in.doc60k), manifest["doc60k.update"].Bytes)
	check("doc1k.update's size", len(in.doc1k), manifest["doc1k.update"].Bytes)
	return in
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func loadDoc(b *testing.B, update []byte) *yjs.Doc {
	d := yjs.NewDocWithClient(1000)
	if err := d.Apply(update); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkReplace1MiB: a server replacing the 1 MiB text with its edited copy (bench.mjs's
// replace1MiB): the diff, the transaction and the update it emits. The doc is loaded from
// original.update outside the timer.
func BenchmarkReplace1MiB(b *testing.B) {
	in := loadBenchInputs(b)
	// The result is right: the update makes yjs's original doc hold the edited text.
	d := loadDoc(b, in.originalUpdate)
	u, err := d.Replace("text", yjs.Text, in.edited)
	if err != nil {
		b.Fatal(err)
	}
	if got := d.JSON("text", yjs.Text); got != in.edited {
		b.Fatal("the replaced text differs from edited.txt")
	}
	check := loadDoc(b, in.originalUpdate)
	if err := check.Apply(u); err != nil || check.JSON("text", yjs.Text) != in.edited {
		b.Fatalf("the update does not make the original hold edited.txt (%v)", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := loadDoc(b, in.originalUpdate)
		runtime.GC()
		b.StartTimer()
		if _, err := d.Replace("text", yjs.Text, in.edited); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(u)), "update-bytes")
}

// BenchmarkApply10k applies the 10,000 one-character updates of someone typing, one by one,
// to a fresh doc (bench.mjs's apply10k); an op is all 10,000.
func BenchmarkApply10k(b *testing.B) {
	in := loadBenchInputs(b)
	d := yjs.NewDocWithClient(1000)
	for _, u := range in.apply10k {
		if err := d.Apply(u); err != nil {
			b.Fatal(err)
		}
	}
	if n := utf16Len(d.JSON("text", yjs.Text).(string)); n != len(in.apply10k) || d.Pending() {
		b.Fatalf("after the updates the text has %d UTF-16 units (pending %v), want %d", n, d.Pending(), len(in.apply10k))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := yjs.NewDocWithClient(1000)
		for _, u := range in.apply10k {
			if err := d.Apply(u); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in.apply10k)), "ns/update")
}

// BenchmarkApplyUntrusted10k is BenchmarkApply10k through ApplyUntrusted under live sync's
// limits, as a room applies its clients' updates: what the journal (to undo a refusal), the
// work count and the size bounds cost each keystroke.
func BenchmarkApplyUntrusted10k(b *testing.B) {
	in := loadBenchInputs(b)
	lim := yjs.Limits{MaxEncoded: 5 << 20, MaxSize: 64 << 20}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := yjs.NewDocWithClient(1000)
		for _, u := range in.apply10k {
			if _, err := d.ApplyUntrusted(context.Background(), u, lim); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in.apply10k)), "ns/update")
}

// BenchmarkLoadEncode60k loads the full update of a 60,000-transaction document into a fresh
// doc and encodes it whole (bench.mjs's loadEncode60k).
func BenchmarkLoadEncode60k(b *testing.B) {
	in := loadBenchInputs(b)
	d := loadDoc(b, in.doc60k)
	enc, err := d.Encode(nil)
	if err != nil {
		b.Fatal(err)
	}
	// What we encode loads as the same document (yjs's own encoding is checked against ours in
	// TestConformance).
	again := loadDoc(b, enc)
	for _, r := range []struct {
		name string
		kind yjs.Kind
	}{{"text", yjs.Text}, {"map", yjs.Map}, {"array", yjs.Array}} {
		g, w := jsonOf(b, again.JSON(r.name, r.kind)), jsonOf(b, d.JSON(r.name, r.kind))
		if !bytes.Equal(g, w) {
			b.Fatalf("root %s differs after encoding and loading again", r.name)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := yjs.NewDocWithClient(1000)
		if err := d.Apply(in.doc60k); err != nil {
			b.Fatal(err)
		}
		if _, err := d.Encode(nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(in.doc60k)), "update-bytes")
}

func jsonOf(b *testing.B, v any) []byte {
	out, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkMemoryPerDoc loads 200 docs from the 1,000-transaction document and reports the
// heap they hold, per doc (bench.mjs's memPerDoc: the heap after a GC, before and after,
// the docs kept alive). The time per op is that of loading 200 docs.
func BenchmarkMemoryPerDoc(b *testing.B) {
	const docs = 200
	in := loadBenchInputs(b)
	var perDoc []float64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		kept := make([]*yjs.Doc, 0, docs)
		for k := 0; k < docs; k++ {
			d := yjs.NewDocWithClient(1000)
			if err := d.Apply(in.doc1k); err != nil {
				b.Fatal(err)
			}
			kept = append(kept, d)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perDoc = append(perDoc, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/docs)
		runtime.KeepAlive(kept)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(median(perDoc), "heap-bytes/doc")
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkApplyManyClients applies 1,000 one-character updates to a document that 1,000
// other clients have edited before (every browser session is a new client): an update costs
// what it touches, not the number of clients the document has seen.
func BenchmarkApplyManyClients(b *testing.B) {
	base := yjs.NewDocWithClient(1)
	for c := range 1000 {
		w := yjs.NewDocWithClient(uint64(100 + c))
		u, err := w.Replace("map", yjs.Map, map[string]any{fmt.Sprint("k", c%10): float64(c)})
		if err != nil {
			b.Fatal(err)
		}
		if err := base.Apply(u); err != nil {
			b.Fatal(err)
		}
	}
	full, err := base.Encode(nil)
	if err != nil {
		b.Fatal(err)
	}
	w := yjs.NewDocWithClient(5000)
	var updates [][]byte
	var text strings.Builder
	for range 1000 {
		text.WriteByte('y')
		u, err := w.Replace("text", yjs.Text, text.String())
		if err != nil {
			b.Fatal(err)
		}
		updates = append(updates, u)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := loadDoc(b, full)
		b.StartTimer()
		for _, u := range updates {
			if err := d.Apply(u); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(updates)), "ns/update")
}
