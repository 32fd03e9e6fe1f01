// Command crdt measures our Yjs codec (internal/yjs) against the real yjs (npm, e2e/yjs) in
// the same run, on the same inputs: e2e/yjs/bench.mjs times yjs on Node.js and writes its
// inputs (internal/testkit/yjstest), and this program does the same work with internal/yjs in-process,
// the same way (a warm-up run, then -runs runs each after a garbage collection, the median):
//
//   - replace: a doc loaded from original.update (untimed) made to hold edited.txt (a 1 MiB
//     text with 300 scattered edits): the diff, the transaction and the update it emits;
//   - apply10k: the 10,000 one-character updates of someone typing, applied one by one to a
//     fresh doc;
//   - loadEncode60k: the full update of a 60,000-transaction document loaded into a fresh doc,
//     then encoded whole;
//   - memPerDoc: the heap that 200 docs loaded from a 1,000-transaction document hold, per doc
//     (after a GC, before and after; Go's HeapAlloc, Node's heapUsed).
//
// Node and Go take turns for -rounds rounds, so that the machine's slower moments weigh on both;
// each side's figure is the median of its round medians. It prints a markdown table for
// docs/benchmarks.md, then every round's figures.
//
//	go run ./bench/crdt [-rounds 3] [-runs 7]
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/collab/collab/internal/testkit/yjstest"
	"github.com/collab/collab/internal/yjs"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds of Node then Go")
	runs := flag.Int("runs", 7, "measured runs of each task per round and side (at least 5, as bench.mjs)")
	flag.Parse()
	if err := run(*rounds, max(*runs, 5)); err != nil {
		log.Fatal(err)
	}
}

// result is one side's figures of one round: the median ns of each timed task, the heap bytes
// per doc, and the update sizes.
type result struct {
	replaceNs, replaceWholeNs, apply10kNs, loadEncodeNs float64
	memPerDoc                                           float64
	replaceBytes, replaceWholeBytes                     int
}

func run(rounds, runs int) error {
	dir, err := yjstest.BenchInputsDir()
	if err != nil {
		return err
	}
	in, err := readInputs(dir)
	if err != nil {
		return err
	}
	if err := in.check(); err != nil {
		return err
	}
	var ours, theirs []result
	var versions string
	for r := range rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d: yjs on Node...\n", r+1, rounds)
		y, v, err := runYjs(runs)
		if err != nil {
			return err
		}
		versions = v
		theirs = append(theirs, y)
		fmt.Fprintf(os.Stderr, "round %d of %d: internal/yjs...\n", r+1, rounds)
		ours = append(ours, in.measure(runs))
	}
	o, t := combine(ours), combine(theirs)

	fmt.Printf("%s; Go %s, GOMAXPROCS %d, %s/%s; %d rounds of %d runs (per round the median, then the median of the rounds)\n\n",
		versions, runtime.Version(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, rounds, runs)
	fmt.Println("| task | ours (internal/yjs) | yjs | yjs / ours |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| replace a 1 MiB Y.Text by an edited copy (yjs: simpleDiffString per changed line) | %s, update %s B | %s, update %s B | %.1f× |\n",
		ms(o.replaceNs), comma(o.replaceBytes), ms(t.replaceNs), comma(t.replaceBytes), t.replaceNs/o.replaceNs)
	fmt.Printf("| the same, yjs diffing the whole string at once (one big replacement) | | %s, update %s B | %.1f× |\n",
		ms(t.replaceWholeNs), comma(t.replaceWholeBytes), t.replaceWholeNs/o.replaceNs)
	fmt.Printf("| apply 10,000 small updates, one by one | %s (%s each) | %s (%s each) | %.1f× |\n",
		ms(o.apply10kNs), us(o.apply10kNs/10000), ms(t.apply10kNs), us(t.apply10kNs/10000), t.apply10kNs/o.apply10kNs)
	fmt.Printf("| load and encode a 60,000-operation document (%s B) | %s | %s | %.1f× |\n",
		comma(len(in.doc60k)), ms(o.loadEncodeNs), ms(t.loadEncodeNs), t.loadEncodeNs/o.loadEncodeNs)
	fmt.Printf("| memory per loaded document (1,000 operations, %s B update; 200 docs) | %s B | %s B | %.2f× |\n",
		comma(len(in.doc1k)), comma(int(o.memPerDoc)), comma(int(t.memPerDoc)), t.memPerDoc/o.memPerDoc)

	fmt.Println("\nrounds (replace / replace whole / apply10k / loadEncode60k / bytes per doc):")
	for i := range ours {
		for _, side := range []struct {
			name string
			r    result
		}{{"yjs ", theirs[i]}, {"ours", ours[i]}} {
			r := side.r
			whole := "-"
			if r.replaceWholeNs > 0 {
				whole = ms(r.replaceWholeNs)
			}
			fmt.Printf("  %d %s  %s / %s / %s / %s / %s\n", i+1, side.name, ms(r.replaceNs), whole, ms(r.apply10kNs), ms(r.loadEncodeNs), comma(int(r.memPerDoc)))
		}
	}
	return nil
}

// combine is the median of each figure over the rounds.
func combine(rs []result) result {
	m := func(f func(result) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	return result{
		replaceNs:         m(func(r result) float64 { return r.replaceNs }),
		replaceWholeNs:    m(func(r result) float64 { return r.replaceWholeNs }),
		apply10kNs:        m(func(r result) float64 { return r.apply10kNs }),
		loadEncodeNs:      m(func(r result) float64 { return r.loadEncodeNs }),
		memPerDoc:         m(func(r result) float64 { return r.memPerDoc }),
		replaceBytes:      rs[len(rs)-1].replaceBytes,
		replaceWholeBytes: rs[len(rs)-1].replaceWholeBytes,
	}
}

// runYjs runs bench.mjs and reads its report.
func runYjs(runs int) (result, string, error) {
	out, node, err := yjstest.RunBench(runs)
	if err != nil {
		return result{}, "", err
	}
	var rep struct {
		YJS, Lib0 string
		Results   struct {
			Replace1MiB, Replace1MiBWhole struct {
				MedianNs    float64 `json:"medianNs"`
				UpdateBytes int     `json:"updateBytes"`
			}
			Apply10k, LoadEncode60k struct {
				MedianNs float64 `json:"medianNs"`
			}
			MemPerDoc struct {
				BytesPerDoc float64 `json:"bytesPerDoc"`
			}
		}
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return result{}, "", fmt.Errorf("bench.mjs's report: %w\n%s", err, out)
	}
	rs := rep.Results
	if rs.Replace1MiB.MedianNs == 0 || rs.Apply10k.MedianNs == 0 || rs.LoadEncode60k.MedianNs == 0 || rs.MemPerDoc.BytesPerDoc == 0 {
		return result{}, "", fmt.Errorf("bench.mjs's report lacks results:\n%s", out)
	}
	return result{
		replaceNs: rs.Replace1MiB.MedianNs, replaceBytes: rs.Replace1MiB.UpdateBytes,
		replaceWholeNs: rs.Replace1MiBWhole.MedianNs, replaceWholeBytes: rs.Replace1MiBWhole.UpdateBytes,
		apply10kNs: rs.Apply10k.MedianNs, loadEncodeNs: rs.LoadEncode60k.MedianNs,
		memPerDoc: rs.MemPerDoc.BytesPerDoc,
	}, fmt.Sprintf("yjs %s (lib0 %s) on Node.js %s", rep.YJS, rep.Lib0, node), nil
}

// inputs are bench.mjs's inputs (bench.mjs --write).
type inputs struct {
	original, edited string
	originalUpdate   []byte
	apply10k         [][]byte
	doc60k, doc1k    []byte
}

func readInputs(dir string) (*inputs, error) {
	var errs []error
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		errs = append(errs, err)
		return b
	}
	in := &inputs{
		original:       string(read("original.txt")),
		edited:         string(read("edited.txt")),
		originalUpdate: read("original.update"),
		doc60k:         read("doc60k.update"),
		doc1k:          read("doc1k.update"),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(read("apply10k.json"), &in.apply10k); err != nil {
		return nil, fmt.Errorf("apply10k.json: %w", err)
	}
	return in, nil
}

func newDoc() *yjs.Doc { return yjs.NewDocWithClient(1000) }

func load(update []byte) *yjs.Doc {
	d := newDoc()
	if err := d.Apply(update); err != nil {
		log.Fatalf("loading an input: %v", err)
	}
	return d
}

// check makes sure each task gives the right result before anything is timed.
func (in *inputs) check() error {
	d := load(in.originalUpdate)
	if d.JSON("text", yjs.Text) != in.original {
		return errors.New("original.update does not hold original.txt")
	}
	u, err := d.Replace("text", yjs.Text, in.edited)
	if err != nil {
		return err
	}
	again := load(in.originalUpdate)
	if err := again.Apply(u); err != nil || again.JSON("text", yjs.Text) != in.edited {
		return fmt.Errorf("the replacement does not make the original hold edited.txt (%w)", err)
	}
	d = newDoc()
	for _, u := range in.apply10k {
		if err := d.Apply(u); err != nil {
			return err
		}
	}
	if n := len(utf16.Encode([]rune(d.JSON("text", yjs.Text).(string)))); n != len(in.apply10k) || d.Pending() {
		return fmt.Errorf("after the 10,000 updates the text has %d units (pending %v)", n, d.Pending())
	}
	d = load(in.doc60k)
	enc, err := d.Encode(nil)
	if err != nil {
		return err
	}
	e := load(enc)
	for _, r := range []struct {
		name string
		kind yjs.Kind
	}{{"text", yjs.Text}, {"map", yjs.Map}, {"array", yjs.Array}} {
		a, _ := json.Marshal(d.JSON(r.name, r.kind))
		b, _ := json.Marshal(e.JSON(r.name, r.kind))
		if string(a) != string(b) {
			return fmt.Errorf("doc60k: root %s differs after encoding and loading again", r.name)
		}
	}
	return nil
}

// measure times each task as bench.mjs does.
func (in *inputs) measure(runs int) result {
	var r result
	r.replaceNs = bench(runs, func() float64 {
		d := load(in.originalUpdate)
		runtime.GC()
		t0 := time.Now()
		u, err := d.Replace("text", yjs.Text, in.edited)
		ns := float64(time.Since(t0).Nanoseconds())
		if err != nil {
			log.Fatal(err)
		}
		r.replaceBytes = len(u)
		return ns
	})
	r.apply10kNs = bench(runs, func() float64 {
		d := newDoc()
		t0 := time.Now()
		for _, u := range in.apply10k {
			if err := d.Apply(u); err != nil {
				log.Fatal(err)
			}
		}
		return float64(time.Since(t0).Nanoseconds())
	})
	r.loadEncodeNs = bench(runs, func() float64 {
		t0 := time.Now()
		d := load(in.doc60k)
		if _, err := d.Encode(nil); err != nil {
			log.Fatal(err)
		}
		return float64(time.Since(t0).Nanoseconds())
	})
	var mem []float64
	for range max(5, min(runs, 7)) {
		const docs = 200
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept := make([]*yjs.Doc, 0, docs)
		for range docs {
			kept = append(kept, load(in.doc1k))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		mem = append(mem, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/docs) //nolint:gosec // G115: heap sizes are far below 2^63
		runtime.KeepAlive(kept)
	}
	r.memPerDoc = median(mem)
	return r
}

// bench runs measure once to warm up, then runs times after a GC each, and returns the median.
func bench(runs int, measure func() float64) float64 {
	measure()
	xs := make([]float64, runs)
	for i := range xs {
		runtime.GC()
		xs[i] = measure()
	}
	return median(xs)
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

func ms(ns float64) string { return fmt.Sprintf("%.2f ms", ns/1e6) }
func us(ns float64) string { return fmt.Sprintf("%.2f µs", ns/1e3) }

// comma writes n with thousands separators.
func comma(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
