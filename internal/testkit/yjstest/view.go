package yjstest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// String is the view as JSON (object keys sorted).
func (v View) String() string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<view: %v>", err)
	}
	return string(b)
}

// ViewEqual reports whether a and b are the same view, and if not, where they first differ
// (roots and keys in sorted order), e.g. `json.map["k1"][3]: a has 1, b has "x"`. Values compare
// as JSON: numbers by value whatever their Go type (json.Number, float64, int, ...; a number
// with a fraction or an exponent as the float64 it denotes, as JavaScript reads it), []byte as
// view.mjs's {"$bytes": base64}, other Go values as their encoding/json form; object key order
// never matters, array order always does.
func ViewEqual(a, b View) (bool, string) {
	if d := diffValue("json", normalize(a.JSON), normalize(b.JSON)); d != "" {
		return false, d
	}
	if d := diffValue("delta", normalize(a.Delta), normalize(b.Delta)); d != "" {
		return false, d
	}
	if d := diffStateVector(a.StateVector, b.StateVector); d != "" {
		return false, d
	}
	return true, ""
}

func diffStateVector(a, b map[string]uint64) string {
	for _, k := range unionKeys(a, b) {
		va, ina := a[k]
		vb, inb := b[k]
		switch {
		case !ina:
			return fmt.Sprintf("stateVector: client %s only in b (clock %d)", k, vb)
		case !inb:
			return fmt.Sprintf("stateVector: client %s only in a (clock %d)", k, va)
		case va != vb:
			return fmt.Sprintf("stateVector[%s]: a has clock %d, b has %d", k, va, vb)
		}
	}
	return ""
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// normalize turns v into plain JSON values: map[string]any, []any, string, bool, nil and
// numbers (json.Number or Go numbers, compared by value).
func normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool, json.Number, float64, float32, int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64:
		return x
	case []byte:
		return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(x)}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%T: %v>", v, err)
	}
	var out any
	if err := decodeJSON(b, &out); err != nil {
		return fmt.Sprintf("<%T: %v>", v, err)
	}
	return normalize(out)
}

// number returns v as an exact rational, or nil when v is not a number.
func number(v any) *big.Rat {
	r := new(big.Rat)
	switch x := v.(type) {
	case json.Number:
		// JSON numbers from JavaScript are doubles: "0.1" means the double nearest 0.1, the
		// value a Go float64 0.1 holds. Integer literals compare exactly.
		if strings.ContainsAny(string(x), ".eE") {
			f, err := strconv.ParseFloat(string(x), 64)
			if err != nil {
				return nil
			}
			return number(f)
		}
		if _, ok := r.SetString(string(x)); !ok {
			return nil
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		r.SetFloat64(x)
	case float32:
		return number(float64(x))
	case int:
		r.SetInt64(int64(x))
	case int8:
		r.SetInt64(int64(x))
	case int16:
		r.SetInt64(int64(x))
	case int32:
		r.SetInt64(int64(x))
	case int64:
		r.SetInt64(x)
	case uint:
		r.SetUint64(uint64(x))
	case uint8:
		r.SetUint64(uint64(x))
	case uint16:
		r.SetUint64(uint64(x))
	case uint32:
		r.SetUint64(uint64(x))
	case uint64:
		r.SetUint64(x)
	default:
		return nil
	}
	return r
}

func isNumber(v any) bool {
	switch v.(type) {
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

// diffValue describes the first difference of a and b at path, or returns "".
func diffValue(path string, a, b any) string {
	if isNumber(a) && isNumber(b) {
		ra, rb := number(a), number(b)
		if ra == nil || rb == nil || ra.Cmp(rb) != 0 {
			return fmt.Sprintf("%s: a has %s, b has %s", path, show(a), show(b))
		}
		return ""
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range unionKeys(x, y) {
			va, ina := x[k]
			vb, inb := y[k]
			p := path + "[" + strconv.Quote(k) + "]"
			switch {
			case !ina:
				return fmt.Sprintf("%s: only in b (%s)", p, show(vb))
			case !inb:
				return fmt.Sprintf("%s: only in a (%s)", p, show(va))
			}
			if d := diffValue(p, va, vb); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < len(x) && i < len(y); i++ {
			if d := diffValue(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		if len(x) != len(y) {
			return fmt.Sprintf("%s: a has %d elements, b has %d", path, len(x), len(y))
		}
		return ""
	case string:
		if y, ok := b.(string); ok {
			if x == y {
				return ""
			}
			at, ctxA, ctxB := firstDifference(x, y)
			return fmt.Sprintf("%s: strings (lengths %d and %d bytes) differ at UTF-16 unit %d: a has %s, b has %s",
				path, len(x), len(y), at, ctxA, ctxB)
		}
	case bool:
		if y, ok := b.(bool); ok && x == y {
			return ""
		}
	case nil:
		if b == nil {
			return ""
		}
	}
	return fmt.Sprintf("%s: a has %s, b has %s", path, show(a), show(b))
}

// firstDifference returns the UTF-16 index (as yjs counts) of the first unit where a and b
// differ, and both strings around it (from 20 characters before to 40 after), quoted.
func firstDifference(a, b string) (at int, ctxA, ctxB string) {
	ra, rb := []rune(a), []rune(b)
	i := 0
	for ; i < len(ra) && i < len(rb) && ra[i] == rb[i]; i++ {
		if ra[i] >= 0x10000 {
			at += 2
		} else {
			at++
		}
	}
	around := func(r []rune) string {
		from, to := max(0, i-20), min(len(r), i+40)
		s := strconv.Quote(string(r[from:to]))
		if from > 0 {
			s = "…" + s
		}
		if to < len(r) {
			s += "…"
		}
		return s
	}
	return at, around(ra), around(rb)
}

// show is v as JSON, shortened to about 200 bytes.
func show(v any) string {
	b, err := json.Marshal(v)
	s := string(b)
	if err != nil {
		s = fmt.Sprintf("%#v", v)
	}
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }
