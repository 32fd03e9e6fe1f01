package jsoncodec

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decodeFast reads {"data": {...}} into m for the common shapes of request bodies, without
// protojson's generality. It handles strings, booleans, plain integers and numbers, enum names,
// nested messages, lists and string-keyed maps; anything else (a well-known type, a number in
// a string, bytes, a duplicate field, invalid input of any kind) makes it give up with
// errFallback, and the caller decodes the body the slow way, which also words the error. It
// never accepts a body protojson would refuse, and fills m exactly as protojson would;
// fastdecode_test.go and FuzzDecodeRequest hold it to that. An unknown field that is a near miss
// of a known one sends it the slow way too. Nesting deeper than MaxDepth stops it with errTooDeep
// (Unmarshal's checkDepth refuses such bodies first; the decoder bounds its own recursion
// anyway).
func decodeFast(body []byte, m proto.Message) error {
	d := fastDecoder{b: body}
	err := d.envelope(m)
	if d.tooDeep {
		return errTooDeep
	}
	return err
}

func (d *fastDecoder) envelope(m proto.Message) error {
	d.space()
	if !d.consume('{') {
		return errFallback
	}
	d.depth = 1
	found := false
	d.space()
	if !d.consume('}') {
		for {
			key, ok := d.str()
			if !ok || !d.colon() {
				return errFallback
			}
			if key == "data" {
				if found || !d.peek('{') {
					return errFallback
				}
				found = true
				if err := d.message(m.ProtoReflect()); err != nil {
					return err
				}
			} else if !d.skip() {
				return errFallback
			}
			d.space()
			if d.consume('}') {
				break
			}
			if !d.consume(',') {
				return errFallback
			}
			d.space()
		}
	}
	d.space()
	if !found || d.i != len(d.b) {
		return errFallback
	}
	return nil
}

var errFallback = errors.New("decode the slow way")

type fastDecoder struct {
	b []byte
	i int
	// depth counts the arrays and objects open, the envelope's included; past maxOpen the
	// decoder stops (tooDeep), so that its recursion is bounded whatever ran before it.
	depth   int
	tooDeep bool
}

// enter notes an array or object opened, and reports whether it is within the depth limit.
func (d *fastDecoder) enter() bool {
	d.depth++
	if d.depth > maxOpen {
		d.tooDeep = true
		return false
	}
	return true
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) peek(c byte) bool { return d.i < len(d.b) && d.b[d.i] == c }

func (d *fastDecoder) consume(c byte) bool {
	if d.peek(c) {
		d.i++
		return true
	}
	return false
}

func (d *fastDecoder) colon() bool {
	d.space()
	ok := d.consume(':')
	d.space()
	return ok
}

func (d *fastDecoder) literal(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// str reads a JSON string; false for anything protojson might read differently (a lone
// surrogate, invalid UTF-8) or not at all.
func (d *fastDecoder) str() (string, bool) {
	b, ok := d.strBytes()
	if !ok {
		return "", false
	}
	return string(b), true
}

// strBytes is str without the string: the body's own bytes when the string has no escapes
// (callers must not keep or change them), a new buffer when it has.
func (d *fastDecoder) strBytes() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\':
			return d.escapedStr(start)
		case c < ' ':
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *fastDecoder) escapedStr(start int) ([]byte, bool) {
	out := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return nil, false
			}
			return out, true
		case c < ' ':
			return nil, false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				if !d.literal(`\u`) {
					return nil, false
				}
				r2, ok := d.hex4()
				if !ok {
					return nil, false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, false
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (d *fastDecoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(v), true //nolint:gosec // G115: four hex digits: at most 0xFFFF
}

// number reads a JSON number's text.
func (d *fastDecoder) number() (string, bool) {
	start := d.i
	d.consume('-')
	digits := d.i
	for d.i < len(d.b) && (d.b[d.i] >= '0' && d.b[d.i] <= '9' || d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E' || d.b[d.i] == '+' || d.b[d.i] == '-') {
		d.i++
	}
	if d.i == digits {
		return "", false
	}
	return string(d.b[start:d.i]), true
}

// skip passes over any JSON value, checking its syntax.
func (d *fastDecoder) skip() bool {
	d.space()
	if d.i >= len(d.b) {
		return false
	}
	switch d.b[d.i] {
	case '"':
		_, ok := d.str()
		return ok
	case '{':
		d.i++
		if !d.enter() {
			return false
		}
		d.space()
		if d.consume('}') {
			d.depth--
			return true
		}
		for {
			d.space()
			if _, ok := d.str(); !ok || !d.colon() || !d.skip() {
				return false
			}
			d.space()
			if d.consume('}') {
				d.depth--
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case '[':
		d.i++
		if !d.enter() {
			return false
		}
		d.space()
		if d.consume(']') {
			d.depth--
			return true
		}
		for {
			if !d.skip() {
				return false
			}
			d.space()
			if d.consume(']') {
				d.depth--
				return true
			}
			if !d.consume(',') {
				return false
			}
		}
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		s, ok := d.number()
		if !ok {
			return false
		}
		_, err := strconv.ParseFloat(s, 64)
		return err == nil && validJSONNumber(s)
	}
}

// validJSONNumber checks the JSON number grammar, which ParseFloat is laxer than.
//
//nolint:gocyclo // a kernel: the grammar's states in one pass, on every number of every request body
func validJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// message reads an object into m.
func (d *fastDecoder) message(m protoreflect.Message) error {
	md := m.Descriptor()
	if specials[md.FullName()] != ordinary { // JSON of its own shape: protojson reads it
		return errFallback
	}
	if !d.consume('{') {
		return errFallback
	}
	if !d.enter() {
		return errFallback
	}
	d.space()
	if d.consume('}') {
		d.depth--
		return nil
	}
	fields := md.Fields()
	var setFields [maxNoted]bool
	for {
		d.space()
		name, ok := d.str()
		if !ok || !d.colon() {
			return errFallback
		}
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(name))
		}
		if fd == nil {
			// A near miss of a known field is refused the slow way, which words it.
			if nearMiss(md, name) != "" || !d.skip() {
				return errFallback
			}
		} else {
			// A field twice (by either name), or two members of a oneof: protojson refuses.
			if fd.Index() >= maxNoted || setFields[fd.Index()] {
				return errFallback
			}
			setFields[fd.Index()] = true
			if od := fd.ContainingOneof(); od != nil && m.WhichOneof(od) != nil {
				return errFallback
			}
			if d.literal("null") {
				// null leaves a field unset, except where null is a value (a Value field).
				if fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value" {
					return errFallback
				}
			} else if err := d.field(m, fd); err != nil {
				return err
			}
		}
		d.space()
		if d.consume('}') {
			d.depth--
			return nil
		}
		if !d.consume(',') {
			return errFallback
		}
	}
}

func (d *fastDecoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	switch {
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind || !d.consume('{') || !d.enter() {
			return errFallback
		}
		mp := m.Mutable(fd).Map()
		d.space()
		if d.consume('}') {
			d.depth--
			return nil
		}
		for {
			d.space()
			key, ok := d.str()
			if !ok || !d.colon() {
				return errFallback
			}
			mk := protoreflect.ValueOfString(key).MapKey()
			if mp.Has(mk) {
				return errFallback // protojson refuses duplicate map keys
			}
			v, err := d.value(fd.MapValue(), mp.NewValue)
			if err != nil {
				return err
			}
			mp.Set(mk, v)
			d.space()
			if d.consume('}') {
				d.depth--
				return nil
			}
			if !d.consume(',') {
				return errFallback
			}
		}
	case fd.IsList() && fd.Kind() == protoreflect.StringKind:
		return d.stringList(m, fd)
	case fd.IsList():
		if !d.consume('[') || !d.enter() {
			return errFallback
		}
		l := m.Mutable(fd).List()
		d.space()
		if d.consume(']') {
			d.depth--
			return nil
		}
		for {
			d.space()
			v, err := d.value(fd, l.NewElement)
			if err != nil {
				return err
			}
			l.Append(v)
			d.space()
			if d.consume(']') {
				d.depth--
				return nil
			}
			if !d.consume(',') {
				return errFallback
			}
		}
	default:
		v, err := d.value(fd, func() protoreflect.Value { return m.NewField(fd) })
		if err != nil {
			return err
		}
		m.Set(fd, v)
		return nil
	}
}

// stringList reads a list of strings (ids, mostly: the commonest list in requests). Appending
// them one by one through protoreflect costs a reflect.Append each; written as the field's wire
// encoding and merged with proto's generated-code path, the list is built in one go.
func (d *fastDecoder) stringList(m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	if !d.consume('[') || !d.enter() {
		return errFallback
	}
	d.space()
	if d.consume(']') {
		d.depth--
		return nil
	}
	// The strings go from the body to a pooled buffer, which Unmarshal copies them out of.
	scratch := buffers.Get().(*[]byte)
	wire := (*scratch)[:0]
	defer func() { release(scratch, wire) }()
	for {
		d.space()
		s, ok := d.strBytes()
		if !ok {
			return errFallback
		}
		wire = protowire.AppendTag(wire, fd.Number(), protowire.BytesType)
		wire = protowire.AppendBytes(wire, s)
		d.space()
		if d.consume(']') {
			d.depth--
			break
		}
		if !d.consume(',') {
			return errFallback
		}
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(wire, m.Interface()); err != nil {
		return errFallback
	}
	return nil
}

// value reads one singular value of fd's kind.
func (d *fastDecoder) value(fd protoreflect.FieldDescriptor, newMessage func() protoreflect.Value) (protoreflect.Value, error) {
	fail := protoreflect.Value{}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		v := newMessage()
		if err := d.message(v.Message()); err != nil {
			return fail, err
		}
		return v, nil
	case protoreflect.StringKind:
		s, ok := d.str()
		if !ok {
			return fail, errFallback
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		switch {
		case d.literal("true"):
			return protoreflect.ValueOfBool(true), nil
		case d.literal("false"):
			return protoreflect.ValueOfBool(false), nil
		}
		return fail, errFallback
	case protoreflect.EnumKind:
		s, ok := d.str()
		if !ok {
			return fail, errFallback
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(s))
		if ev == nil {
			return fail, errFallback
		}
		return protoreflect.ValueOfEnum(ev.Number()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, ok := d.integer(math.MinInt32, math.MaxInt32)
		if !ok {
			return fail, errFallback
		}
		return protoreflect.ValueOfInt32(int32(n)), nil //nolint:gosec // G115: integer() checked the int32 range
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, ok := d.integer(0, math.MaxUint32)
		if !ok {
			return fail, errFallback
		}
		return protoreflect.ValueOfUint32(uint32(n)), nil //nolint:gosec // G115: integer() checked the uint32 range
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		s, ok := d.number()
		if !ok || !validJSONNumber(s) {
			return fail, errFallback
		}
		bits := 64
		if fd.Kind() == protoreflect.FloatKind {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil || math.IsInf(f, 0) {
			return fail, errFallback
		}
		if bits == 32 {
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
		return protoreflect.ValueOfFloat64(f), nil
	}
	// 64-bit integers, bytes, groups: the slow way.
	return fail, errFallback
}

// integer reads a plain integer literal within [min, max]; anything fancier goes the slow way.
func (d *fastDecoder) integer(min, max int64) (int64, bool) {
	s, ok := d.number()
	if !ok || !validJSONNumber(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, false
	}
	return n, true
}

// nearMissAhead reports whether the object at d.i, read as md, or a message inside it holds an
// unknown field that is a near miss of a known one (nearmiss.go); true too where it cannot
// tell (input it does not read), so that the caller looks closer. It lets a body protojson
// accepted go without building the whole tree the check reads.
//
//nolint:gocyclo // a kernel: one pass over the JSON's token kinds, on every request body
func (d *fastDecoder) nearMissAhead(md protoreflect.MessageDescriptor) bool {
	d.space()
	if specials[md.FullName()] != ordinary {
		return !d.skip() // free-form keys, or none
	}
	if !d.consume('{') || !d.enter() {
		return true
	}
	d.space()
	if d.consume('}') {
		d.depth--
		return false
	}
	fields := md.Fields()
	for {
		d.space()
		name, ok := d.str()
		if !ok || !d.colon() {
			return true
		}
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(name))
		}
		switch {
		case fd == nil:
			if nearMiss(md, name) != "" || !d.skip() {
				return true
			}
		case d.literal("null"):
		case fd.IsMap() && fd.MapValue().Message() != nil:
			if d.nearMissInContainer('{', '}', fd.MapValue().Message()) {
				return true
			}
		case fd.IsList() && fd.Message() != nil:
			if d.nearMissInContainer('[', ']', fd.Message()) {
				return true
			}
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			if d.nearMissAhead(fd.Message()) {
				return true
			}
		default:
			if !d.skip() {
				return true
			}
		}
		d.space()
		if d.consume('}') {
			d.depth--
			return false
		}
		if !d.consume(',') {
			return true
		}
	}
}

// nearMissInContainer is nearMissAhead for the messages of a list (open '[') or of a map's
// values (open '{').
func (d *fastDecoder) nearMissInContainer(open, closing byte, md protoreflect.MessageDescriptor) bool {
	if !d.consume(open) || !d.enter() {
		return true
	}
	d.space()
	if d.consume(closing) {
		d.depth--
		return false
	}
	for {
		d.space()
		if open == '{' {
			if _, ok := d.str(); !ok || !d.colon() {
				return true
			}
		}
		d.space()
		if !d.literal("null") && d.nearMissAhead(md) {
			return true
		}
		d.space()
		if d.consume(closing) {
			d.depth--
			return false
		}
		if !d.consume(',') {
			return true
		}
	}
}
