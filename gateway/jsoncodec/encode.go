package jsoncodec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendJSON writes m as protojson does with EmitUnpopulated (same field names, order, defaults,
// nulls, number and string forms, sorted map keys), several times faster: protojson's
// generality (ordering helpers, per-value interfaces) dominated the gateway's cost on large
// answers. Well-known types other than Struct, Value, ListValue, the wrappers and Empty are
// rare in this API and go to protojson. encode_test.go compares the two on every message of
// the API.
func appendJSON(out []byte, m protoreflect.Message) ([]byte, error) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct":
		return appendStruct(out, m)
	case "google.protobuf.Value":
		return appendValue(out, m)
	case "google.protobuf.ListValue":
		return appendListValue(out, m)
	case "google.protobuf.Empty":
		return append(out, "{}"...), nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := m.Descriptor().Fields().ByNumber(1)
		return appendScalar(out, fd, m.Get(fd))
	case "google.protobuf.Any", "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask":
		b, err := protojson.Marshal(m.Interface())
		return append(out, b...), err
	}
	out = append(out, '{')
	fields := m.Descriptor().Fields()
	first := true
	var err error
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		set := m.Has(fd)
		// Fields of a oneof (including proto3 optional) appear only when set.
		if !set && fd.ContainingOneof() != nil {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if out, err = appendString(out, fd.JSONName()); err != nil {
			return out, err
		}
		out = append(out, ':')
		switch {
		case fd.IsList():
			out, err = appendList(out, fd, m.Get(fd).List())
		case fd.IsMap():
			out, err = appendMap(out, fd, m.Get(fd).Map())
		case !set && fd.Message() != nil:
			out = append(out, "null"...)
		default:
			out, err = appendSingular(out, fd, m.Get(fd))
		}
		if err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

func appendSingular(out []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	if fd.Message() != nil {
		return appendJSON(out, v.Message())
	}
	return appendScalar(out, fd, v)
}

func appendList(out []byte, fd protoreflect.FieldDescriptor, l protoreflect.List) ([]byte, error) {
	out = append(out, '[')
	var err error
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = appendSingular(out, fd, l.Get(i)); err != nil {
			return out, err
		}
	}
	return append(out, ']'), nil
}

type mapEntry struct {
	k protoreflect.MapKey
	s string // the key as written, kept to sort string keys without converting again
	v protoreflect.Value
}

func appendMap(out []byte, fd protoreflect.FieldDescriptor, m protoreflect.Map) ([]byte, error) {
	entries := make([]mapEntry, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		entries = append(entries, mapEntry{k: k, s: k.String(), v: v})
		return true
	})
	sortMapEntries(fd.MapKey().Kind(), entries)
	out = append(out, '{')
	var err error
	for i, e := range entries {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = appendString(out, e.s); err != nil {
			return out, err
		}
		out = append(out, ':')
		if out, err = appendSingular(out, fd.MapValue(), e.v); err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// sortMapEntries orders keys as protojson does: false before true, integers by value, strings
// by bytes.
func sortMapEntries(kind protoreflect.Kind, entries []mapEntry) {
	var cmp func(a, b protoreflect.MapKey) int
	switch kind {
	case protoreflect.StringKind:
		slices.SortFunc(entries, func(a, b mapEntry) int { return strings.Compare(a.s, b.s) })
		return
	case protoreflect.BoolKind:
		cmp = func(a, b protoreflect.MapKey) int {
			ab, bb := a.Bool(), b.Bool()
			switch {
			case ab == bb:
				return 0
			case !ab:
				return -1
			}
			return 1
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		cmp = func(a, b protoreflect.MapKey) int { return cmpOrdered(a.Uint(), b.Uint()) }
	default:
		cmp = func(a, b protoreflect.MapKey) int { return cmpOrdered(a.Int(), b.Int()) }
	}
	slices.SortFunc(entries, func(a, b mapEntry) int { return cmp(a.k, b.k) })
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

func appendScalar(out []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(out, v.Bool()), nil
	case protoreflect.StringKind:
		return appendString(out, v.String())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(out, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(out, v.Uint(), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		out = append(out, '"')
		return append(strconv.AppendInt(out, v.Int(), 10), '"'), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		out = append(out, '"')
		return append(strconv.AppendUint(out, v.Uint(), 10), '"'), nil
	case protoreflect.FloatKind:
		return appendFloat(out, v.Float(), 32), nil
	case protoreflect.DoubleKind:
		return appendFloat(out, v.Float(), 64), nil
	case protoreflect.BytesKind:
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, v.Bytes())
		return append(out, '"'), nil
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return append(out, "null"...), nil
		}
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendString(out, string(ev.Name()))
		}
		return strconv.AppendInt(out, int64(v.Enum()), 10), nil
	}
	return out, errors.New("json: unsupported field kind " + fd.Kind().String())
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

var errInvalidUTF8 = errors.New("json: string field contains invalid UTF-8")

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

func appendStruct(out []byte, m protoreflect.Message) ([]byte, error) {
	return appendMap(out, m.Descriptor().Fields().ByNumber(1), m.Get(m.Descriptor().Fields().ByNumber(1)).Map())
}

func appendListValue(out []byte, m protoreflect.Message) ([]byte, error) {
	fd := m.Descriptor().Fields().ByNumber(1)
	return appendList(out, fd, m.Get(fd).List())
}

// appendValue writes a google.protobuf.Value: its one set kind; protojson refuses an empty one.
func appendValue(out []byte, m protoreflect.Message) ([]byte, error) {
	od := m.Descriptor().Oneofs().ByName("kind")
	fd := m.WhichOneof(od)
	if fd == nil {
		return out, errors.New("json: google.protobuf.Value with no kind set")
	}
	v := m.Get(fd)
	if fd.Kind() == protoreflect.DoubleKind && (math.IsNaN(v.Float()) || math.IsInf(v.Float(), 0)) {
		return out, errors.New("json: google.protobuf.Value cannot hold NaN or infinity")
	}
	return appendSingular(out, fd, v)
}

// buffers keeps encoding buffers between responses: large answers would otherwise regrow a
// fresh buffer many times each.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooled bounds the buffers kept, so one huge answer does not pin its memory.
const maxPooled = 1 << 20

// Marshal writes m as protojson does with EmitUnpopulated, wrapped in prefix and suffix (the
// gateway's {"result": ...} envelope, say), in a buffer of its own. m may be an ordinary
// decoded message or an answer kept undecoded by the gateway's connections.
func Marshal(m proto.Message, prefix, suffix string) ([]byte, error) {
	bp := buffers.Get().(*[]byte)
	buf := append((*bp)[:0], prefix...)
	var err error
	if r := m.ProtoReflect(); undecoded(r) {
		buf, err = appendWireJSON(buf, r.Descriptor(), r.GetUnknown())
	} else {
		buf, err = appendJSON(buf, r)
	}
	buf = append(buf, suffix...)
	out := bytes.Clone(buf)
	if cap(buf) <= maxPooled {
		*bp = buf
		buffers.Put(bp)
	}
	return out, err
}
