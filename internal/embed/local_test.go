package embed

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// golden is testdata/golden/golden.json, made by make-golden.js next to it from the npm
// packages the model comes from.
type golden struct {
	Packages  map[string]string `json:"packages"`
	Sentences []struct {
		Text   string    `json:"text"`
		IDs    []int32   `json:"ids"`
		Vector []float32 `json:"vector"`
	} `json:"sentences"`
}

func readGolden(t testing.TB) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Sentences) < 30 {
		t.Fatalf("golden.json has %d sentences, want at least 30", len(g.Sentences))
	}
	return g
}

func newLocal(t testing.TB) Embedder {
	t.Helper()
	e, err := NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// TestTokenizerGolden holds our token ids to those of the JavaScript tokenizer.
func TestTokenizerGolden(t *testing.T) {
	g := readGolden(t)
	n, err := loadUseLite()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Sentences {
		got := n.tok.encode(s.Text, math.MaxInt)
		if !slices.Equal(got, s.IDs) && !(len(got) == 0 && len(s.IDs) == 0) {
			t.Errorf("encode(%q)\n got %v\nwant %v", s.Text, got, s.IDs)
		}
	}
}

// TestLocalGolden holds our vectors to those of the npm packages: cosine at least 0.99 for
// every sentence (the weights are int8 here, float32 there).
func TestLocalGolden(t *testing.T) {
	g := readGolden(t)
	e := newLocal(t)
	texts := make([]string, len(g.Sentences))
	for i, s := range g.Sentences {
		texts[i] = s.Text
	}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	minCos, sum := 1.0, 0.0
	for i, s := range g.Sentences {
		if len(vecs[i]) != LocalDim {
			t.Fatalf("vector %d has %d dimensions", i, len(vecs[i]))
		}
		c := cosine(vecs[i], s.Vector)
		minCos = min(minCos, c)
		sum += c
		if c < 0.99 {
			t.Errorf("%q: cosine %.5f to the golden vector, want >= 0.99", s.Text, c)
		}
		var norm float64
		for _, v := range vecs[i] {
			norm += float64(v) * float64(v)
		}
		if math.Abs(norm-1) > 1e-4 {
			t.Errorf("%q: |v|^2 = %v, want 1", s.Text, norm)
		}
	}
	t.Logf("%d sentences: cosine to the npm vectors min %.5f, mean %.5f", len(g.Sentences), minCos, sum/float64(len(g.Sentences)))
}

func dotProduct(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestLocalSemantic: a complaint about legibility is closer to a judgment about low contrast
// than to one about an invoice.
func TestLocalSemantic(t *testing.T) {
	e := newLocal(t)
	v, err := e.Embed(context.Background(), []string{
		"text is hard to read against the background",
		"The text color has insufficient contrast with the background",
		"The invoice total does not match the line items",
	})
	if err != nil {
		t.Fatal(err)
	}
	contrast, invoice := dotProduct(v[0], v[1]), dotProduct(v[0], v[2])
	t.Logf("similarity to the contrast judgment %.3f, to the invoice judgment %.3f", contrast, invoice)
	if contrast <= invoice+0.1 {
		t.Errorf("contrast %.3f is not clearly above invoice %.3f", contrast, invoice)
	}
}

func TestLocalNameDim(t *testing.T) {
	e := newLocal(t)
	if e.Name() != LocalName || e.Dim() != 512 {
		t.Errorf("Name %q Dim %d", e.Name(), e.Dim())
	}
}

// TestTokenizerOddInput: any bytes, valid UTF-8 or not, tokenize without panicking, into ids of
// the vocabulary, at most the limit.
func TestTokenizerOddInput(t *testing.T) {
	n, err := loadUseLite()
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{
		"", " ", "  ", "\x00", "\xff", "\xff\xfe\xfd", "a\xffb", "\xc3", "\xe2\x96", "\xed\xa0\x80",
		"\xf4\x90\x80\x80", "▁", "▁▁▁", "\uFFFD", "\uFEFF", "\u200b\u200d", "\U0010FFFF",
		"\t\n\r\v\f", strings.Repeat("a", 100000), strings.Repeat("😀", 5000),
		strings.Repeat("\xff", 10000), strings.Repeat("word ", 20000), "ǅ ﷺ ﴾ ㍿ ﬀ",
		"e\u0301\u0301\u0301", string([]byte{0xe0, 0x80, 0x80}),
	}
	for b := 0; b < 256; b++ {
		inputs = append(inputs, string([]byte{byte(b)}), "x"+string([]byte{byte(b), byte(255 - b)})+"y")
	}
	for _, in := range inputs {
		ids := n.tok.encode(in, MaxTokens)
		if len(ids) > MaxTokens {
			t.Errorf("%q: %d ids", trim(in), len(ids))
		}
		if (len(ids) == 0) != (in == "") {
			t.Errorf("%q: %d ids", trim(in), len(ids))
		}
		for _, id := range ids {
			if id < 0 || int(id) >= len(n.tok.backLen) || (id > 0 && id < reservedPieces) {
				t.Errorf("%q: id %d", trim(in), id)
			}
		}
		v := make([]float32, LocalDim)
		n.forward(ids, v, false)
		if norm := dotProduct(v, v); math.Abs(norm-1) > 1e-4 {
			t.Errorf("%q: |v|^2 = %v", trim(in), norm)
		}
	}
	if got := n.tok.encode("\xff", MaxTokens); !slices.Equal(got, n.tok.encode("\uFFFD", MaxTokens)) {
		t.Errorf("invalid byte %v, U+FFFD %v", got, n.tok.encode("\uFFFD", MaxTokens))
	}
}

func trim(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	if !utf8.ValidString(s) {
		return strings.ToValidUTF8(s, "?")
	}
	return s
}

// TestLocalEmpty: every empty text has the same vector.
func TestLocalEmpty(t *testing.T) {
	e := newLocal(t)
	v, err := e.Embed(context.Background(), []string{"", "", "hello", ""})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v[0], v[1]) || !slices.Equal(v[0], v[3]) {
		t.Error("empty texts have different vectors")
	}
	if slices.Equal(v[0], v[2]) {
		t.Error("empty text and hello have the same vector")
	}
}

// TestLocalConcurrentAndBatch: concurrent calls, one text at a time or in batches, give the
// same vectors as a batch of all.
func TestLocalConcurrentAndBatch(t *testing.T) {
	g := readGolden(t)
	e := newLocal(t)
	texts := make([]string, len(g.Sentences))
	for i, s := range g.Sentences {
		texts[i] = s.Text
	}
	all, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, text := range texts {
				v, err := e.Embed(context.Background(), []string{text})
				if err != nil {
					t.Error(err)
					return
				}
				if c := cosine(v[0], all[i]); c < 0.99999 {
					t.Errorf("%q: alone vs in a batch: cosine %v", text, c)
				}
			}
		}()
	}
	wg.Wait()
}

func TestLocalLimits(t *testing.T) {
	e := newLocal(t)
	if _, err := e.Embed(context.Background(), make([]string, MaxBatch+1)); err == nil {
		t.Error("no error for a batch over MaxBatch")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"a", "b"}); err == nil {
		t.Error("no error for a cancelled context")
	}
	v, err := e.Embed(context.Background(), nil)
	if err != nil || len(v) != 0 {
		t.Errorf("Embed(nil) = %v, %v", v, err)
	}
}

func BenchmarkEmbedOne(b *testing.B) {
	e := newLocal(b)
	texts := []string{"The text color has insufficient contrast with the background"}
	ctx := context.Background()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEmbedBatch16(b *testing.B) {
	g := readGolden(b)
	e := newLocal(b)
	texts := make([]string, 16)
	for i := range texts {
		texts[i] = g.Sentences[i].Text
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLocalLongText: the vector of a text is that of its first MaxTokens tokens, however long
// the text.
func TestLocalLongText(t *testing.T) {
	g := readGolden(t)
	var long string
	for _, s := range g.Sentences {
		if len(s.IDs) > MaxTokens {
			long = s.Text
		}
	}
	if long == "" {
		t.Fatal("no golden sentence over MaxTokens tokens")
	}
	e := newLocal(t)
	v, err := e.Embed(context.Background(), []string{long, long + strings.Repeat(" and more words", 50000)})
	if err != nil {
		t.Fatal(err)
	}
	if c := cosine(v[0], v[1]); c < 0.99999 {
		t.Errorf("cosine %v between a long text and the same with 750 kB more", c)
	}
}
