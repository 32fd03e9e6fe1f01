package yjs

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
func myers[T comparable](a, b []T, maxD int) ([]seqEdit, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return []seqEdit{{at: 0, del: n, insAt: 0, ins: m}}, true
	}
	off := n + m
	if maxD > n+m {
		maxD = n + m
	}
	v := make([]int, 2*off+2)
	var trace [][]int
	found := -1
	for dd := 0; dd <= maxD; dd++ {
		// Keep only the diagonals this round can touch.
		lo, hi := off-dd-1, off+dd+2
		if lo < 0 {
			lo = 0
		}
		if hi > len(v) {
			hi = len(v)
		}
		snap := make([]int, hi-lo)
		copy(snap, v[lo:hi])
		trace = append(trace, snap)
		for k := -dd; k <= dd; k += 2 {
			var x int
			if k == -dd || (k != dd && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				found = dd
				break
			}
		}
		if found >= 0 {
			break
		}
	}
	if found < 0 {
		return nil, false
	}
	// Walk back through the saved rounds.
	get := func(dd, k int) int {
		lo := off - dd - 1
		if lo < 0 {
			lo = 0
		}
		return trace[dd][off+k-lo]
	}
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

// runeEdit is one change of a text diff, in runes of the old text.
type runeEdit struct {
	at, del int
	ins     []rune
}

// lineDiffThreshold is the size from which texts are diffed by line first, then by
// character within changed lines, to keep long documents cheap.
const lineDiffThreshold = 4096

// diffRunes diffs two texts by character (by line first for long ones).
func diffRunes(a, b []rune) []runeEdit {
	if len(a)+len(b) <= lineDiffThreshold {
		return runeEdits(a, b, 0, diffSeq(a, b))
	}
	la, lb := lines(a), lines(b)
	// Lines compared by content through an interning table.
	ids := map[string]int{}
	intern := func(ls [][]rune) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			s := string(l)
			id, ok := ids[s]
			if !ok {
				id = len(ids)
				ids[s] = id
			}
			out[i] = id
		}
		return out
	}
	ia, ib := intern(la), intern(lb)
	startA := make([]int, len(la)+1)
	for i, l := range la {
		startA[i+1] = startA[i] + len(l)
	}
	startB := make([]int, len(lb)+1)
	for i, l := range lb {
		startB[i+1] = startB[i] + len(l)
	}
	var out []runeEdit
	for _, e := range diffSeq(ia, ib) {
		oa, ob := startA[e.at], startB[e.insAt]
		sa := a[oa:startA[e.at+e.del]]
		sb := b[ob:startB[e.insAt+e.ins]]
		var inner []seqEdit
		if len(sa)+len(sb) <= 4*lineDiffThreshold {
			inner = diffSeq(sa, sb)
		} else {
			inner = []seqEdit{{at: 0, del: len(sa), insAt: 0, ins: len(sb)}}
		}
		for _, x := range runeEdits(sa, sb, 0, inner) {
			x.at += oa
			out = append(out, x)
		}
	}
	return out
}

func runeEdits(_, b []rune, _ int, edits []seqEdit) []runeEdit {
	out := make([]runeEdit, len(edits))
	for i, e := range edits {
		out[i] = runeEdit{at: e.at, del: e.del, ins: b[e.insAt : e.insAt+e.ins]}
	}
	return out
}

// lines splits a text after each newline.
func lines(rs []rune) [][]rune {
	var out [][]rune
	start := 0
	for i, r := range rs {
		if r == '\n' {
			out = append(out, rs[start:i+1])
			start = i + 1
		}
	}
	if start < len(rs) {
		out = append(out, rs[start:])
	}
	return out
}
