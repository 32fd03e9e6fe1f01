package yjs

import (
	"unicode/utf8"
	"unsafe"
)

// units is a string as JavaScript holds one, in UTF-16 code units, stored one byte a unit while
// every unit is below 256 (Latin-1: most text) and two otherwise: a text takes its length in
// bytes, not twice that (yjs's strings do the same in V8). Wide units are an array of uint16
// seen as bytes, so they stay aligned and the []uint16 functions work on them in place.
type units struct {
	b    []byte
	wide bool
}

// unitsOf converts UTF-8 to units as JavaScript would hold it (each invalid byte as U+FFFD).
func unitsOf(s string) units {
	narrow := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x100 || (r == utf8.RuneError && size == 1) {
				narrow = false
				break
			}
			i += size - 1
		}
	}
	if !narrow {
		return wideUnits(u16(s))
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x80 {
			b = append(b, c)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		b = append(b, byte(r)) //nolint:gosec // G115: r < 0x100 here (checked above)
		i += size - 1
	}
	return units{b: b}
}

// wideUnits holds u (not copied) as units, its room after its length included.
func wideUnits(u []uint16) units {
	if cap(u) == 0 {
		return units{wide: true}
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(u))), 2*cap(u)) //nolint:gosec // G103: reviewed; the bytes of a []uint16's array
	return units{b: b[:2*len(u)], wide: true}
}

// u16 is the units as []uint16 (wide ones in place, with their room; narrow ones copied).
func (u units) u16() []uint16 {
	if u.wide {
		if cap(u.b) == 0 {
			return nil
		}
		w := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(u.b))), cap(u.b)/2) //nolint:gosec // G103: reviewed; wide bytes are a []uint16's array, cut at whole units
		return w[:len(u.b)/2]
	}
	out := make([]uint16, len(u.b))
	for i, c := range u.b {
		out[i] = uint16(c)
	}
	return out
}

func (u units) len() int {
	if u.wide {
		return len(u.b) / 2
	}
	return len(u.b)
}

func (u units) at(i int) uint16 {
	if u.wide {
		return u.u16()[i]
	}
	return uint16(u.b[i])
}

// from is the units from i on, sharing the array.
func (u units) from(i int) units {
	if u.wide {
		i *= 2
	}
	return units{b: u.b[i:], wide: u.wide}
}

// upTo is the units before i, sharing the array but not its room after i: appending to it never
// writes into what follows.
func (u units) upTo(i int) units {
	if u.wide {
		i *= 2
	}
	return units{b: u.b[:i:i], wide: u.wide}
}

// concat appends v's units to u's (into u's array when it has room), widening when either is
// wide.
func (u units) concat(v units) units {
	switch {
	case !u.wide && !v.wide:
		return units{b: append(u.b, v.b...)}
	case u.wide:
		return wideUnits(append(u.u16(), v.u16()...))
	}
	w := make([]uint16, 0, u.len()+v.len())
	w = append(w, u.u16()...)
	return wideUnits(append(w, v.u16()...))
}

// utf8Len is the length of the units in UTF-8 (lone surrogates as U+FFFD).
func (u units) utf8Len() int {
	if u.wide {
		return utf8Len(u.u16())
	}
	n := len(u.b)
	for _, c := range u.b {
		if c >= 0x80 {
			n++
		}
	}
	return n
}

// appendUTF8 appends the units as UTF-8 (lone surrogates as U+FFFD).
func (u units) appendUTF8(b []byte) []byte {
	if u.wide {
		return appendUTF8(b, u.u16())
	}
	for rest := u.b; len(rest) > 0; {
		// Runs of ASCII are copied whole.
		n := 0
		for n < len(rest) && rest[n] < 0x80 {
			n++
		}
		b = append(b, rest[:n]...)
		for ; n < len(rest) && rest[n] >= 0x80; n++ {
			b = append(b, 0xc0|rest[n]>>6, 0x80|rest[n]&0x3f)
		}
		rest = rest[n:]
	}
	return b
}

// string is the units in UTF-8.
func (u units) string() string {
	if u.wide {
		return utf8Of(u.u16())
	}
	b := u.appendUTF8(make([]byte, 0, u.utf8Len()))
	return unsafe.String(unsafe.SliceData(b), len(b)) //nolint:gosec // G103: reviewed; b is not used again
}

// unitJoiner joins the units of several items into one string: a surrogate pair may straddle
// two of them.
type unitJoiner struct {
	narrow []byte
	wide   []uint16
	isWide bool
}

func (j *unitJoiner) add(u units) {
	if !j.isWide && !u.wide {
		j.narrow = append(j.narrow, u.b...)
		return
	}
	if !j.isWide {
		j.wide = units{b: j.narrow}.u16()
		j.narrow, j.isWide = nil, true
	}
	j.wide = append(j.wide, u.u16()...)
}

func (j *unitJoiner) empty() bool { return len(j.narrow) == 0 && len(j.wide) == 0 }

func (j *unitJoiner) string() string {
	if j.isWide {
		return utf8Of(j.wide)
	}
	return units{b: j.narrow}.string()
}
