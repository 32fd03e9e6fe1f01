package jsoncodec

import (
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Unknown fields are ignored: callers of the hosted product this API mirrors send fields we do
// not know. But a misspelt known field must not be ignored: Delete Users with "documentID"
// for "documentId" removed the user from the whole organization instead of one document. So an
// unknown field that is a near miss of a known field of its message is refused with a hint.
//
// The rule (docs/api.md states it too), with names compared byte by byte, ASCII letters
// without regard to case, against both names of every field (lowerCamelCase and snake_case):
//
//   - equal but for case: a near miss, whatever the length;
//   - one edit away (a character inserted, deleted or replaced, or two adjacent ones swapped):
//     a near miss of a name of 4 characters or more;
//   - two edits away: a near miss of a name of 8 characters or more.
//
// No field name of an API message is a near miss of another field of the same message
// (nearmiss_test.go checks), so a correctly spelt field is never refused.

// nearMissFields is what the check needs of a message's fields, worked out once per type.
type nearMissFields struct {
	names []nearMissName
}

type nearMissName struct {
	name string // a field's JSON or proto name
	hint string // the field's JSON name, which the hint gives
}

var nearMissCache sync.Map // protoreflect.MessageDescriptor -> *nearMissFields

func nearMissFieldsOf(md protoreflect.MessageDescriptor) *nearMissFields {
	if f, ok := nearMissCache.Load(md); ok {
		return f.(*nearMissFields)
	}
	f := &nearMissFields{}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		f.names = append(f.names, nearMissName{fd.JSONName(), fd.JSONName()})
		if string(fd.Name()) != fd.JSONName() {
			f.names = append(f.names, nearMissName{string(fd.Name()), fd.JSONName()})
		}
	}
	actual, _ := nearMissCache.LoadOrStore(md, f)
	return actual.(*nearMissFields)
}

// allowedEdits is how many edits away from a known name of n bytes an unknown one is a near
// miss.
func allowedEdits(n int) int {
	switch {
	case n >= 8:
		return 2
	case n >= 4:
		return 1
	}
	return 0
}

// nearMiss returns the JSON name of the field of md that name, a field md does not have, is a
// near miss of ("" when it is none): the closest one, the first declared on a tie.
func nearMiss(md protoreflect.MessageDescriptor, name string) string {
	best, bestDist := "", 3
	for _, n := range nearMissFieldsOf(md).names {
		limit := min(allowedEdits(len(n.name)), bestDist-1)
		if d := editDistance(name, n.name, limit); d <= limit {
			best, bestDist = n.hint, d
		}
	}
	return best
}

// maxNameLen bounds the names editDistance compares on the stack; field names are far shorter.
const maxNameLen = 64

// editDistance is the optimal string alignment distance between a and b (insertions,
// deletions, substitutions, and swaps of adjacent bytes; ASCII letters compared without regard
// to case) when it is at most limit, and limit+1 otherwise. It allocates nothing, and gives up
// early: unknown fields arrive by the thousand in a large body, and each is compared with every
// field of its message.
func editDistance(a, b string, limit int) int {
	if len(a)-len(b) > limit || len(b)-len(a) > limit {
		return limit + 1
	}
	if len(b) > maxNameLen || len(a) > maxNameLen {
		return limit + 1
	}
	// What a and b share at either end costs nothing; names that differ in a few letters, the
	// cheapest to craft, leave little to compare.
	for len(a) > 0 && len(b) > 0 && fold(a[0]) == fold(b[0]) {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && fold(a[len(a)-1]) == fold(b[len(b)-1]) {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	// Rows of the distance table: prev2 for i-2, prev for i-1, cur for i. Only the band of
	// cells within limit of the diagonal is computed (any cell off it is more than limit
	// anyway); cells the band reads beside itself hold big. Distances fit in a byte.
	big := uint8(limit + 1) //nolint:gosec // G115: limit is a small distance; "Distances fit in a byte"
	var rows [3][maxNameLen + 2]uint8
	prev2, prev, cur := &rows[0], &rows[1], &rows[2]
	for j := 0; j <= len(b)+1; j++ {
		prev[j] = big
		if j <= limit {
			prev[j] = uint8(j)
		}
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-limit), min(len(b), i+limit)
		cur[0] = min(uint8(i), big)
		if lo > 1 {
			cur[lo-1] = big
		}
		ai := fold(a[i-1])
		rowMin := cur[0]
		for j := lo; j <= hi; j++ {
			bj := fold(b[j-1])
			d := min(prev[j], cur[j-1]) + 1
			if ai == bj {
				d = min(d, prev[j-1])
			} else {
				d = min(d, prev[j-1]+1)
				if i > 1 && j > 1 && ai == fold(b[j-2]) && fold(a[i-2]) == bj {
					d = min(d, prev2[j-2]+1)
				}
			}
			cur[j] = min(d, big)
			rowMin = min(rowMin, cur[j])
		}
		cur[hi+1] = big
		if rowMin > uint8(limit) { //nolint:gosec // G115: limit is a small distance, as above
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(int(prev[len(b)]), limit+1)
}

// fold lowers an ASCII letter.
func fold(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// nearMissMessage words the refusal of an unknown field at path.
func nearMissMessage(path, hint string) string {
	return "Unknown field " + path + "; did you mean " + hint + "?"
}
