package embed

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The SentencePiece unigram tokenizer of the model, written to give the same ids as the one of
// @energetic-ai/embeddings 0.2.0 (the JavaScript the golden vectors come from), quirks
// included; the rules are listed in doc.go.

const (
	// reservedPieces is the number of vocabulary entries never matched (the unknown piece,
	// <s>, </s> and three extra tokens): ids 0 to 5.
	reservedPieces = 6
	// unknownID is the id of text no piece matches.
	unknownID = 0
	// wordBoundary stands for a space, and starts the text.
	wordBoundary = '▁'
	// maxTokenizedRunes bounds the text tokenized (code points after normalisation); see doc.go.
	maxTokenizedRunes = 4096
	// maxNormalizedBytes bounds the text normalised: 64 KiB hold at least 16384 code points,
	// which NFKC cannot make fewer than maxTokenizedRunes.
	maxNormalizedBytes = 64 << 10
)

type trieNode struct {
	children map[rune]*trieNode
	end      bool
	score    float64
	id       int32
}

// tokenizer holds the vocabulary in a trie of code points. It is read-only once built.
type tokenizer struct {
	root trieNode
	// backLen[id] is the length of piece id in UTF-16 code units: the JavaScript walks back
	// through the best path by the length of the piece's string, which is what we mirror.
	backLen []int
}

// newTokenizer reads a vocabulary in the JSON form of the npm package: an array of
// [piece, score] pairs, the id being the index; a null score counts as 0 (as it does in
// JavaScript arithmetic). A piece listed twice keeps its last id and score.
func newTokenizer(vocabJSON []byte) (*tokenizer, error) {
	var entries [][2]any
	if err := json.Unmarshal(vocabJSON, &entries); err != nil {
		return nil, fmt.Errorf("embed: vocabulary: %w", err)
	}
	if len(entries) <= reservedPieces {
		return nil, fmt.Errorf("embed: vocabulary has %d entries", len(entries))
	}
	t := &tokenizer{backLen: make([]int, len(entries))}
	for id, e := range entries {
		piece, ok := e[0].(string)
		if !ok {
			return nil, fmt.Errorf("embed: vocabulary entry %d: piece is %T", id, e[0])
		}
		var score float64
		switch s := e[1].(type) {
		case float64:
			score = s
		case nil:
		default:
			return nil, fmt.Errorf("embed: vocabulary entry %d: score is %T", id, e[1])
		}
		t.backLen[id] = len(utf16.Encode([]rune(piece)))
		if id < reservedPieces || piece == "" {
			continue
		}
		n := &t.root
		for _, r := range piece {
			c := n.children[r]
			if c == nil {
				if n.children == nil {
					n.children = make(map[rune]*trieNode)
				}
				c = &trieNode{}
				n.children[r] = c
			}
			n = c
		}
		n.end, n.score, n.id = true, score, int32(id)
	}
	return t, nil
}

// normalize prepares text as the JavaScript does: NFKC, then, unless empty, a word boundary
// in front and every space (U+0020 only) replaced by one. Invalid UTF-8 becomes U+FFFD, one
// per run of invalid bytes. Only the first 64 KiB are read, and at most maxTokenizedRunes code
// points are kept.
func normalize(text string) []rune {
	if len(text) > maxNormalizedBytes {
		cut := maxNormalizedBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	s := norm.NFKC.String(text)
	if s == "" {
		return nil
	}
	out := make([]rune, 0, min(len(s)+1, maxTokenizedRunes))
	out = append(out, wordBoundary)
	for _, r := range s {
		if len(out) == maxTokenizedRunes {
			break
		}
		if r == ' ' {
			r = wordBoundary
		}
		out = append(out, r)
	}
	return out
}

// match is a piece found at a position of the text.
type match struct {
	length int // in code points
	score  float64
	id     int32
}

// encode returns the ids of text, at most limit of them (the first ones), limit > 0.
func (t *tokenizer) encode(text string, limit int) []int32 {
	symbols := normalize(text)
	n := len(symbols)
	if n == 0 {
		return nil
	}
	// ends[e] lists the pieces ending at e, by their start ascending (the JavaScript visits
	// the starts of an object's integer keys in ascending order).
	ends := make([][]match, n+1)
	for i := 0; i < n; i++ {
		found := false
		node := t.root.children[symbols[i]]
		for j := i; j < n && node != nil; j++ {
			if node.end {
				ends[j+1] = append(ends[j+1], match{length: j + 1 - i, score: node.score, id: node.id})
				found = true
			}
			if j+1 < n {
				node = node.children[symbols[j+1]]
			}
		}
		if !found {
			// No piece starts here: the unknown piece, one code point long, score 0.
			ends[i+1] = append(ends[i+1], match{length: 1, score: 0, id: unknownID})
		}
	}
	best := make([]float64, n+1)
	words := make([]int32, n+1)
	for e := 1; e <= n; e++ {
		for _, m := range ends[e] {
			score := m.score + best[e-m.length]
			// As in the JavaScript: 0 means "not set yet", and a tie goes to the later piece.
			if best[e] == 0 || score >= best[e] {
				best[e] = score
				words[e] = m.id
			}
		}
	}
	var ids []int32
	for i := n; i > 0; i -= max(t.backLen[words[i]], 1) {
		ids = append(ids, words[i])
	}
	// Merge runs of unknown pieces into one, then restore the order.
	merged := ids[:0]
	prevUnknown := false
	for _, id := range ids {
		if !(prevUnknown && id == unknownID) {
			merged = append(merged, id)
		}
		prevUnknown = id == unknownID
	}
	for i, j := 0, len(merged)-1; i < j; i, j = i+1, j-1 {
		merged[i], merged[j] = merged[j], merged[i]
	}
	if len(merged) > limit {
		merged = merged[:limit]
	}
	return merged
}
