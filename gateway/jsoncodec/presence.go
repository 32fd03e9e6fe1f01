package jsoncodec

import (
	"bytes"
	"errors"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// Presence: what a JSON request says that proto3 loses, carried into the request message by the
// field options of collab.options.v1 (docs/api.md, "Presence: absent fields and nulls").
//
//   - (required): the JSON must name the field with a value other than null. A repeated field
//     decodes to [] whether it was sent as [] or not at all, so only the codec can tell.
//   - (json_nulls), on a repeated string field: the proto names of the message's other fields
//     that the JSON set to null, which protojson and the fast decoder read as absent.
//
// applyPresence runs after a request decoded (either way), on the same body, and only for
// request messages that hold a rule somewhere: every other request pays one map lookup.

// presenceRules are one message's rules, found once from its descriptor.
type presenceRules struct {
	required []protoreflect.FieldDescriptor
	// nulls is the (json_nulls) field: a repeated string; nil when the message has none.
	nulls protoreflect.FieldDescriptor
	// active: this message or one it holds (in a field, a list or a map's values) has a rule,
	// so the scan reads its object.
	active bool
	// fields finds a field by either of its names, for an active message: a map indexed by the
	// body's bytes costs no allocation, where the descriptor's lookups take a string.
	fields map[string]protoreflect.FieldDescriptor
}

var presenceCache sync.Map // protoreflect.MessageDescriptor -> *presenceRules

// rulesFor returns md's presence rules.
func rulesFor(md protoreflect.MessageDescriptor) *presenceRules {
	if r, ok := presenceCache.Load(md); ok {
		return r.(*presenceRules)
	}
	r := ownRules(md)
	if r.active = holdsRules(md, map[protoreflect.FullName]bool{}); r.active {
		r.fields = map[string]protoreflect.FieldDescriptor{}
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			r.fields[string(fd.Name())] = fd
		}
		for i := 0; i < md.Fields().Len(); i++ { // a JSON name wins over a proto name, as ByJSONName comes first
			fd := md.Fields().Get(i)
			r.fields[fd.JSONName()] = fd
		}
	}
	actual, _ := presenceCache.LoadOrStore(md, r)
	return actual.(*presenceRules)
}

// ownRules reads the options of md's own fields. A (json_nulls) on a field that is not a
// repeated string is ignored (TestPresenceOptionsOfTheAPI keeps the API's protos free of one).
func ownRules(md protoreflect.MessageDescriptor) *presenceRules {
	r := &presenceRules{}
	if specials[md.FullName()] != ordinary {
		return r
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		opts := fd.Options()
		if opts == nil {
			continue
		}
		if required, _ := proto.GetExtension(opts, optionsv1.E_Required).(bool); required {
			r.required = append(r.required, fd)
		}
		if nulls, _ := proto.GetExtension(opts, optionsv1.E_JsonNulls).(bool); nulls && isNullsField(fd) && r.nulls == nil {
			r.nulls = fd
		}
	}
	return r
}

func isNullsField(fd protoreflect.FieldDescriptor) bool {
	return fd.IsList() && fd.Kind() == protoreflect.StringKind
}

// holdsRules reports whether md or a message reachable from it has a rule of its own. seen
// holds the messages already on the way (recursive messages end there).
func holdsRules(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] || specials[md.FullName()] != ordinary {
		return false
	}
	seen[md.FullName()] = true
	if own := ownRules(md); len(own.required) > 0 || own.nulls != nil {
		return true
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		if sub := heldMessage(fields.Get(i)); sub != nil && holdsRules(sub, seen) {
			return true
		}
	}
	return false
}

// heldMessage is the message a field holds (itself, in a list, or as a map's values), or nil.
func heldMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		return fd.MapValue().Message()
	}
	return fd.Message()
}

// applyPresence applies the presence rules of m's message and of those it holds to body, which
// has been decoded into m: it refuses a request that leaves out a required field, and fills the
// (json_nulls) fields. An empty body counts as {"data": {}}. It allocates nothing but what it
// records (the nulls) and a refusal: a body that names its required fields and sends no null
// costs a read of it.
func applyPresence(body []byte, m protoreflect.Message) error {
	r := rulesFor(m.Descriptor())
	if !r.active {
		return nil
	}
	d := fastDecoder{b: body}
	at, ok := -1, true // an empty body, as decode tells one
	if len(bytes.TrimSpace(body)) > 0 {
		at, ok = d.dataAt()
	}
	if !ok {
		return errUnreadable
	}
	var err error
	if at < 0 {
		err = missingRequired(r, nil)
	} else {
		d.i = at
		err = d.presenceObject(m, r)
	}
	if err == nil {
		return nil
	}
	var mf *missingField
	if errors.As(err, &mf) {
		return refuse(mf.Error())
	}
	return err
}

// errUnreadable is what the scan answers for a body it cannot read. It never should: the body
// was decoded before it runs.
var errUnreadable = refuse("data holds a value of the wrong form for this operation.")

// missingField is a required field left out, on its way up from the object that lacks it to
// data: each level puts its own part in front of path (the field, "[i]", a map key), so that
// the path is built only for a refusal.
type missingField struct{ path string }

func (e *missingField) Error() string { return e.path + " is required." }

// underField puts prefix in front of the path of a missingField err (which is not nil); other
// errors pass as they are.
func underField(err error, prefix string) error {
	var mf *missingField
	if errors.As(err, &mf) {
		mf.path = prefix + mf.path
	}
	return err
}

// dataAt finds the value of the envelope's data member: its offset (-1 without one). Of several data members the last counts, as for the slow decoder (encoding/json); the fast
// one refuses them.
//
// The scan passes over what it does not read loosely (looseString, looseSkip): the decoders
// accepted the body, and on the slow path they take what the fast decoder's reader does not
// (encoding/json, which reads the envelope, invalid UTF-8 and lone surrogates; protojson, in
// an unknown field, a number past float64's range).
func (d *fastDecoder) dataAt() (int, bool) {
	d.space()
	if !d.consume('{') {
		return 0, false
	}
	at := -1
	d.space()
	if d.consume('}') {
		return at, at >= 0
	}
	for {
		d.space()
		start := d.i
		if key, ok := d.strBytes(); ok && string(key) == "data" {
			at = -2 // the value comes after the colon
		} else if d.i = start; !d.looseString() {
			return 0, false
		}
		if !d.colon() {
			return 0, false
		}
		if at == -2 {
			at = d.i
		}
		if !d.looseSkip() {
			return 0, false
		}
		d.space()
		if d.consume('}') {
			return at, at >= 0
		}
		if !d.consume(',') {
			return 0, false
		}
	}
}

// looseString passes over the string at d.i, its escapes unread.
func (d *fastDecoder) looseString() bool {
	if !d.consume('"') {
		return false
	}
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '"':
			d.i++
			return true
		case '\\':
			d.i++
		}
		d.i++
	}
	return false
}

// looseSkip passes over the value at d.i: strings loosely, arrays and objects by their
// brackets (checkDepth bounded them), anything else up to the next delimiter.
func (d *fastDecoder) looseSkip() bool {
	open := 0
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '"':
			if !d.looseString() {
				return false
			}
			if open == 0 {
				return true
			}
			continue
		case '{', '[':
			open++
		case '}', ']':
			if open == 0 {
				return true // the end of the enclosing object or array: the value was a bare word
			}
			if open--; open == 0 {
				d.i++
				return true
			}
		case ',', ' ', '\t', '\n', '\r':
			if open == 0 {
				return true
			}
		}
		d.i++
	}
	return open == 0
}

// presenceObject reads the object at d.i as the JSON of m, whose rules are r.
func (d *fastDecoder) presenceObject(m protoreflect.Message, r *presenceRules) error {
	d.space()
	if !d.consume('{') {
		return errUnreadable
	}
	// Per required field: named with a value other than null (on the stack for a few).
	var few [8]bool
	named := few[:0]
	if len(r.required) > len(few) {
		named = make([]bool, 0, len(r.required))
	}
	named = named[:len(r.required)]
	d.space()
	for !d.consume('}') {
		start := d.i
		name, ok := d.strBytes()
		if !ok { // no field's name: pass over it
			d.i, name = start, nil
			if !d.looseString() {
				return errUnreadable
			}
		}
		if !d.colon() {
			return errUnreadable
		}
		fd := r.fields[string(name)] // no allocation: a map indexed by a conversion
		switch {
		case fd == nil:
			if !d.looseSkip() {
				return errUnreadable
			}
		case d.literal("null"):
			if r.nulls != nil && fd != r.nulls {
				m.Mutable(r.nulls).List().Append(protoreflect.ValueOfString(string(fd.Name())))
			}
		default:
			for i, req := range r.required {
				if req == fd {
					named[i] = true
				}
			}
			if err := d.presenceValue(m, fd); err != nil {
				return err
			}
		}
		d.space()
		if d.consume(',') {
			d.space()
		}
	}
	return missingRequired(r, named)
}

// missingRequired refuses the first required field of r not named (named[i] false, or named
// empty: none was).
func missingRequired(r *presenceRules, named []bool) error {
	for i, fd := range r.required {
		if len(named) == 0 || !named[i] {
			return &missingField{path: fd.JSONName()}
		}
	}
	return nil
}

// presenceValue reads the value of field fd of m (not null): the messages in it whose rules
// are active are read by presenceObject, anything else is skipped.
func (d *fastDecoder) presenceValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	held := heldMessage(fd)
	if held == nil || !rulesFor(held).active {
		if !d.looseSkip() {
			return errUnreadable
		}
		return nil
	}
	r := rulesFor(held)
	var err error
	switch {
	case fd.IsList():
		err = d.presenceList(m.Mutable(fd).List(), r)
	case fd.IsMap():
		err = d.presenceMap(m.Mutable(fd).Map(), fd.MapKey(), r)
	default:
		err = d.presenceObject(m.Mutable(fd).Message(), r)
	}
	switch {
	case err == nil:
		return nil
	case fd.IsList():
		return underField(err, fd.JSONName()) // the element put "[i]." in front
	default:
		return underField(err, fd.JSONName()+".")
	}
}

// presenceList reads an array of the messages of l, whose rules are r.
func (d *fastDecoder) presenceList(l protoreflect.List, r *presenceRules) error {
	d.space()
	if !d.consume('[') {
		return errUnreadable
	}
	for i := 0; ; i++ {
		d.space()
		if d.consume(']') {
			return nil
		}
		if i >= l.Len() {
			return errUnreadable
		}
		if err := d.presenceObject(l.Get(i).Message(), r); err != nil {
			return underField(err, "["+strconv.Itoa(i)+"].")
		}
		d.space()
		d.consume(',')
	}
}

// presenceMap reads an object of the messages of mp (keys of kd's kind), whose rules are r.
func (d *fastDecoder) presenceMap(mp protoreflect.Map, kd protoreflect.FieldDescriptor, r *presenceRules) error {
	d.space()
	if !d.consume('{') {
		return errUnreadable
	}
	for {
		d.space()
		if d.consume('}') {
			return nil
		}
		key, ok := d.str()
		if !ok || !d.colon() {
			return errUnreadable
		}
		mk, ok := mapKey(kd, key)
		d.space()
		if !ok || !mp.Has(mk) {
			return errUnreadable
		}
		// A null map value is no message: nothing of presence to read.
		if !d.literal("null") {
			if err := d.presenceObject(mp.Mutable(mk).Message(), r); err != nil {
				return underField(err, key+".")
			}
		}
		d.space()
		d.consume(',')
	}
}

// mapKey is a JSON object key as the map key of kind kd's field, as protojson reads it.
func mapKey(kd protoreflect.FieldDescriptor, key string) (protoreflect.MapKey, bool) {
	switch kd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(key).MapKey(), true
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(key)
		return protoreflect.ValueOfBool(b).MapKey(), err == nil && (key == "true" || key == "false")
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		n, err := strconv.ParseInt(key, 10, 32)
		return protoreflect.ValueOfInt32(int32(n)).MapKey(), err == nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(key, 10, 64)
		return protoreflect.ValueOfInt64(n).MapKey(), err == nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		n, err := strconv.ParseUint(key, 10, 32)
		return protoreflect.ValueOfUint32(uint32(n)).MapKey(), err == nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(key, 10, 64)
		return protoreflect.ValueOfUint64(n).MapKey(), err == nil
	}
	return protoreflect.MapKey{}, false
}
