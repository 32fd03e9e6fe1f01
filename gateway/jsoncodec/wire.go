package jsoncodec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The one JSON writer of the package. It reads a message's wire bytes and writes what protojson
// (EmitUnpopulated) writes for the message that proto.Unmarshal makes of those bytes: the same
// field names and order, nulls, defaults, number and string forms and sorted map keys. Decoding
// an answer into Go values only to walk them again was the largest cost of a large answer
// (docs/benchmarks.md), so nothing here decodes, except the well-known types the API does not
// use, which go to protojson.
//
// What decoding does with bytes that repeat or mix fields is followed exactly: the last
// occurrence of a singular field counts; occurrences of a message field merge (for encoded
// messages, merging is concatenation); of a oneof, the member seen last counts, and its message
// merges only the occurrences since another member was seen; a map key seen twice keeps its
// last entry; lists take packed runs and single elements alike; an occurrence whose wire type
// does not fit its field is an unknown field, as are unknown field numbers.

var errBadWire = errors.New("jsoncodec: malformed protobuf bytes")

// maxWireDepth bounds the nesting of the messages written, as proto.Unmarshal bounds what it
// decodes: deeper bytes could not have come from a decoded message.
const maxWireDepth = protowire.DefaultRecursionLimit

// appendWireJSON writes the message md encoded in b.
func appendWireJSON(out []byte, md protoreflect.MessageDescriptor, b []byte) ([]byte, error) {
	out, err := planFor(md).write(out, b, 0)
	if err != nil {
		return out, fmt.Errorf("jsoncodec: write %s: %w", md.FullName(), err)
	}
	return out, nil
}

// special says how a message's JSON differs from an object of its fields.
type special uint8

const (
	ordinary     special = iota
	wrapper              // google.protobuf.*Value wrappers: the bare value
	structType           // google.protobuf.Struct: an object of its map
	listValue            // google.protobuf.ListValue: an array
	value                // google.protobuf.Value: whichever kind is set
	empty                // google.protobuf.Empty: {}
	viaProtojson         // Any, Timestamp, Duration, FieldMask: decoded and handed to protojson
)

var specials = map[protoreflect.FullName]special{
	"google.protobuf.DoubleValue": wrapper,
	"google.protobuf.FloatValue":  wrapper,
	"google.protobuf.Int64Value":  wrapper,
	"google.protobuf.UInt64Value": wrapper,
	"google.protobuf.Int32Value":  wrapper,
	"google.protobuf.UInt32Value": wrapper,
	"google.protobuf.BoolValue":   wrapper,
	"google.protobuf.StringValue": wrapper,
	"google.protobuf.BytesValue":  wrapper,
	"google.protobuf.Struct":      structType,
	"google.protobuf.ListValue":   listValue,
	"google.protobuf.Value":       value,
	"google.protobuf.Empty":       empty,
	"google.protobuf.Any":         viaProtojson,
	"google.protobuf.Timestamp":   viaProtojson,
	"google.protobuf.Duration":    viaProtojson,
	"google.protobuf.FieldMask":   viaProtojson,
}

// whyNotFromWire says why the wire encoder would not write field fd itself, "" when it does:
// a kind it does not read (groups), or a well-known type it hands to protojson. A test holds
// every field of the API's messages to "", so the gateway's answers never leave the fast path.
func whyNotFromWire(fd protoreflect.FieldDescriptor) string {
	for _, d := range []protoreflect.FieldDescriptor{fd, fd.MapKey(), fd.MapValue()} {
		if d == nil {
			continue
		}
		if d.Kind() == protoreflect.GroupKind {
			return "group encoding"
		}
		if md := d.Message(); md != nil && specials[md.FullName()] == viaProtojson {
			return string(md.FullName()) + ", which goes to protojson"
		}
	}
	return ""
}

// shape is a field's cardinality as the JSON shows it.
type shape uint8

const (
	singular shape = iota
	list
	mapOf
)

// scalarSpec is what reading and writing one value of a kind needs, taken out of the
// descriptors once: asking them through their interfaces for every value was a large share of
// the cost.
type scalarSpec struct {
	kind     protoreflect.Kind
	wt       protowire.Type
	enum     protoreflect.EnumValueDescriptors
	nullEnum bool // google.protobuf.NullValue, written as null
}

func newScalarSpec(fd protoreflect.FieldDescriptor) scalarSpec {
	s := scalarSpec{kind: fd.Kind()}
	switch s.kind {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		s.wt = protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		s.wt = protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		s.wt = protowire.Fixed64Type
	case protoreflect.GroupKind:
		s.wt = protowire.StartGroupType
	default:
		s.wt = protowire.BytesType
	}
	if ed := fd.Enum(); ed != nil {
		s.enum = ed.Values()
		s.nullEnum = ed.FullName() == "google.protobuf.NullValue"
	}
	return s
}

// packable reports whether a list of this kind may come in packed runs.
func (s *scalarSpec) packable() bool {
	return s.wt == protowire.VarintType || s.wt == protowire.Fixed32Type || s.wt == protowire.Fixed64Type
}

// plan is what writing one message type needs, worked out once per type.
type plan struct {
	md      protoreflect.MessageDescriptor
	special special
	fields  []planField
	direct  []int16 // field number -> index+1 in fields, for small numbers
	byNum   map[protowire.Number]int
	oneofs  int
}

type planField struct {
	fd       protoreflect.FieldDescriptor
	num      protowire.Number
	prefix   []byte // `"jsonName":`
	shape    shape
	oneof    int  // index of its oneof (proto3 optional included), or -1
	presence bool // unset shows as null: message fields and proto2 scalars
	msg      bool // its value (element, map value) is a message
	val      scalarSpec
	key      scalarSpec // map keys
	// sub is the plan of the field's message, or of its map's message values, found on first
	// use (plans of recursive messages would otherwise never finish building).
	sub atomic.Pointer[plan]
}

func (f *planField) subPlan() *plan {
	if p := f.sub.Load(); p != nil {
		return p
	}
	md := f.fd.Message()
	if f.shape == mapOf {
		md = f.fd.MapValue().Message()
	}
	p := planFor(md)
	f.sub.Store(p)
	return p
}

// accepts reports whether an occurrence of wire type t is this field's; one that is not is an
// unknown field to a decoder.
func (f *planField) accepts(t protowire.Type) bool {
	switch f.shape {
	case mapOf:
		return t == protowire.BytesType
	case list:
		return t == f.val.wt || t == protowire.BytesType && f.val.packable()
	}
	return t == f.val.wt
}

// directNumbers is how many field numbers a plan looks up in a slice rather than a map.
const directNumbers = 64

var plans sync.Map // protoreflect.MessageDescriptor -> *plan

func planFor(md protoreflect.MessageDescriptor) *plan {
	if p, ok := plans.Load(md); ok {
		return p.(*plan)
	}
	fields := md.Fields()
	p := &plan{md: md, special: specials[md.FullName()], oneofs: md.Oneofs().Len(),
		fields: make([]planField, fields.Len()), direct: make([]int16, directNumbers)}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		prefix, _ := appendString(nil, fd.JSONName())
		f := &p.fields[i]
		f.fd, f.num, f.prefix, f.oneof = fd, fd.Number(), append(prefix, ':'), -1
		if od := fd.ContainingOneof(); od != nil {
			f.oneof = od.Index()
		}
		switch {
		case fd.IsMap():
			f.shape, f.key, f.val = mapOf, newScalarSpec(fd.MapKey()), newScalarSpec(fd.MapValue())
			f.msg = fd.MapValue().Message() != nil
		case fd.IsList():
			f.shape, f.val, f.msg = list, newScalarSpec(fd), fd.Message() != nil
		default:
			f.shape, f.val, f.msg = singular, newScalarSpec(fd), fd.Message() != nil
			f.presence = fd.HasPresence() && f.oneof < 0
		}
		if n := fd.Number(); n < directNumbers {
			p.direct[n] = int16(i + 1)
		} else {
			if p.byNum == nil {
				p.byNum = map[protowire.Number]int{}
			}
			p.byNum[n] = i
		}
	}
	actual, _ := plans.LoadOrStore(md, p)
	return actual.(*plan)
}

func (p *plan) index(num protowire.Number) int {
	if num < directNumbers {
		return int(p.direct[num]) - 1
	}
	if i, ok := p.byNum[num]; ok {
		return i
	}
	return -1
}

// maxNoted is how many fields (and oneofs) a message may have for its notes to live on the
// stack; larger messages allocate them.
const maxNoted = 16

// noted is what one pass over a message's bytes learns of a field: its last value, and where
// its run of occurrences starts (the first one, or for a oneof member the first one since
// another member was seen) and how many there are.
type noted struct {
	raw   []byte
	u     uint64
	start int
	count int
}

// next reads the field at b[off:]: its number and wire type, its value (a number in u, or the
// bytes of a length-delimited value in raw), and where the next field starts; end < 0 when the
// bytes are malformed.
func next(b []byte, off int) (num protowire.Number, typ protowire.Type, raw []byte, u uint64, end int) {
	num, typ, n := protowire.ConsumeTag(b[off:])
	if n < 0 || num > protowire.MaxValidNumber {
		return 0, 0, nil, 0, -1
	}
	off += n
	switch typ {
	case protowire.VarintType:
		u, n = protowire.ConsumeVarint(b[off:])
	case protowire.Fixed32Type:
		var v uint32
		v, n = protowire.ConsumeFixed32(b[off:])
		u = uint64(v)
	case protowire.Fixed64Type:
		u, n = protowire.ConsumeFixed64(b[off:])
	case protowire.BytesType:
		raw, n = protowire.ConsumeBytes(b[off:])
	default:
		n = protowire.ConsumeFieldValue(num, typ, b[off:])
	}
	if n < 0 {
		return 0, 0, nil, 0, -1
	}
	return num, typ, raw, u, off + n
}

// write writes the message encoded in b.
func (p *plan) write(out []byte, b []byte, depth int) ([]byte, error) {
	if depth > maxWireDepth {
		return out, errors.New("messages nested too deeply")
	}
	if p.special == viaProtojson {
		return p.writeViaProtojson(out, b)
	}
	var (
		smallNotes [maxNoted]noted
		smallWins  [maxNoted]int16
		notes      []noted
		winners    []int16 // per oneof: index+1 of the member seen last
	)
	if len(p.fields) <= maxNoted {
		notes = smallNotes[:len(p.fields)]
	} else {
		notes = make([]noted, len(p.fields))
	}
	if p.oneofs <= maxNoted {
		winners = smallWins[:p.oneofs]
	} else {
		winners = make([]int16, p.oneofs)
	}
	for off := 0; off < len(b); {
		num, typ, raw, u, end := next(b, off)
		if end < 0 {
			return out, errBadWire
		}
		i := p.index(num)
		if i >= 0 && p.fields[i].accepts(typ) {
			n := &notes[i]
			if o := p.fields[i].oneof; o >= 0 && winners[o] != int16(i+1) { //nolint:gosec // G115: i indexes a message's fields, far fewer than 2^15
				winners[o] = int16(i + 1) //nolint:gosec // G115: as above
				n.count = 0
			}
			if n.count == 0 {
				n.start = off
			}
			n.count++
			n.raw, n.u = raw, u
		}
		off = end
	}

	switch p.special {
	case wrapper, structType, listValue:
		return p.writeField(out, 0, &notes[0], b, depth)
	case value:
		w := int(winners[0]) - 1
		if w < 0 {
			return out, errors.New("google.protobuf.Value with no kind set")
		}
		if f := &p.fields[w]; f.val.kind == protoreflect.DoubleKind {
			if v := math.Float64frombits(notes[w].u); math.IsNaN(v) || math.IsInf(v, 0) {
				return out, errors.New("google.protobuf.Value cannot hold NaN or infinity")
			}
		}
		return p.writeField(out, w, &notes[w], b, depth)
	case empty:
		return append(out, "{}"...), nil
	}

	out = append(out, '{')
	first := true
	var err error
	for i := range p.fields {
		f := &p.fields[i]
		if f.oneof >= 0 && winners[f.oneof] != int16(i+1) {
			continue // of a oneof, only the member set appears
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, f.prefix...)
		if out, err = p.writeField(out, i, &notes[i], b, depth); err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// writeField writes field i's value, given what the pass over b noted of it.
func (p *plan) writeField(out []byte, i int, n *noted, b []byte, depth int) ([]byte, error) {
	f := &p.fields[i]
	switch {
	case f.shape == mapOf:
		if n.count == 0 {
			return append(out, "{}"...), nil
		}
		return f.writeMap(out, b[n.start:], n.count, depth)
	case f.shape == list:
		if n.count == 0 {
			return append(out, "[]"...), nil
		}
		return f.writeList(out, b[n.start:], depth)
	case f.msg && n.count == 0:
		return append(out, "null"...), nil
	case f.msg && n.count == 1:
		return f.subPlan().write(out, n.raw, depth+1)
	case f.msg:
		// Occurrences of a message merge, which for encoded messages is their concatenation.
		var parts []byte
		for off := n.start; off < len(b); {
			num, typ, raw, _, end := next(b, off)
			if end < 0 {
				return out, errBadWire
			}
			if num == f.num && typ == protowire.BytesType {
				parts = append(parts, raw...)
			}
			off = end
		}
		return f.subPlan().write(out, parts, depth+1)
	case n.count == 0 && f.presence:
		return append(out, "null"...), nil
	}
	return appendScalar(out, &f.val, n.raw, n.u)
}

// writeList writes a list field's elements found in b, which starts at its first occurrence.
func (f *planField) writeList(out []byte, b []byte, depth int) ([]byte, error) {
	out = append(out, '[')
	count := 0
	var err error
	for off := 0; off < len(b); {
		num, typ, raw, u, end := next(b, off)
		if end < 0 {
			return out, errBadWire
		}
		off = end
		if num != f.num || !f.accepts(typ) {
			continue
		}
		if typ != protowire.BytesType || !f.val.packable() {
			if count > 0 {
				out = append(out, ',')
			}
			count++
			if f.msg {
				out, err = f.subPlan().write(out, raw, depth+1)
			} else {
				out, err = appendScalar(out, &f.val, raw, u)
			}
			if err != nil {
				return out, err
			}
			continue
		}
		// A packed run of numbers.
		for len(raw) > 0 {
			var n int
			switch f.val.wt {
			case protowire.VarintType:
				u, n = protowire.ConsumeVarint(raw)
			case protowire.Fixed32Type:
				var v uint32
				v, n = protowire.ConsumeFixed32(raw)
				u = uint64(v)
			default:
				u, n = protowire.ConsumeFixed64(raw)
			}
			if n < 0 {
				return out, errBadWire
			}
			raw = raw[n:]
			if count > 0 {
				out = append(out, ',')
			}
			count++
			if out, err = appendScalar(out, &f.val, nil, u); err != nil {
				return out, err
			}
		}
	}
	return append(out, ']'), nil
}

// appendScalar writes a value that is not a message: from raw for strings and bytes, from u
// (a varint or fixed value as read) for numbers.
func appendScalar(out []byte, s *scalarSpec, raw []byte, u uint64) ([]byte, error) {
	switch s.kind {
	case protoreflect.StringKind:
		// raw is only read, and only during this call.
		return appendString(out, unsafe.String(unsafe.SliceData(raw), len(raw))) //nolint:gosec // G103: a read-only view, reviewed
	case protoreflect.BytesKind:
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, raw)
		return append(out, '"'), nil
	case protoreflect.BoolKind:
		return strconv.AppendBool(out, u != 0), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(out, signedOf(s.kind, u), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(out, unsignedOf(s.kind, u), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind, protoreflect.Sint64Kind:
		out = append(out, '"') // 64-bit integers are strings in JSON
		return append(strconv.AppendInt(out, signedOf(s.kind, u), 10), '"'), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		out = append(out, '"')
		return append(strconv.AppendUint(out, u, 10), '"'), nil
	case protoreflect.FloatKind:
		return appendFloat(out, float64(math.Float32frombits(uint32(u))), 32), nil //nolint:gosec // G115: a fixed32 value: the low 32 bits are the float, as protobuf reads it
	case protoreflect.DoubleKind:
		return appendFloat(out, math.Float64frombits(u), 64), nil
	case protoreflect.EnumKind:
		if s.nullEnum {
			return append(out, "null"...), nil
		}
		n := protoreflect.EnumNumber(int32(u)) //nolint:gosec // G115: protobuf truncates an enum varint to int32, as here
		if ev := s.enum.ByNumber(n); ev != nil {
			return appendString(out, string(ev.Name()))
		}
		return strconv.AppendInt(out, int64(n), 10), nil
	}
	return out, errors.New("unsupported field kind " + s.kind.String())
}

// wireEntry is one map entry: its key as written and as sorted, and its value.
type wireEntry struct {
	key   string
	sortI int64
	sortU uint64
	raw   []byte // a message, string or bytes value
	u     uint64 // a number value
}

// writeMap writes a map's entries found in b (which starts at its first entry; count entries
// in all), each an encoded {1: key, 2: value} message, sorted as protojson sorts them; a key that
// occurs twice keeps its last entry, as decoding does.
//
//nolint:gocyclo,funlen // a kernel: reads the wire format's entries and sorts them by key kind in one place, on every map of a response
func (f *planField) writeMap(out []byte, b []byte, count int, depth int) ([]byte, error) {
	list := make([]wireEntry, 0, count)
	for off := 0; off < len(b); {
		num, typ, e, _, end := next(b, off)
		if end < 0 {
			return out, errBadWire
		}
		off = end
		if num != f.num || typ != protowire.BytesType {
			continue
		}
		var (
			we     wireEntry
			keyRaw []byte
			keyNum uint64
			values int // occurrences of the value: a message value given twice merges
		)
		for eo := 0; eo < len(e); {
			n, t, raw, u, end := next(e, eo)
			if end < 0 {
				return out, errBadWire
			}
			eo = end
			switch {
			case n == 1 && t == f.key.wt:
				keyRaw, keyNum = raw, u
			case n == 2 && t == f.val.wt:
				switch {
				case !f.msg || values == 0:
					we.raw, we.u = raw, u
				case values == 1:
					we.raw = slices.Concat(we.raw, raw) // a copy: we.raw points into b
				default:
					we.raw = append(we.raw, raw...)
				}
				values++
			}
		}
		switch {
		case f.key.kind == protoreflect.StringKind:
			// The key's bytes live in b for the whole call; no copy needed.
			we.key = unsafe.String(unsafe.SliceData(keyRaw), len(keyRaw)) //nolint:gosec // G103: reviewed, see above
		case f.key.kind == protoreflect.BoolKind:
			we.key = strconv.FormatBool(keyNum != 0)
			if keyNum != 0 {
				we.sortU = 1
			}
		case unsignedKind(f.key.kind):
			we.sortU = unsignedOf(f.key.kind, keyNum)
			we.key = strconv.FormatUint(we.sortU, 10)
		default:
			we.sortI = signedOf(f.key.kind, keyNum)
			we.key = strconv.FormatInt(we.sortI, 10)
		}
		list = append(list, we)
	}
	var cmp func(a, b *wireEntry) int
	switch {
	case f.key.kind == protoreflect.StringKind:
		cmp = func(a, b *wireEntry) int { return strings.Compare(a.key, b.key) }
	case f.key.kind == protoreflect.BoolKind || unsignedKind(f.key.kind):
		cmp = func(a, b *wireEntry) int { return cmpOrdered(a.sortU, b.sortU) }
	default:
		cmp = func(a, b *wireEntry) int { return cmpOrdered(a.sortI, b.sortI) }
	}
	// Sort positions, not the entries themselves, with ties kept in wire order.
	order := make([]int32, len(list))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp(&list[a], &list[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	out = append(out, '{')
	written := 0
	var err error
	for i, pos := range order {
		we := &list[pos]
		if i+1 < len(order) && cmp(we, &list[order[i+1]]) == 0 {
			continue // a later entry has this key
		}
		if written > 0 {
			out = append(out, ',')
		}
		written++
		if out, err = appendString(out, we.key); err != nil {
			return out, err
		}
		out = append(out, ':')
		if f.msg {
			out, err = f.subPlan().write(out, we.raw, depth+1) // no value: an empty message
		} else {
			out, err = appendScalar(out, &f.val, we.raw, we.u)
		}
		if err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// signedOf is the value of a signed integer kind read as u (a varint or fixed value), as
// decoding gives it.
//
//nolint:gosec // G115: the truncations are protobuf's own decoding of 32-bit and zigzag kinds
func signedOf(k protoreflect.Kind, u uint64) int64 {
	switch k {
	case protoreflect.Int32Kind:
		return int64(int32(u))
	case protoreflect.Sint32Kind:
		return int64(int32(protowire.DecodeZigZag(u & math.MaxUint32)))
	case protoreflect.Sfixed32Kind:
		return int64(int32(uint32(u)))
	case protoreflect.Sint64Kind:
		return protowire.DecodeZigZag(u)
	}
	return int64(u)
}

// unsignedOf is signedOf for the unsigned kinds.
//
//nolint:gosec // G115: protobuf truncates 32-bit unsigned kinds so
func unsignedOf(k protoreflect.Kind, u uint64) uint64 {
	switch k {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return uint64(uint32(u))
	}
	return u
}

func unsignedKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// writeViaProtojson decodes a well-known type the API does not use and lets protojson write it.
func (p *plan) writeViaProtojson(out []byte, b []byte) ([]byte, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(p.md.FullName())
	if err != nil {
		return out, fmt.Errorf("find %s: %w", p.md.FullName(), err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return out, fmt.Errorf("decode %s: %w", p.md.FullName(), err)
	}
	j, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return out, fmt.Errorf("protojson: %w", err)
	}
	// protojson adds white space at random to keep callers from relying on its exact bytes.
	var compact bytes.Buffer
	if err := json.Compact(&compact, j); err != nil {
		return out, fmt.Errorf("compact protojson output: %w", err)
	}
	return append(out, compact.Bytes()...), nil
}
