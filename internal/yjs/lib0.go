package yjs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// ErrMalformed is wrapped by every error about bytes that are not a Yjs v1 update, state
// vector or sync message.
var ErrMalformed = errors.New("malformed Yjs data")

// maxSafe is JavaScript's Number.MAX_SAFE_INTEGER: yjs keeps clocks, clients and lengths in
// JavaScript numbers, so nothing a real client writes goes past it.
const maxSafe = 1<<53 - 1

// maxAnyDepth bounds how deeply nested an `any` value may be: yjs has no such bound, but a
// document of real clients holds JSON a person wrote, and recursion on untrusted bytes needs one.
const maxAnyDepth = 100

// decoder reads lib0 encodings from untrusted bytes. It never panics and never allocates more
// than the input's size justifies: counts are checked against the bytes left.
type decoder struct {
	buf []byte
	pos int
	// alloc, when limited, is how many bytes of memory what is read may still take
	// (decodeUpdate).
	alloc   int
	limited bool
}

// charge counts n bytes of memory that reading is about to allocate: ErrTooLarge past the
// allowance.
func (d *decoder) charge(n int) error {
	if !d.limited {
		return nil
	}
	if d.alloc -= n; d.alloc < 0 {
		return fmt.Errorf("%w: the update alone takes more than the document may hold", ErrMemoryTooLarge)
	}
	return nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func (d *decoder) left() int { return len(d.buf) - d.pos }

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.buf) {
		return 0, malformed("unexpected end of data")
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

// uint reads a varUint: 7 bits a byte, low groups first; values beyond 2^53-1 are refused as
// no yjs encoder writes them.
func (d *decoder) uint() (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		if shift >= 56 {
			return 0, malformed("varUint too long")
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	if v > maxSafe {
		return 0, malformed("number beyond 2^53")
	}
	return v, nil
}

// count reads a varUint that counts items each taking at least min bytes, so it can never ask
// for more than the input holds.
//
//nolint:gosec // G115: n is checked against the bytes left (an int) before int(n); the lengths are non-negative
func (d *decoder) count(min int) (int, error) {
	n, err := d.uint()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/min) {
		return 0, malformed("count %d exceeds the data", n)
	}
	return int(n), nil
}

// int reads a varInt: the first byte holds continue, sign and 6 value bits.
func (d *decoder) int() (int64, error) {
	b, err := d.byte()
	if err != nil {
		return 0, err
	}
	v := uint64(b & 0x3f)
	neg := b&0x40 != 0
	for shift := uint(6); b&0x80 != 0; shift += 7 {
		if b, err = d.byte(); err != nil {
			return 0, err
		}
		if shift >= 56 {
			return 0, malformed("varInt too long")
		}
		v |= uint64(b&0x7f) << shift
	}
	if v > maxSafe {
		return 0, malformed("number beyond 2^53")
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

// bytes reads a length-prefixed byte string (lib0 varUint8Array), sharing the input's bytes.
//
//nolint:gosec // G115: n is checked against the bytes left (an int) before int(n); the lengths are non-negative
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uint()
	if err != nil {
		return nil, err
	}
	if n > uint64(d.left()) {
		return nil, malformed("byte array longer than the data")
	}
	b := d.buf[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

func (d *decoder) fixed(n int) ([]byte, error) {
	if n > d.left() {
		return nil, malformed("unexpected end of data")
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// string reads a varString. Invalid UTF-8 is refused, as lib0's fatal TextDecoder refuses it:
// accepted, it would be written back out and make the document unreadable to yjs.
func (d *decoder) string() (string, error) {
	b, err := d.utf8()
	return string(b), err
}

// utf8 reads a varUint8Array that must hold valid UTF-8 (strings, JSON text).
func (d *decoder) utf8() ([]byte, error) {
	b, err := d.bytes()
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, malformed("string is not valid UTF-8")
	}
	return b, nil
}

// encoder writes lib0 encodings.
type encoder struct{ buf []byte }

func (e *encoder) byte(b byte) { e.buf = append(e.buf, b) }

func (e *encoder) uint(v uint64) {
	for v >= 0x80 {
		e.buf = append(e.buf, byte(v)|0x80)
		v >>= 7
	}
	e.buf = append(e.buf, byte(v))
}

func (e *encoder) int(v int64) {
	neg := v < 0
	u := uint64(v) //nolint:gosec // G115: the sign is taken above; the two's complement bits are negated below
	if neg {
		u = uint64(-v)
	}
	b := byte(u & 0x3f)
	if neg {
		b |= 0x40
	}
	u >>= 6
	if u > 0 {
		b |= 0x80
	}
	e.buf = append(e.buf, b)
	for u > 0 {
		b = byte(u & 0x7f)
		u >>= 7
		if u > 0 {
			b |= 0x80
		}
		e.buf = append(e.buf, b)
	}
}

func (e *encoder) bytes(b []byte) {
	e.uint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) string(s string) {
	e.uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// u16 converts UTF-8 to UTF-16 code units as JavaScript holds strings (each invalid byte as
// U+FFFD). A character takes no more units than bytes, so out never grows.
func u16(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for i := 0; i < len(s); {
		if s[i] < 0x80 {
			// A run of ASCII, copied with bounds the compiler can see.
			src := s[i:]
			o := out[len(out) : len(out)+len(src)]
			n := 0
			for n < len(src) && n < len(o) && src[n] < 0x80 {
				o[n] = uint16(src[n])
				n++
			}
			out = out[:len(out)+n]
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			a, b := utf16.EncodeRune(r)
			out = append(out, uint16(a), uint16(b)) //nolint:gosec // G115: utf16.EncodeRune returns surrogates, 0xD800..0xDFFF
		} else {
			out = append(out, uint16(r)) //nolint:gosec // G115: r < 0x10000 here
		}
	}
	return out
}

// utf8Of converts UTF-16 code units to UTF-8 as TextEncoder does: lone surrogates become
// U+FFFD.
func utf8Of(u []uint16) string {
	// One pass into room for mostly ASCII, growing when the text is not.
	b := appendUTF8(make([]byte, 0, len(u)+len(u)/8+4), u)
	return unsafe.String(unsafe.SliceData(b), len(b)) //nolint:gosec // G103: reviewed; b is not used again
}

// utf8Len is the length of utf8Of(u).
func utf8Len(u []uint16) int {
	n := 0
	for i := 0; i < len(u); i++ {
		switch c := u[i]; {
		case c < 0x80:
			n++
		case c < 0x800:
			n += 2
		case c >= 0xd800 && c < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] < 0xe000:
			n += 4
			i++
		default: // the rest of the BMP, and lone surrogates as U+FFFD
			n += 3
		}
	}
	return n
}

// appendUTF8 appends utf8Of(u) to b.
func appendUTF8(b []byte, u []uint16) []byte {
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c < 0x80 {
			// A run of ASCII, written by index into room for the rest of u.
			src := u[i:]
			if cap(b)-len(b) < len(src) {
				b = slices.Grow(b, len(src))
			}
			out := b[len(b) : len(b)+len(src)]
			n := 0
			for n < len(src) && n < len(out) && src[n] < 0x80 {
				out[n] = byte(src[n])
				n++
			}
			b = b[:len(b)+n]
			i += n - 1
			continue
		}
		switch {
		case c >= 0xd800 && c < 0xdc00 && i+1 < len(u) && u[i+1] >= 0xdc00 && u[i+1] < 0xe000:
			b = utf8.AppendRune(b, utf16.DecodeRune(rune(c), rune(u[i+1])))
			i++
		case c >= 0xd800 && c < 0xe000:
			b = utf8.AppendRune(b, utf8.RuneError)
		default:
			b = utf8.AppendRune(b, rune(c))
		}
	}
	return b
}

// units writes UTF-16 code units as a lib0 string (as TextEncoder makes its UTF-8), without an
// intermediate string.
func (e *encoder) units(u units) {
	e.uint(uint64(u.utf8Len())) //nolint:gosec // G115: a length: non-negative
	e.buf = u.appendUTF8(e.buf)
}

// Any values (lib0's writeAny) are kept as the bytes they were read from, so a re-encoding
// writes them exactly; anyValue decodes one for reading.

// skipAny reads past one `any` value and returns its bytes.
func (d *decoder) skipAny(depth int) ([]byte, error) {
	start := d.pos
	if err := d.walkAny(depth); err != nil {
		return nil, err
	}
	return d.buf[start:d.pos], nil
}

func (d *decoder) walkAny(depth int) error {
	if depth > maxAnyDepth {
		return malformed("value nested deeper than %d", maxAnyDepth)
	}
	tag, err := d.byte()
	if err != nil {
		return err
	}
	switch tag {
	case 127, 126, 121, 120:
		return nil
	case 125:
		_, err = d.int()
	case 124:
		_, err = d.fixed(4)
	case 123, 122:
		_, err = d.fixed(8)
	case 119:
		_, err = d.utf8()
	case 116:
		_, err = d.bytes()
	case 118:
		n, err := d.count(2)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := d.utf8(); err != nil {
				return err
			}
			if err := d.walkAny(depth + 1); err != nil {
				return err
			}
		}
	case 117:
		n, err := d.count(1)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := d.walkAny(depth + 1); err != nil {
				return err
			}
		}
	default:
		return malformed("unknown value tag %d", tag)
	}
	return err
}

// Undefined is how JavaScript's undefined reads (an `any` tag 127, or "undefined" in JSON
// content).
type Undefined struct{}

// BigInt is a 64-bit integer written as a JavaScript BigInt (`any` tag 122).
type BigInt int64

// readAny decodes one `any` value already known to be well formed (it came from skipAny):
// nil for null, Undefined, bool, float64 for numbers, BigInt, string, []byte, []any and
// map[string]any.
func readAny(b []byte) any {
	d := decoder{buf: b}
	v, _ := d.anyValue()
	return v
}

func (d *decoder) anyValue() (any, error) {
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case 127:
		return Undefined{}, nil
	case 126:
		return nil, nil
	case 125:
		v, err := d.int()
		return float64(v), err
	case 124:
		b, err := d.fixed(4)
		if err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case 123:
		b, err := d.fixed(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case 122:
		b, err := d.fixed(8)
		if err != nil {
			return nil, err
		}
		return BigInt(int64(binary.BigEndian.Uint64(b))), nil //nolint:gosec // G115: lib0 writes a BigInt64 as its two's complement bits
	case 121:
		return false, nil
	case 120:
		return true, nil
	case 119:
		return d.string()
	case 116:
		b, err := d.bytes()
		return append([]byte{}, b...), err
	case 118:
		n, err := d.count(2)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			k, err := d.string()
			if err != nil {
				return nil, err
			}
			if m[k], err = d.anyValue(); err != nil {
				return nil, err
			}
		}
		return m, nil
	case 117:
		n, err := d.count(1)
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.anyValue(); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, malformed("unknown value tag %d", tag)
}

// writeAny encodes a Go value as lib0 writes the JavaScript value it stands for: integers
// within 31 bits as varInt, numbers exact in float32 as float32, others as float64.
func (e *encoder) writeAny(v any) error {
	switch x := v.(type) {
	case nil:
		e.byte(126)
	case Undefined:
		e.byte(127)
	case bool:
		if x {
			e.byte(120)
		} else {
			e.byte(121)
		}
	case string:
		e.byte(119)
		e.string(x)
	case []byte:
		e.byte(116)
		e.bytes(x)
	case BigInt:
		e.byte(122)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(x)) //nolint:gosec // G115: lib0 writes a BigInt64 as its two's complement bits
	case float64:
		e.number(x)
	case int:
		e.number(float64(x))
	case int64:
		e.number(float64(x))
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := x.Float64()
		if err != nil {
			return fmt.Errorf("%w: number %v out of range", ErrValue, x)
		}
		e.number(f)
	case map[string]any:
		e.byte(118)
		e.uint(uint64(len(x)))
		for _, k := range sortedKeys(x) {
			e.string(k)
			if err := e.writeAny(x[k]); err != nil {
				return err
			}
		}
	case []any:
		e.byte(117)
		e.uint(uint64(len(x)))
		for _, el := range x {
			if err := e.writeAny(el); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w: unsupported value of type %T", ErrValue, v)
	}
	return nil
}

func (e *encoder) number(f float64) {
	switch {
	case f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 && !(f == 0 && math.Signbit(f)):
		e.byte(125)
		e.int(int64(f))
	case float64(float32(f)) == f:
		e.byte(124)
		e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(float32(f)))
	default:
		e.byte(123)
		e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(f))
	}
}
