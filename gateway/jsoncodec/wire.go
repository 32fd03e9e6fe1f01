package jsoncodec

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// undecoded reports whether all of m is in its unknown fields: an answer that the gateway's
// connections kept as bytes (see the gateway's deferredCodec). Its bytes are then the message's
// wire form as they are, with no need to marshal it again.
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

var errBadWire = errors.New("json: malformed protobuf answer")

// wireIter walks the fields of bytes already checked by checkWire.
type wireIter struct{ b []byte }

// next returns the next field: length-delimited values in raw, numbers in u.
func (it *wireIter) next() (num protowire.Number, typ protowire.Type, raw []byte, u uint64, ok bool) {
	if len(it.b) == 0 {
		return 0, 0, nil, 0, false
	}
	num, typ, n := protowire.ConsumeTag(it.b)
	it.b = it.b[n:]
	switch typ {
	case protowire.VarintType:
		u, n = protowire.ConsumeVarint(it.b)
	case protowire.Fixed32Type:
		var v uint32
		v, n = protowire.ConsumeFixed32(it.b)
		u = uint64(v)
	case protowire.Fixed64Type:
		u, n = protowire.ConsumeFixed64(it.b)
	case protowire.BytesType:
		raw, n = protowire.ConsumeBytes(it.b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, it.b)
	}
	it.b = it.b[n:]
	return num, typ, raw, u, true
}

// checkWire verifies that b is a sequence of well-formed fields.
func checkWire(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadWire
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return errBadWire
		}
		b = b[n:]
	}
	return nil
}

// wellKnownJSON lists the well-known types whose JSON is special: rare here, so they are
// decoded and written as appendJSON writes them.
var wellKnownJSON = map[protoreflect.FullName]bool{
	"google.protobuf.Struct": true, "google.protobuf.Value": true, "google.protobuf.ListValue": true, "google.protobuf.Empty": true,
	"google.protobuf.DoubleValue": true, "google.protobuf.FloatValue": true, "google.protobuf.Int64Value": true,
	"google.protobuf.UInt64Value": true, "google.protobuf.Int32Value": true, "google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue": true, "google.protobuf.StringValue": true, "google.protobuf.BytesValue": true,
	"google.protobuf.Any": true, "google.protobuf.Timestamp": true, "google.protobuf.Duration": true, "google.protobuf.FieldMask": true,
}

// wirePlan is what writing one message type needs, worked out once: asking descriptors
// through their interfaces for every field of every message was a large share of the cost.
type wirePlan struct {
	md        protoreflect.MessageDescriptor
	wellKnown bool
	fields    []wirePlanField
	byNumber  map[protowire.Number]int // field number -> index in fields
	oneofs    int
}

type wirePlanField struct {
	fd     protoreflect.FieldDescriptor
	num    protowire.Number
	prefix []byte // `"jsonName":`
	oneof  int    // index of its oneof, or -1
	isMap  bool
	isList bool
	isMsg  bool
	// sub is the plan of the field's message, or of its map's message values, found on first
	// use (plans of recursive messages would otherwise never finish building).
	sub atomic.Pointer[wirePlan]
}

func (f *wirePlanField) subPlan() *wirePlan {
	if p := f.sub.Load(); p != nil {
		return p
	}
	md := f.fd.Message()
	if f.isMap {
		md = f.fd.MapValue().Message()
	}
	p := planFor(md)
	f.sub.Store(p)
	return p
}

var wirePlans sync.Map // protoreflect.FullName -> *wirePlan

func planFor(md protoreflect.MessageDescriptor) *wirePlan {
	if p, ok := wirePlans.Load(md.FullName()); ok {
		return p.(*wirePlan)
	}
	fields := md.Fields()
	p := &wirePlan{md: md, wellKnown: wellKnownJSON[md.FullName()], byNumber: map[protowire.Number]int{}, oneofs: md.Oneofs().Len(),
		fields: make([]wirePlanField, fields.Len())}
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		prefix, _ := appendString(nil, fd.JSONName())
		f := &p.fields[i]
		f.fd, f.num, f.prefix, f.oneof = fd, fd.Number(), append(prefix, ':'), -1
		f.isMap, f.isList, f.isMsg = fd.IsMap(), fd.IsList() && !fd.IsMap(), fd.Message() != nil
		if od := fd.ContainingOneof(); od != nil {
			f.oneof = od.Index()
		}
		p.byNumber[fd.Number()] = i
	}
	wirePlans.Store(md.FullName(), p)
	return p
}

// maxNoted is how many fields (and oneofs) a message may have for the one-pass path; larger
// ones scan the bytes once per field.
const maxNoted = 16

// noted is a field's last occurrence in a message's bytes.
type noted struct {
	raw     []byte
	u       uint64
	isBytes bool
	count   int
	order   int
}

// appendWireJSON writes the message md encoded in b as appendJSON would write it decoded.
func appendWireJSON(out []byte, md protoreflect.MessageDescriptor, b []byte) ([]byte, error) {
	return appendWirePlan(out, planFor(md), b)
}

func appendWirePlan(out []byte, p *wirePlan, b []byte) ([]byte, error) {
	if p.wellKnown {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(p.md.FullName())
		if err != nil {
			return out, fmt.Errorf("json: %w", err)
		}
		m := mt.New()
		if err := proto.Unmarshal(b, m.Interface()); err != nil {
			return out, fmt.Errorf("json: %w", err)
		}
		return appendJSON(out, m)
	}
	if err := checkWire(b); err != nil {
		return out, err
	}
	if len(p.fields) > maxNoted || p.oneofs > maxNoted {
		return appendWireScanning(out, p, b)
	}
	// One pass notes each field's last occurrence, for the singular fields and the oneofs;
	// lists, maps and message fields seen more than once scan again for their field.
	var seen [maxNoted]noted
	it := wireIter{b}
	for order := 1; ; order++ {
		num, typ, raw, u, ok := it.next()
		if !ok {
			break
		}
		if i, known := p.byNumber[num]; known {
			n := &seen[i]
			n.raw, n.u, n.isBytes, n.order = raw, u, typ == protowire.BytesType, order
			n.count++
		}
	}
	// Of a oneof, the member seen last counts; a member never seen does not appear.
	var winner, winnerOrder [maxNoted]int
	for i := range p.fields {
		if o := p.fields[i].oneof; o >= 0 && seen[i].order > winnerOrder[o] {
			winnerOrder[o], winner[o] = seen[i].order, i
		}
	}
	out = append(out, '{')
	first := true
	var err error
	for i := range p.fields {
		f := &p.fields[i]
		if f.oneof >= 0 && (winnerOrder[f.oneof] == 0 || winner[f.oneof] != i) {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, f.prefix...)
		n := &seen[i]
		switch {
		case f.isMap:
			out, err = appendWireMap(out, f, b)
		case f.isList:
			out, err = appendWireList(out, f.fd, b)
		case f.isMsg && n.count == 0:
			out = append(out, "null"...)
		case f.isMsg && n.count == 1:
			out, err = appendWirePlan(out, f.subPlan(), n.raw)
		case f.isMsg:
			out, err = appendWireMessage(out, f.fd, b)
		default:
			out, err = appendScalarFrom(out, f.fd, n.raw, n.u, n.isBytes)
		}
		if err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// appendWireScanning is appendWirePlan for messages too large to note in one pass.
func appendWireScanning(out []byte, p *wirePlan, b []byte) ([]byte, error) {
	winners := make([]protowire.Number, p.oneofs)
	it := wireIter{b}
	for num, _, _, _, ok := it.next(); ok; num, _, _, _, ok = it.next() {
		if i, known := p.byNumber[num]; known && p.fields[i].oneof >= 0 {
			winners[p.fields[i].oneof] = num
		}
	}
	out = append(out, '{')
	first := true
	var err error
	for i := range p.fields {
		f := &p.fields[i]
		if f.oneof >= 0 && winners[f.oneof] != f.num {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, f.prefix...)
		switch {
		case f.isMap:
			out, err = appendWireMap(out, f, b)
		case f.isList:
			out, err = appendWireList(out, f.fd, b)
		case f.isMsg:
			out, err = appendWireMessage(out, f.fd, b)
		default:
			out, err = appendWireScalar(out, f.fd, b)
		}
		if err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}

// appendWireMessage writes a singular message field: null when absent; repeated occurrences
// merge, which for encoded messages is their concatenation.
func appendWireMessage(out []byte, fd protoreflect.FieldDescriptor, b []byte) ([]byte, error) {
	var (
		parts [][]byte
		first []byte
		n     int
	)
	it := wireIter{b}
	for num, typ, raw, _, ok := it.next(); ok; num, typ, raw, _, ok = it.next() {
		if num != fd.Number() || typ != protowire.BytesType {
			continue
		}
		switch n {
		case 0:
			first = raw
		case 1:
			parts = append(parts, first, raw)
		default:
			parts = append(parts, raw)
		}
		n++
	}
	switch n {
	case 0:
		return append(out, "null"...), nil
	case 1:
		return appendWireJSON(out, fd.Message(), first)
	}
	return appendWireJSON(out, fd.Message(), slices.Concat(parts...))
}

// appendBytesValue writes a string or bytes field's value.
func appendBytesValue(out []byte, kind protoreflect.Kind, raw []byte) ([]byte, error) {
	if kind == protoreflect.StringKind {
		return appendString(out, string(raw))
	}
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, raw)
	return append(out, '"'), nil
}

// appendWireScalar writes a singular scalar: its last value, or the default.
func appendWireScalar(out []byte, fd protoreflect.FieldDescriptor, b []byte) ([]byte, error) {
	var (
		raw    []byte
		u      uint64
		packed bool
	)
	it := wireIter{b}
	for num, typ, r, v, ok := it.next(); ok; num, typ, r, v, ok = it.next() {
		if num != fd.Number() {
			continue
		}
		if typ == protowire.BytesType {
			raw, packed = r, true
		} else {
			u, packed = v, false
		}
	}
	return appendScalarFrom(out, fd, raw, u, packed)
}

// appendScalarFrom writes a scalar given as bytes (strings, bytes, a packed run whose last
// number counts) or as a number.
func appendScalarFrom(out []byte, fd protoreflect.FieldDescriptor, raw []byte, u uint64, isBytes bool) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind:
		return appendBytesValue(out, fd.Kind(), raw)
	}
	if isBytes {
		nums, err := unpack(fd, raw, nil)
		if err != nil {
			return out, err
		}
		if len(nums) > 0 {
			u = nums[len(nums)-1]
		}
	}
	return appendScalar(out, fd, scalarValue(fd, u))
}

func appendWireList(out []byte, fd protoreflect.FieldDescriptor, b []byte) ([]byte, error) {
	out = append(out, '[')
	count := 0
	var (
		err  error
		nums []uint64
	)
	it := wireIter{b}
	for num, typ, raw, u, ok := it.next(); ok; num, typ, raw, u, ok = it.next() {
		if num != fd.Number() {
			continue
		}
		switch fd.Kind() {
		case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
			if count > 0 {
				out = append(out, ',')
			}
			count++
			if fd.Message() != nil {
				out, err = appendWireJSON(out, fd.Message(), raw)
			} else {
				out, err = appendBytesValue(out, fd.Kind(), raw)
			}
			if err != nil {
				return out, err
			}
			continue
		}
		// Numbers come one by one or in packed runs.
		nums = append(nums[:0], u)
		if typ == protowire.BytesType {
			if nums, err = unpack(fd, raw, nums[:0]); err != nil {
				return out, err
			}
		}
		for _, n := range nums {
			if count > 0 {
				out = append(out, ',')
			}
			count++
			if out, err = appendScalar(out, fd, scalarValue(fd, n)); err != nil {
				return out, err
			}
		}
	}
	return append(out, ']'), nil
}

// unpack appends the numbers of a packed run to out.
func unpack(fd protoreflect.FieldDescriptor, b []byte, out []uint64) ([]uint64, error) {
	for len(b) > 0 {
		var (
			u uint64
			n int
		)
		switch fd.Kind() {
		case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			u = uint64(v)
		case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
			u, n = protowire.ConsumeFixed64(b)
		default:
			u, n = protowire.ConsumeVarint(b)
		}
		if n < 0 {
			return nil, errBadWire
		}
		out = append(out, u)
		b = b[n:]
	}
	return out, nil
}

// scalarValue turns a raw varint or fixed value into the field's value.
func scalarValue(fd protoreflect.FieldDescriptor, u uint64) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(u != 0)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(u))
	case protoreflect.Sint32Kind:
		return protoreflect.ValueOfInt32(int32(protowire.DecodeZigZag(u & math.MaxUint32)))
	case protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(uint32(u)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(u))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(u))
	case protoreflect.Sint64Kind:
		return protoreflect.ValueOfInt64(protowire.DecodeZigZag(u))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(u)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(math.Float32frombits(uint32(u)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(math.Float64frombits(u))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(u)))
	}
	return protoreflect.Value{}
}

// wireEntry is one map entry: its key as written and as sorted, and its value's encoding.
type wireEntry struct {
	key     string
	sortI   int64
	sortU   uint64
	value   []byte // a message, string or bytes value, or a packed number
	num     uint64 // a number value
	isBytes bool
}

// appendWireMap writes map entries (each an encoded {1: key, 2: value} message) sorted as
// protojson sorts them; a key that occurs twice keeps its last entry, as decoding does.
func appendWireMap(out []byte, f *wirePlanField, b []byte) ([]byte, error) {
	fd := f.fd
	kd, vd := fd.MapKey(), fd.MapValue()
	var list []wireEntry
	it := wireIter{b}
	for num, typ, e, _, ok := it.next(); ok; num, typ, e, _, ok = it.next() {
		if num != fd.Number() || typ != protowire.BytesType {
			continue
		}
		if err := checkWire(e); err != nil {
			return out, err
		}
		var (
			we     wireEntry
			keyRaw []byte
			keyNum uint64
		)
		entry := wireIter{e}
		for n, t, raw, u, ok := entry.next(); ok; n, t, raw, u, ok = entry.next() {
			switch n {
			case 1:
				keyRaw, keyNum = raw, u
			case 2:
				we.value, we.num, we.isBytes = raw, u, t == protowire.BytesType
			}
		}
		switch kd.Kind() {
		case protoreflect.StringKind:
			// The key's bytes live in b for the whole call; no copy needed.
			we.key = unsafe.String(unsafe.SliceData(keyRaw), len(keyRaw))
		default:
			v := scalarValue(kd, keyNum)
			switch kd.Kind() {
			case protoreflect.BoolKind:
				we.key = strconv.FormatBool(v.Bool())
				if v.Bool() {
					we.sortU = 1
				}
			case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
				we.key, we.sortU = strconv.FormatUint(v.Uint(), 10), v.Uint()
			default:
				we.key, we.sortI = strconv.FormatInt(v.Int(), 10), v.Int()
			}
		}
		list = append(list, we)
	}
	var cmp func(a, b *wireEntry) int
	switch kd.Kind() {
	case protoreflect.StringKind:
		cmp = func(a, b *wireEntry) int { return strings.Compare(a.key, b.key) }
	case protoreflect.BoolKind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		cmp = func(a, b *wireEntry) int { return cmpOrdered(a.sortU, b.sortU) }
	default:
		cmp = func(a, b *wireEntry) int { return cmpOrdered(a.sortI, b.sortI) }
	}
	// Sort positions, not the entries themselves (they are large), with ties kept in wire order.
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
		if vd.Message() != nil {
			out, err = appendWirePlan(out, f.subPlan(), we.value) // no value: an empty message
		} else {
			out, err = appendScalarFrom(out, vd, we.value, we.num, we.isBytes)
		}
		if err != nil {
			return out, err
		}
	}
	return append(out, '}'), nil
}
