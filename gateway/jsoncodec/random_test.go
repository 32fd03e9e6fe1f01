package jsoncodec

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Random messages for the differential tests, of any type (generated or dynamic), filled
// through protoreflect only.

var tricky = []string{"", "a", "café", "quote\"back\\slash", "ctl\x00\x01\x1f\x7f", "tab\tnl\n\r\b\f", "<&>", "\u2028\u2029",
	"😀 emoji", "\ufffd replacement", strings.Repeat("x", 70), "ünïcödé ключ 键"}

var floats = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1e-7, 1e-6, 9.999999e-7, 123456789.125, 1e20, 1e21, 1e22, 5e-324,
	math.MaxFloat64, math.SmallestNonzeroFloat32, math.MaxFloat32, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1), 1784567890}

func randomString(r *rand.Rand) string {
	if r.IntN(3) > 0 {
		return tricky[r.IntN(len(tricky))]
	}
	var b strings.Builder
	for range r.IntN(12) {
		var c rune
		switch r.IntN(4) {
		case 0:
			c = rune(r.IntN(0x80))
		case 1:
			c = rune(0x80 + r.IntN(0x800-0x80))
		case 2:
			c = rune(0x800 + r.IntN(0x10000-0x800))
		default:
			c = rune(0x10000 + r.IntN(utf8.MaxRune-0x10000))
		}
		if !utf8.ValidRune(c) {
			c = 'x'
		}
		b.WriteRune(c)
	}
	return b.String()
}

func randomFloat(r *rand.Rand) float64 {
	if r.IntN(3) == 0 {
		return math.Float64frombits(r.Uint64())
	}
	return floats[r.IntN(len(floats))]
}

// randomInt gives small, edge and arbitrary values alike.
func randomInt(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return uint64(r.IntN(5)) - 2
	case 1:
		edges := []uint64{math.MaxInt32, 1 << 31, math.MaxUint32, 1 << 32, math.MaxInt64, 1 << 63, math.MaxUint64, 1 << 53, 1<<53 + 1}
		return edges[r.IntN(len(edges))]
	}
	return r.Uint64() >> r.IntN(64)
}

// fill sets a random subset of m's fields to random values, nesting up to depth.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Value":
		fillValue(r, m, depth)
		return
	case "google.protobuf.Timestamp":
		secs, nanos := r.Int64N(253402300799+62135596800)-62135596800, r.Int64N(1e9)
		if r.IntN(20) == 0 {
			secs = int64(randomInt(r)) // out of range: protojson refuses, and so must we
		}
		setInts(m, secs, nanos)
		return
	case "google.protobuf.Duration":
		secs, nanos := r.Int64N(315576000000), r.Int64N(1e9)
		if r.IntN(2) == 0 {
			secs, nanos = -secs, -nanos
		}
		if r.IntN(20) == 0 {
			nanos = -nanos + 1 // mixed signs: refused
		}
		setInts(m, secs, nanos)
		return
	case "google.protobuf.FieldMask":
		paths := []string{"a", "user_id", "a.b_c", "documents.access_role", "x1.y2"}
		if r.IntN(20) == 0 {
			paths = append(paths, "Bad_Path") // not writable in JSON: refused
		}
		l := m.Mutable(md.Fields().ByName("paths")).List()
		for range r.IntN(3) {
			l.Append(protoreflect.ValueOfString(paths[r.IntN(len(paths))]))
		}
		return
	case "google.protobuf.Any":
		var inner proto.Message
		switch r.IntN(3) {
		case 0:
			inner = durationpb.New(1500000000)
		case 1:
			inner = timestamppb.New(timestamppb.Now().AsTime())
		default:
			inner, _ = structpb.NewStruct(map[string]any{"k": "v", "n": 1.5})
		}
		a, err := anypb.New(inner)
		if err != nil {
			panic(err)
		}
		m.Set(md.Fields().ByName("type_url"), protoreflect.ValueOfString(a.TypeUrl))
		m.Set(md.Fields().ByName("value"), protoreflect.ValueOfBytes(a.Value))
		return
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if r.IntN(10) < 3 || (fd.Message() != nil && depth <= 0) {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				l.Append(randomValue(r, fd, l.NewElement, depth))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				key := randomScalar(r, fd.MapKey()).MapKey()
				mp.Set(key, randomValue(r, fd.MapValue(), mp.NewValue, depth))
			}
		default:
			m.Set(fd, randomValue(r, fd, func() protoreflect.Value { return m.NewField(fd) }, depth))
		}
	}
}

func setInts(m protoreflect.Message, secs, nanos int64) {
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("seconds"), protoreflect.ValueOfInt64(secs))
	m.Set(fields.ByName("nanos"), protoreflect.ValueOfInt32(int32(nanos)))
}

// fillValue sets one kind of a google.protobuf.Value (rarely none, which protojson refuses).
func fillValue(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	switch n := r.IntN(7); {
	case n == 6 && r.IntN(10) == 0:
		// no kind
	case n == 0 || depth <= 0:
		m.Set(fields.ByName("string_value"), protoreflect.ValueOfString(randomString(r)))
	case n == 1:
		m.Set(fields.ByName("null_value"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(r.IntN(2))))
	case n == 2:
		f := randomFloat(r)
		if (math.IsNaN(f) || math.IsInf(f, 0)) && r.IntN(10) > 0 {
			f = 2.5 // now and then kept: protojson refuses it, and so must we
		}
		m.Set(fields.ByName("number_value"), protoreflect.ValueOfFloat64(f))
	case n == 3:
		m.Set(fields.ByName("bool_value"), protoreflect.ValueOfBool(r.IntN(2) == 0))
	case n == 4:
		fd := fields.ByName("struct_value")
		s := m.NewField(fd)
		entries := s.Message().Mutable(s.Message().Descriptor().Fields().ByName("fields")).Map()
		for range r.IntN(3) {
			inner := entries.NewValue()
			fillValue(r, inner.Message(), depth-1)
			entries.Set(protoreflect.ValueOfString(randomString(r)).MapKey(), inner)
		}
		m.Set(fd, s)
	default:
		fd := fields.ByName("list_value")
		lv := m.NewField(fd)
		l := lv.Message().Mutable(lv.Message().Descriptor().Fields().ByName("values")).List()
		for range r.IntN(3) {
			inner := l.NewElement()
			fillValue(r, inner.Message(), depth-1)
			l.Append(inner)
		}
		m.Set(fd, lv)
	}
}

func randomValue(r *rand.Rand, fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, depth int) protoreflect.Value {
	if fd.Message() != nil {
		v := newMsg()
		fill(r, v.Message(), depth-1)
		return v
	}
	return randomScalar(r, fd)
}

func randomScalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(randomString(r))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(randomInt(r)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(randomInt(r)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(randomInt(r)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(randomInt(r))
	case protoreflect.FloatKind:
		if r.IntN(3) == 0 {
			return protoreflect.ValueOfFloat32(math.Float32frombits(r.Uint32()))
		}
		return protoreflect.ValueOfFloat32(float32(randomFloat(r)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(randomFloat(r))
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.EnumKind:
		if r.IntN(5) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(randomInt(r)))) // unknown numbers too
		}
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	}
	panic("kind " + fd.Kind().String())
}

func compact(t testing.TB, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return buf.String()
}
