package yjstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decodeStateVector decodes an encoded state vector (varuint count, then varuint client and
// clock pairs) for the tests' own cross-checks.
func decodeStateVector(t *testing.T, b []byte) map[string]uint64 {
	t.Helper()
	r := bytes.NewReader(b)
	read := func() uint64 {
		var v uint64
		for shift := 0; ; shift += 7 {
			c, err := r.ReadByte()
			if err != nil || shift > 63 {
				t.Fatalf("bad state vector %x", b)
			}
			v |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return v
			}
		}
	}
	n := read()
	out := map[string]uint64{}
	for i := uint64(0); i < n; i++ {
		client := read()
		out[strconv.FormatUint(client, 10)] = read()
	}
	if r.Len() != 0 {
		t.Fatalf("state vector %x has %d bytes left over", b, r.Len())
	}
	return out
}

func mustEqual(t *testing.T, what string, got, want View) {
	t.Helper()
	if ok, diff := ViewEqual(got, want); !ok {
		t.Fatalf("%s: views differ: %s", what, diff)
	}
}

// TestFixtures checks the generated fixtures against a second reading by yjs: loading "full"
// gives "expected" with nothing pending, the state vectors agree, applying the updates one by
// one and loading their merge give the same view, and fixtures.mjs is deterministic.
func TestFixtures(t *testing.T) {
	dir := Fixtures(t)
	if again := Fixtures(t); again != dir {
		t.Fatalf("Fixtures gave %s, then %s", dir, again)
	}
	fixtures := LoadFixtures(t, dir)
	if len(fixtures) < 300+8+1 {
		t.Fatalf("%d fixtures in %s, want the 300 traces, the edge cases and large", len(fixtures), dir)
	}
	large := fixtures[len(fixtures)-1]
	if large.Name != "large" || len(large.Updates) < 40000 {
		t.Fatalf("the last fixture is %s with %d updates, want large with at least 40000", large.Name, len(large.Updates))
	}
	seen := map[string]bool{}
	for _, f := range fixtures {
		seen[f.Name] = true
	}
	for _, name := range []string{"trace-0000", "trace-0299", "edge-empty", "edge-only-deletes", "edge-map-only",
		"edge-unicode", "edge-format-span", "edge-long-string", "edge-subdoc-hook"} {
		if !seen[name] {
			t.Errorf("no fixture %s", name)
		}
	}
	gcModes := map[string]int{}
	for _, f := range fixtures {
		gcModes[f.GC]++
	}
	if gcModes["on"] == 0 || gcModes["off"] == 0 || gcModes["mixed"] == 0 {
		t.Errorf("gc modes of the fixtures: %v, want each of on, off and mixed", gcModes)
	}

	c := StartChecker(t)
	for _, f := range fixtures {
		view, full, pending, err := c.Load(f.Full, f.Roots)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if pending {
			t.Errorf("%s: loading full leaves structs pending", f.Name)
		}
		mustEqual(t, f.Name+": Load(full) against expected", view, f.Expected)
		if len(full) == 0 {
			t.Fatalf("%s: Load returned no full update", f.Name)
		}
		sv := decodeStateVector(t, f.StateVector)
		if ok, diff := ViewEqual(View{StateVector: sv}, View{StateVector: f.Expected.StateVector}); !ok {
			t.Fatalf("%s: the encoded state vector and the expected view's differ: %s", f.Name, diff)
		}
		sv2, err := c.StateVectorOfDoc(f.Full)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sv2, f.StateVector) {
			t.Errorf("%s: StateVectorOfDoc(full) = %x, the fixture has %x", f.Name, sv2, f.StateVector)
		}
		// Applying the updates one by one (the large fixture's 40,000 too) ends in the same view.
		view, err = c.Apply(nil, f.Updates, f.Roots)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		mustEqual(t, f.Name+": Apply(updates) against expected", view, f.Expected)
		if f.Name == "large" || len(f.Updates) == 0 {
			continue // merging 40,000 updates takes yjs minutes
		}
		merged, err := c.Merge(f.Updates)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		view, _, pending, err = c.Load(merged, f.Roots)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if pending {
			t.Errorf("%s: the merged updates leave structs pending", f.Name)
		}
		mustEqual(t, f.Name+": Load(Merge(updates)) against expected", view, f.Expected)
	}

	// The same arguments give the same files, byte for byte.
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := runNode(env, 2*time.Minute, "fixtures.mjs", d, "--count", "20", "--seed", "77", "--large-ops", "0"); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(a, "*.json"))
	if len(files) != 20+len(fixtures)-301 {
		t.Fatalf("fixtures.mjs --count 20 --large-ops 0 wrote %d files, want 20 traces and the edge cases", len(files))
	}
	for _, fa := range files {
		ba, _ := os.ReadFile(fa)
		bb, err := os.ReadFile(filepath.Join(b, filepath.Base(fa)))
		if err != nil || !bytes.Equal(ba, bb) {
			t.Fatalf("fixtures.mjs wrote different %s on a second run with the same seed", filepath.Base(fa))
		}
	}
	// And a different seed other traces.
	first, _ := os.ReadFile(filepath.Join(a, "trace-0000.json"))
	if bytes.Equal(first, mustRead(t, filepath.Join(dir, "trace-0000.json"))) {
		t.Fatal("seeds 1 and 77 gave the same trace-0000")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixtureContent checks that the fixtures hold what they are for: the value kinds of the
// view, several clients, GC'd and kept deletions, surrogate-pair splits.
func TestFixtureContent(t *testing.T) {
	fixtures := LoadFixtures(t, Fixtures(t))
	all := map[string]bool{}
	var joined strings.Builder
	for _, f := range fixtures {
		b, err := json.Marshal(f.Expected)
		if err != nil {
			t.Fatal(err)
		}
		joined.Write(b)
		if strings.HasPrefix(f.Name, "trace-") {
			if len(f.Clients) < 2 || len(f.Clients) > 5 {
				t.Errorf("%s has %d clients, want 2 to 5", f.Name, len(f.Clients))
			}
			if len(f.Expected.StateVector) == 0 {
				t.Errorf("%s: empty state vector", f.Name)
			}
		}
		for _, c := range f.Clients {
			switch {
			case c >= 1<<32-300:
				all["big client"] = true
			case c < 300:
				all["small client"] = true
			}
		}
	}
	s := joined.String()
	for _, want := range []string{`"$bytes"`, `"$undefined"`, `"$bigint"`, `"$number"`, `"$doc"`, `"$type"`,
		`[object Object]`, "\ufffd", `"image"`, `"bold":true`, `color 0=\"#\"`} {
		if !strings.Contains(s, want) {
			t.Errorf("no fixture's view has %s", want)
		}
	}
	for _, want := range []string{"big client", "small client"} {
		if !all[want] {
			t.Errorf("no fixture has a %s", want)
		}
	}
	byName := map[string]Fixture{}
	for _, f := range fixtures {
		byName[f.Name] = f
	}
	if got := byName["edge-empty"].Expected.JSON["text"]; got != "" {
		t.Errorf("edge-empty's text is %v", got)
	}
	if m := byName["edge-map-only"].Expected.JSON; len(m) != 1 || m["map"] == nil {
		t.Errorf("edge-map-only's view has roots %v", m)
	}
	if text, _ := byName["edge-long-string"].Expected.JSON["text"].(string); len(text) < 190000 {
		t.Errorf("edge-long-string's text is %d bytes", len(text))
	}
}

// TestLoadPending: a delete-only update of content the doc has never seen stays pending.
func TestLoadPending(t *testing.T) {
	var f Fixture
	for _, g := range LoadFixtures(t, Fixtures(t)) {
		if g.Name == "edge-only-deletes" {
			f = g
		}
	}
	if len(f.Updates) < 2 {
		t.Fatalf("edge-only-deletes has %d updates", len(f.Updates))
	}
	c := StartChecker(t)
	last := f.Updates[len(f.Updates)-1]
	_, _, pending, err := c.Load(last, f.Roots)
	if err != nil {
		t.Fatal(err)
	}
	if !pending {
		t.Fatal("loading only the deleting update: nothing pending, want its deletions pending")
	}
	view, _, pending, err := c.Load(f.Updates[0], f.Roots)
	if err != nil || pending {
		t.Fatalf("loading the first update: pending %v, %v", pending, err)
	}
	if view.JSON["text"] != "all of this goes away" {
		t.Fatalf("after the first update the text is %v", view.JSON["text"])
	}
	view, err = c.Apply(f.Updates[0], [][]byte{last}, f.Roots)
	if err != nil {
		t.Fatal(err)
	}
	if view.JSON["text"] != "" {
		t.Fatalf("after the deletes the text is %q", view.JSON["text"])
	}
}

// TestEdit: the updates Edit returns, applied to the base, give the view it returns; they come
// from the given client; the same seed gives the same updates.
func TestEdit(t *testing.T) {
	fixtures := LoadFixtures(t, Fixtures(t))
	c := StartChecker(t)
	for i, f := range fixtures {
		if i%40 != 0 && f.Name != "edge-empty" {
			continue
		}
		updates, view, err := c.EditAs(f.Full, f.Roots, int64(i), 25, 424242)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if len(updates) != 25 {
			t.Fatalf("%s: Edit made %d updates, want 25", f.Name, len(updates))
		}
		if view.StateVector["424242"] == 0 {
			t.Fatalf("%s: the edited view's state vector %v lacks client 424242", f.Name, view.StateVector)
		}
		applied, err := c.Apply(f.Full, updates, f.Roots)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		mustEqual(t, f.Name+": Apply(base, Edit's updates) against Edit's view", applied, view)
		if ok, _ := ViewEqual(view, f.Expected); ok {
			t.Fatalf("%s: 25 edits left the view unchanged", f.Name)
		}
		again, view2, err := c.EditAs(f.Full, f.Roots, int64(i), 25, 424242)
		if err != nil {
			t.Fatal(err)
		}
		for k := range updates {
			if !bytes.Equal(updates[k], again[k]) {
				t.Fatalf("%s: Edit with the same seed gave a different update %d", f.Name, k)
			}
		}
		mustEqual(t, f.Name+": the same edits again", view2, view)
	}
	// Without a client ID one is drawn from the seed.
	updates, view, err := c.Edit(nil, StandardRoots, 9, 3)
	if err != nil || len(updates) != 3 || len(view.StateVector) != 1 {
		t.Fatalf("Edit(nil, ..., 9, 3) = %d updates, state vector %v, %v", len(updates), view.StateVector, err)
	}
}

// TestDiffAndStateVectors: a diff against the state vector of a prefix of the updates completes
// that prefix into the final document; the state vector from an update matches the doc's when
// nothing is missing.
func TestDiffAndStateVectors(t *testing.T) {
	c := StartChecker(t)
	n := 0
	for _, f := range LoadFixtures(t, Fixtures(t)) {
		if !strings.HasPrefix(f.Name, "trace-") || len(f.Updates) < 4 || n >= 30 {
			continue
		}
		n++
		prefix, err := c.Merge(f.Updates[:len(f.Updates)/2])
		if err != nil {
			t.Fatal(err)
		}
		sv, err := c.StateVectorOfDoc(prefix)
		if err != nil {
			t.Fatal(err)
		}
		diff, err := c.Diff(f.Full, sv)
		if err != nil {
			t.Fatal(err)
		}
		if len(diff) >= len(f.Full)+8 {
			t.Errorf("%s: the diff against half the updates is %d bytes, the full update %d", f.Name, len(diff), len(f.Full))
		}
		view, err := c.Apply(prefix, [][]byte{diff}, f.Roots)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, f.Name+": Apply(prefix, Diff(full, sv(prefix)))", view, f.Expected)
		// The empty state vector: the diff is everything.
		all, err := c.Diff(f.Full, []byte{0})
		if err != nil {
			t.Fatal(err)
		}
		view, _, _, err = c.Load(all, f.Roots)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, f.Name+": Load(Diff(full, empty))", view, f.Expected)
		fromUpdate, err := c.StateVectorFromUpdate(f.Full)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeStateVector(t, fromUpdate); fmt.Sprint(got) != fmt.Sprint(f.Expected.StateVector) {
			t.Errorf("%s: StateVectorFromUpdate(full) = %v, want %v", f.Name, got, f.Expected.StateVector)
		}
	}
	if n == 0 {
		t.Fatal("no trace to diff")
	}
}

// TestCheckerErrors: requests yjs refuses come back as errors, and the checker goes on.
func TestCheckerErrors(t *testing.T) {
	c := StartChecker(t)
	if _, _, _, err := c.Load([]byte{0xff, 0xff, 0xff}, StandardRoots); err == nil {
		t.Error("Load of 3 bytes of 0xff: no error")
	}
	if _, _, _, err := c.Load([]byte{0, 0}, []Root{{"x", "set"}}); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Errorf("Load with a root of kind set: %v, want an error about the kind", err)
	}
	if _, err := c.Merge([][]byte{{1, 2, 3}}); err != nil {
		// Merging one update returns it unchanged, even garbage.
		t.Errorf("Merge of one update: %v", err)
	}
	if _, err := c.Diff([]byte{0, 0}, []byte{0x80}); err == nil {
		t.Error("Diff with a truncated state vector: no error")
	}
	// Still answering: the empty update loads as the empty document.
	view, full, pending, err := c.Load([]byte{0, 0}, StandardRoots)
	if err != nil || pending || !bytes.Equal(full, []byte{0, 0}) {
		t.Fatalf("Load(empty update) = full %x, pending %v, %v", full, pending, err)
	}
	want := View{
		JSON:        map[string]any{"text": "", "map": map[string]any{}, "array": []any{}, "xml": ""},
		Delta:       map[string]any{"text": []any{}},
		StateVector: map[string]uint64{},
	}
	mustEqual(t, "the empty document", view, want)
}

func TestViewEqual(t *testing.T) {
	base := func() View {
		return View{
			JSON: map[string]any{
				"text": "héllo 😀",
				"map": map[string]any{
					"n":   json.Number("9007199254740992"),
					"f":   json.Number("0.1"),
					"b":   map[string]any{"$bytes": "AQI="},
					"arr": []any{json.Number("1"), "two", nil, true},
				},
			},
			Delta:       map[string]any{"text": []any{map[string]any{"insert": "héllo 😀", "attributes": map[string]any{"bold": true}}}},
			StateVector: map[string]uint64{"4294967295": 3},
		}
	}
	if ok, d := ViewEqual(base(), base()); !ok {
		t.Fatalf("a view differs from itself: %s", d)
	}
	// Go values a mirror might build compare equal to the decoded JSON.
	mirror := base()
	mirror.JSON["map"] = map[string]any{
		"n":   float64(1 << 53),
		"f":   0.1,
		"b":   []byte{1, 2},
		"arr": []any{int64(1), "two", nil, true},
	}
	if ok, d := ViewEqual(mirror, base()); !ok {
		t.Fatalf("Go-typed values differ: %s", d)
	}
	cases := []struct {
		change func(*View)
		want   string
	}{
		{func(v *View) { v.JSON["text"] = "héllo 😀!" }, `json["text"]: strings`},
		{func(v *View) { v.JSON["map"].(map[string]any)["n"] = json.Number("9007199254740993") }, `json["map"]["n"]: a has 9007199254740993, b has 9007199254740992`},
		{func(v *View) { v.JSON["map"].(map[string]any)["arr"].([]any)[2] = false }, `json["map"]["arr"][2]: a has false, b has null`},
		{func(v *View) { v.JSON["map"].(map[string]any)["arr"] = []any{json.Number("1")} }, `json["map"]["arr"]: a has 1 elements, b has 4`},
		{func(v *View) { delete(v.JSON["map"].(map[string]any), "f") }, `json["map"]["f"]: only in b`},
		{func(v *View) { v.JSON["map"].(map[string]any)["b"] = map[string]any{"$bytes": "AQM="} }, `json["map"]["b"]["$bytes"]`},
		{func(v *View) { v.JSON["map"].(map[string]any)["f"] = "0.1" }, `json["map"]["f"]: a has "0.1", b has 0.1`},
		{func(v *View) {
			v.Delta["text"].([]any)[0].(map[string]any)["attributes"] = map[string]any{"bold": nil}
		}, `delta["text"][0]["attributes"]["bold"]: a has null, b has true`},
		{func(v *View) { v.StateVector["4294967295"] = 4 }, `stateVector[4294967295]: a has clock 4, b has 3`},
		{func(v *View) { v.StateVector["1"] = 1 }, `stateVector: client 1 only in a`},
	}
	for _, c := range cases {
		v := base()
		c.change(&v)
		ok, d := ViewEqual(v, base())
		if ok || !strings.Contains(d, c.want) {
			t.Errorf("ViewEqual = %v, %q; want a difference saying %q", ok, d, c.want)
		}
	}
	// Differences in long strings show where.
	a, b := base(), base()
	a.JSON["text"] = strings.Repeat("x", 500) + "A" + strings.Repeat("y", 100)
	b.JSON["text"] = strings.Repeat("x", 500) + "B" + strings.Repeat("y", 100)
	if _, d := ViewEqual(a, b); !strings.Contains(d, "UTF-16 unit 500") || !strings.Contains(d, `xA`) || len(d) > 400 {
		t.Errorf("long strings: %q", d)
	}
}

// TestBenchInputs: bench.mjs's inputs are there and are what the manifest says.
func TestBenchInputs(t *testing.T) {
	dir := BenchInputs(t)
	var manifest map[string]map[string]any
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "manifest.json")), &manifest); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"original.txt", "edited.txt", "original.update", "apply10k.json", "doc60k.update", "doc1k.update"} {
		if _, ok := manifest[f]; !ok {
			t.Errorf("the manifest lacks %s", f)
		}
	}
	original, edited := mustRead(t, filepath.Join(dir, "original.txt")), mustRead(t, filepath.Join(dir, "edited.txt"))
	if len(original) < 1<<20 || bytes.Equal(original, edited) {
		t.Fatalf("original.txt is %d bytes, edited.txt %d (equal %v)", len(original), len(edited), bytes.Equal(original, edited))
	}
	var typed [][]byte
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "apply10k.json")), &typed); err != nil {
		t.Fatal(err)
	}
	if len(typed) != 10000 {
		t.Fatalf("apply10k.json has %d updates", len(typed))
	}
	c := StartChecker(t)
	roots := []Root{{"text", "text"}}
	view, err := c.Apply(nil, typed, roots)
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := view.JSON["text"].(string); len([]rune(text)) != 10000 {
		t.Fatalf("the typed text has %d characters, want 10000", len([]rune(text)))
	}
	view, _, _, err = c.Load(mustRead(t, filepath.Join(dir, "original.update")), roots)
	if err != nil {
		t.Fatal(err)
	}
	if view.JSON["text"] != string(original) {
		t.Fatal("original.update does not hold original.txt")
	}
	view, _, pending, err := c.Load(mustRead(t, filepath.Join(dir, "doc60k.update")),
		[]Root{{"text", "text"}, {"map", "map"}, {"array", "array"}})
	if err != nil || pending {
		t.Fatalf("doc60k.update: pending %v, %v", pending, err)
	}
	if view.StateVector["3"] < 60000 {
		t.Fatalf("doc60k.update's state vector is %v, want client 3 past clock 60000", view.StateVector)
	}
}
