package jsoncodec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// buffers keeps encoding buffers between responses: large answers would otherwise regrow a
// fresh buffer many times each.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooled bounds the buffers kept, so one huge answer does not pin its memory.
const maxPooled = 1 << 20

// Marshal writes m as protojson does with EmitUnpopulated, wrapped in prefix and suffix (the
// gateway's {"result": ...} envelope, say), in a buffer of its own.
//
// m may be an answer the gateway's connections kept undecoded (all of it in its unknown
// fields) or an ordinary decoded message. Either way the JSON is written from the wire form:
// a decoded message is marshalled first, so that one encoder, wire.go's, writes every answer.
func Marshal(m proto.Message, prefix, suffix string) ([]byte, error) {
	p, err := MarshalPooled(m, prefix, suffix)
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(p.JSON)
	p.Release()
	return out, nil
}

// Pooled is JSON written into a buffer of the codec's pool (MarshalPooled).
type Pooled struct {
	JSON []byte
	bp   *[]byte
}

// Release gives the buffer back to the pool; the JSON must not be used after.
func (p Pooled) Release() {
	if p.bp != nil {
		release(p.bp, p.JSON)
	}
}

// MarshalPooled is Marshal into a buffer of the codec's pool, for a caller that is done with
// the JSON soon (it has written it) and then releases it. Large answers then cost no fresh
// allocation of their size each.
func MarshalPooled(m proto.Message, prefix, suffix string) (Pooled, error) {
	r := m.ProtoReflect()
	bp := buffers.Get().(*[]byte)
	buf := append((*bp)[:0], prefix...)
	var err error
	if undecoded(r) {
		buf, err = appendWireJSON(buf, r.Descriptor(), r.GetUnknown())
	} else {
		wp := buffers.Get().(*[]byte)
		var wire []byte
		if wire, err = (proto.MarshalOptions{}).MarshalAppend((*wp)[:0], m); err == nil {
			buf, err = appendWireJSON(buf, r.Descriptor(), wire)
		} else {
			err = fmt.Errorf("jsoncodec: marshal %s: %w", r.Descriptor().FullName(), err)
		}
		release(wp, wire)
	}
	buf = append(buf, suffix...)
	if err != nil {
		release(bp, buf)
		return Pooled{}, err
	}
	return Pooled{JSON: buf, bp: bp}, nil
}

// release returns a buffer to the pool unless it grew too large to keep.
func release(bp *[]byte, buf []byte) {
	if cap(buf) <= maxPooled {
		*bp = buf
		buffers.Put(bp)
	}
}

// undecoded reports whether all of m is in its unknown fields: an answer the gateway's
// connections kept as bytes. Those bytes are then its wire form as they are (marshalling it
// would copy them unchanged), so they are written without that copy.
func undecoded(m protoreflect.Message) bool {
	if len(m.GetUnknown()) == 0 {
		return false
	}
	set := false
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		set = true
		return false
	})
	return !set
}

func cmpOrdered[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendFloat formats like protojson (and encoding/json): NaN and infinities as strings,
// exponents only for very small or large values, without a leading zero in the exponent.
func appendFloat(out []byte, n float64, bitSize int) []byte {
	switch {
	case math.IsNaN(n):
		return append(out, `"NaN"`...)
	case math.IsInf(n, 1):
		return append(out, `"Infinity"`...)
	case math.IsInf(n, -1):
		return append(out, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(n); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) || bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	out = strconv.AppendFloat(out, n, format, -1, bitSize)
	if format == 'e' {
		if l := len(out); l >= 4 && out[l-4] == 'e' && out[l-3] == '-' && out[l-2] == '0' {
			out[l-2] = out[l-1]
			out = out[:l-1]
		}
	}
	return out
}

var errInvalidUTF8 = errors.New("jsoncodec: string field contains invalid UTF-8")

// appendString quotes s, escaping only what JSON requires, as protojson does; invalid UTF-8
// is an error there too.
func appendString(out []byte, s string) ([]byte, error) {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return out, errInvalidUTF8
			}
			i += size
			continue
		}
		out = append(out, s[start:i]...)
		out = append(out, '\\')
		switch c {
		case '"', '\\':
			out = append(out, c)
		case '\b':
			out = append(out, 'b')
		case '\f':
			out = append(out, 'f')
		case '\n':
			out = append(out, 'n')
		case '\r':
			out = append(out, 'r')
		case '\t':
			out = append(out, 't')
		default:
			out = append(out, 'u')
			out = append(out, "0000"[1+(bits.Len32(uint32(c))-1)/4:]...)
			out = strconv.AppendUint(out, uint64(c), 16)
		}
		i++
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"'), nil
}
