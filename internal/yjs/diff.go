package yjs

import (
	"strings"
	"unicode/utf8"
)

// seqEdit is one change of a sequence diff: at position at of the old sequence, del elements
// go and ins elements of the new sequence, from insAt, come.
type seqEdit struct {
	at, del    int
	insAt, ins int
}

// maxEditDistance bounds the Myers search. Past it the changed middle is replaced whole: still
// a correct update, only coarser, and the cost stays O((n+m)·D).
const maxEditDistance = 1000

// diffSeq diffs two sequences: the common prefix and suffix are kept, and the middle is diffed
// with Myers' algorithm up to maxEditDistance.
func diffSeq[T comparable](a, b []T) []seqEdit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(am) == 0 && len(bm) == 0 {
		return nil
	}
	edits, ok := myers(am, bm, maxEditDistance)
	if !ok {
		return []seqEdit{{at: pre, del: len(am), insAt: pre, ins: len(bm)}}
	}
	for i := range edits {
		edits[i].at += pre
		edits[i].insAt += pre
	}
	return edits
}

// myers finds a shortest edit script of a to b, as edits sorted by position, when one within
// maxD exists.
//
//nolint:gocyclo // a kernel: Myers' O(ND) algorithm with its trace back, as published
func myers[T comparable](a, b []T, maxD int) ([]seqEdit, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return []seqEdit{{at: 0, del: n, insAt: 0, ins: m}}, true
	}
	if maxD > n+m {
		maxD = n + m
	}
	// Round dd finds the furthest x reached on each diagonal k = -dd, -dd+2, ..., dd from
	// round dd-1's alone, so the rounds are kept one after the other, and nothing sized by the
	// sequences: round dd's diagonal k is xs[dd(dd+1)/2 + (k+dd)/2].
	var xs []int
	at := func(dd, k int) int { return xs[dd*(dd+1)/2+(k+dd)/2] }
	found := -1
	for dd := 0; dd <= maxD && found < 0; dd++ {
		for k := -dd; k <= dd; k += 2 {
			var x int
			switch {
			case dd == 0:
			case k == -dd || (k != dd && at(dd-1, k-1) < at(dd-1, k+1)):
				x = at(dd-1, k+1)
			default:
				x = at(dd-1, k-1) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			xs = append(xs, x)
			if x >= n && y >= m {
				found = dd
				break
			}
		}
	}
	if found < 0 {
		return nil, false
	}
	// Walk back through the rounds.
	get := func(dd, k int) int { return at(dd-1, k) }
	type step struct{ x, y, px, py int }
	var steps []step
	x, y := n, m
	for dd := found; dd > 0; dd-- {
		k := x - y
		var pk int
		if k == -dd || (k != dd && get(dd, k-1) < get(dd, k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(dd, pk)
		py := px - pk
		steps = append(steps, step{x, y, px, py})
		x, y = px, py
	}
	// Each step is one insertion or deletion from (px, py), then a snake.
	var edits []seqEdit
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		var e seqEdit
		// Which of the two it was: a deletion moves x by one more than y before the snake.
		if (s.px - s.py) < (s.x - s.y) {
			e = seqEdit{at: s.px, del: 1, insAt: s.py}
		} else {
			e = seqEdit{at: s.px, insAt: s.py, ins: 1}
		}
		if k := len(edits) - 1; k >= 0 && edits[k].at+edits[k].del == e.at && edits[k].insAt+edits[k].ins == e.insAt {
			edits[k].del += e.del
			edits[k].ins += e.ins
			continue
		}
		edits = append(edits, e)
	}
	return edits, true
}

// textEdit is one change of a text diff: at byte at of the old text, del bytes go and ins
// comes. Edits fall on character boundaries.
type textEdit struct {
	at, del int
	ins     string
}

// lineDiffThreshold is the size, in characters, from which texts are diffed by line first,
// then by character within changed lines, to keep long documents cheap.
const lineDiffThreshold = 4096

// diffText diffs two texts (valid UTF-8) by character, by line first for long ones. The
// texts are worked on as they are, lines as substrings: only the changed lines are decoded
// into characters.
func diffText(a, b string) []textEdit {
	var rd runeDiffer
	if runesAtMost(a, b, lineDiffThreshold) {
		return rd.diff(nil, a, b, 0)
	}
	la, lb := lines(a), lines(b)
	// Lines compared by content through an interning table.
	ids := make(map[string]int32, len(la))
	intern := func(ls []string) []int32 {
		out := make([]int32, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids)) //nolint:gosec // G115: distinct lines of a document within the size limit, far below 2^31
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	ia, ib := intern(la), intern(lb)
	startA := lineStarts(la)
	startB := lineStarts(lb)
	var out []textEdit
	for _, e := range diffLines(ia, ib, len(ids)) {
		oa, ob := startA[e.at], startB[e.insAt]
		sa := a[oa:startA[e.at+e.del]]
		sb := b[ob:startB[e.insAt+e.ins]]
		if runesAtMost(sa, sb, 4*lineDiffThreshold) {
			out = rd.diff(out, sa, sb, oa)
		} else {
			out = append(out, textEdit{at: oa, del: len(sa), ins: sb})
		}
	}
	return out
}

// diffLines diffs two sequences of line ids (below n). A line found on one side only matches
// nothing, so such lines are set aside before the Myers search, whose cost then follows the
// lines that moved or repeat rather than every changed one, and come back as deletions and
// insertions in the gaps between the matches it found.
func diffLines(a, b []int32, n int) []seqEdit {
	inA, inB := make([]bool, n), make([]bool, n)
	for _, x := range a {
		inA[x] = true
	}
	for _, x := range b {
		inB[x] = true
	}
	var ka, kb []int // the indexes kept
	var ra, rb []int32
	for i, x := range a {
		if inB[x] {
			ka, ra = append(ka, i), append(ra, x)
		}
	}
	for i, x := range b {
		if inA[x] {
			kb, rb = append(kb, i), append(rb, x)
		}
	}
	var out []seqEdit
	pa, pb := 0, 0 // the indexes after the last match
	match := func(ma, mb int) {
		if ma > pa || mb > pb {
			out = append(out, seqEdit{at: pa, del: ma - pa, insAt: pb, ins: mb - pb})
		}
		pa, pb = ma+1, mb+1
	}
	i, j := 0, 0 // in ra and rb
	for _, e := range diffSeq(ra, rb) {
		for ; i < e.at; i, j = i+1, j+1 {
			match(ka[i], kb[j])
		}
		i, j = i+e.del, j+e.ins
	}
	for ; i < len(ra); i, j = i+1, j+1 {
		match(ka[i], kb[j])
	}
	if pa < len(a) || pb < len(b) {
		out = append(out, seqEdit{at: pa, del: len(a) - pa, insAt: pb, ins: len(b) - pb})
	}
	return out
}

// runesAtMost reports whether a and b hold at most n characters together, counting them only
// when their bytes leave it open (a character is one to four bytes).
func runesAtMost(a, b string, n int) bool {
	switch bytes := len(a) + len(b); {
	case bytes <= n:
		return true
	case bytes > 4*n:
		return false
	}
	return utf8.RuneCountInString(a)+utf8.RuneCountInString(b) <= n
}

// runeDiffer diffs short texts by character, reusing its buffers from one text to the next.
type runeDiffer struct{ ra, rb []rune }

// diff appends the edits of a to b, by character, to out; positions are bytes of a, plus
// base.
func (rd *runeDiffer) diff(out []textEdit, a, b string, base int) []textEdit {
	// The common prefix and suffix, as diffSeq would find them, without decoding them: bytes
	// compared, then moved back to a character boundary.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	for pre > 0 && pre < len(a) && !utf8.RuneStart(a[pre]) {
		pre--
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	for suf > 0 && !utf8.RuneStart(a[len(a)-suf]) {
		suf--
	}
	a, b = a[pre:len(a)-suf], b[pre:len(b)-suf]
	base += pre
	if len(a) == 0 && len(b) == 0 {
		return out
	}
	// As []rune(s) decodes: each invalid byte is one U+FFFD.
	rd.ra, rd.rb = rd.ra[:0], rd.rb[:0]
	for _, r := range a {
		rd.ra = append(rd.ra, r)
	}
	for _, r := range b {
		rd.rb = append(rd.rb, r)
	}
	edits := diffSeq(rd.ra, rd.rb)
	// Rune indexes to byte offsets, walking both texts once (edits are in order).
	ia, ba := 0, 0 // rune index and byte offset in a
	ib, bb := 0, 0
	advance := func(s string, i, off, to int) (int, int) {
		for ; i < to; i++ {
			_, n := utf8.DecodeRuneInString(s[off:])
			off += n
		}
		return i, off
	}
	for _, e := range edits {
		ia, ba = advance(a, ia, ba, e.at)
		at := ba
		ia, ba = advance(a, ia, ba, e.at+e.del)
		ib, bb = advance(b, ib, bb, e.insAt)
		from := bb
		ib, bb = advance(b, ib, bb, e.insAt+e.ins)
		out = append(out, textEdit{at: base + at, del: ba - at, ins: b[from:bb]})
	}
	return out
}

// lines splits a text after each newline.
func lines(s string) []string {
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// lineStarts are the byte offsets where each line starts, and the end.
func lineStarts(ls []string) []int {
	out := make([]int, len(ls)+1)
	for i, l := range ls {
		out[i+1] = out[i] + len(l)
	}
	return out
}
