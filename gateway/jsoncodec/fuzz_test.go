package jsoncodec

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The fuzz targets. Each has a seed corpus in testdata/fuzz/<target>/ (deep nesting, near
// misses, duplicate keys, surrogates, huge numbers...), which plain `go test` runs; scripts/test
// fuzzes each briefly.

var (
	requestTypesOnce sync.Once
	requestTypesList []protoreflect.MessageType
)

// requestTypes is every request message of the API the tests import, in a fixed order, then
// the test message with presence rules (PReq, presence_test.go), for the targets to pick from by
// number. (PReq comes last so that the numbers of the seed corpus keep their messages.)
func requestTypes(t testing.TB) []protoreflect.MessageType {
	apiTypes(t) // the API's packages are imported (wire_test.go), and registered
	presenceReq := presenceType(t, "PReq")
	requestTypesOnce.Do(func() {
		protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
			name := string(mt.Descriptor().FullName())
			if strings.HasPrefix(name, "collab.") && strings.HasSuffix(name, "Request") {
				requestTypesList = append(requestTypesList, mt)
			}
			return true
		})
		slices.SortFunc(requestTypesList, func(a, b protoreflect.MessageType) int {
			return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
		})
		requestTypesList = append(requestTypesList, presenceReq)
	})
	if len(requestTypesList) < 30 {
		t.Fatalf("only %d request types", len(requestTypesList))
	}
	return requestTypesList
}

// cleanMessages are the forms every refusal takes: our own words, never protojson's,
// encoding/json's or gRPC's. Paths and values quoted in them come from the body.
var cleanMessages = []*regexp.Regexp{
	regexp.MustCompile(`^Request body is not valid JSON\.$`),
	regexp.MustCompile(`^Request body is not valid JSON: it holds more than one value\.$`),
	regexp.MustCompile(`^Request body must be a JSON object: \{"data": \{\.\.\.\}\}\.$`),
	regexp.MustCompile(`^Request body must have a "data" object: \{"data": \{\.\.\.\}\}\.$`),
	regexp.MustCompile(`^Request body is nested too deeply: at most 64 levels\.$`),
	regexp.MustCompile(`^data holds a value of the wrong form for this operation\.$`),
	regexp.MustCompile(`(?s)^data(\.|\[).* (must be a string|must be a boolean|must be an integer|is out of range|must be a number|must be a base64 string|must be an object|must be an array|must be an array of (strings|booleans|objects|values|numbers)|must not be null|has an unknown value ".*")\.$`),
	regexp.MustCompile(`^data must be (an object|an array|a string|a boolean|a number|an integer|a base64 string)\.$`),
	regexp.MustCompile(`(?s)^Unknown field data(\.|\[).*; did you mean [A-Za-z0-9_]+\?$`),
	// A (required) field: its path in JSON names, map keys as written.
	regexp.MustCompile(`(?s)^[A-Za-z0-9_]+(\[[0-9]+\]|\..*)*\.?[A-Za-z0-9_]* is required\.$`),
}

// checkRefusal fails the test unless err is nil or a clean *InputError.
func checkRefusal(t *testing.T, body []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("refusal of %q is %T, not an *InputError: %v", body, err, err)
	}
	for _, re := range cleanMessages {
		if re.MatchString(ie.Message) {
			return
		}
	}
	t.Fatalf("refusal of %q in words of our own? %q", body, ie.Message)
}

// (a) When the fast decoder accepts a body, protojson (the slow path) accepts it too and fills
// the same message; and Unmarshal gives that message with the presence rules applied
// (presence.go), or their refusal.
func FuzzDecodeRequest(f *testing.F) {
	types := requestTypes(f)
	f.Fuzz(func(t *testing.T, sel uint16, body []byte) {
		mt := types[int(sel)%len(types)]
		fast := mt.New().Interface()
		if decodeFast(body, fast) != nil {
			return
		}
		slow := mt.New().Interface()
		if err := slowUnmarshal(body, slow); err != nil {
			t.Fatalf("%s: the fast decoder accepted what protojson refuses (%v):\n%q", mt.Descriptor().FullName(), err, body)
		}
		if !proto.Equal(fast, slow) {
			t.Fatalf("%s: the decoders disagree on %q:\nfast %v\nslow %v", mt.Descriptor().FullName(), body, fast, slow)
		}
		refusal := applyPresence(body, fast.ProtoReflect())
		checkRefusal(t, body, refusal)
		whole := mt.New().Interface()
		err := Unmarshal(body, whole)
		if refusal != nil {
			if err == nil || err.Error() != refusal.Error() || proto.Size(whole) != 0 {
				t.Fatalf("%s: Unmarshal of %q = %v, %v; the presence rules refuse it: %v", mt.Descriptor().FullName(), body, err, whole, refusal)
			}
			return
		}
		if err != nil || !proto.Equal(whole, fast) {
			t.Fatalf("%s: Unmarshal of %q = %v, %v; the fast decoder and the presence rules gave %v", mt.Descriptor().FullName(), body, err, whole, fast)
		}
	})
}

// (b) The type check and its wording: data of any form, against any request type, never makes
// it panic, and the whole Unmarshal either succeeds or refuses in one of our clean messages.
func FuzzCheckJSON(f *testing.F) {
	types := requestTypes(f)
	f.Fuzz(func(t *testing.T, sel uint16, data []byte) {
		mt := types[int(sel)%len(types)]
		md := mt.Descriptor()
		if parsed, err := parseJSON(data); err == nil {
			for _, msg := range []string{checkJSON("data", parsed, md), nearMissIn("data", parsed, md)} {
				if msg != "" {
					checkRefusal(t, data, refuse(msg))
				}
			}
		}
		body := append(append([]byte(`{"data":`), data...), '}')
		checkRefusal(t, body, Unmarshal(body, mt.New().Interface()))
	})
}

// (c) The whole envelope Unmarshal on arbitrary bytes: no panic; success or a clean refusal,
// never the presence scan's failure to read a body the decoders accepted; what it accepts is
// within the depth limit, and can be written back.
func FuzzUnmarshal(f *testing.F) {
	types := requestTypes(f)
	f.Fuzz(func(t *testing.T, sel uint16, body []byte) {
		mt := types[int(sel)%len(types)]
		m := mt.New().Interface()
		err := Unmarshal(body, m)
		checkRefusal(t, body, err)
		if errors.Is(err, errUnreadable) && decode(body, mt.New().Interface()) == nil {
			t.Fatalf("the presence scan cannot read %q, which the decoders accepted", body)
		}
		if err != nil {
			return
		}
		if checkDepth(body) != nil {
			t.Fatalf("accepted a body nested too deeply: %q", body)
		}
		if _, err := Marshal(m, "", ""); err != nil {
			t.Fatalf("accepted %q, but cannot write %v back: %v", body, m, err)
		}
	})
}

// (d) The presence rules (presence.go), on the test message PReq with its rules in messages,
// lists, maps and recursion: whatever body the decoders accept, Unmarshal either refuses the
// first required field left out, in the words of a model of the rules written over the parsed
// tree (check.go's parseJSON), or gives the decoded message with the nulls the model lists.
func FuzzPresence(f *testing.F) {
	mt := presenceType(f, "PReq")
	f.Fuzz(func(t *testing.T, body []byte) {
		want := mt.New().Interface()
		if decode(body, want) != nil {
			return
		}
		got := mt.New().Interface()
		err := Unmarshal(body, got)
		checkRefusal(t, body, err)
		var data any = &object{}
		if len(bytes.TrimSpace(body)) > 0 {
			envelope, perr := parseJSON(body)
			if perr != nil {
				return // data nested to the limit: one level too deep for parseJSON with the envelope
			}
			env := envelope.(*object)
			for i, name := range env.names {
				if name == "data" {
					data = env.values[i] // the last one counts
				}
			}
		}
		missing := presenceModel(data, want.ProtoReflect())
		switch {
		case missing != "":
			if err == nil || err.Error() != missing+" is required." {
				t.Fatalf("%q: Unmarshal answered %v, the model %s is required.", body, err, missing)
			}
		case err != nil || !proto.Equal(got, want):
			t.Fatalf("%q: Unmarshal gave %v, %v; the model %v", body, got, err, want)
		}
	})
}

// presenceModel applies the presence rules to m from v, data's parsed value, the obvious way:
// the first required field left out (its path), else "" with the nulls recorded in m.
func presenceModel(v any, m protoreflect.Message) string {
	obj := v.(*object)
	r := rulesFor(m.Descriptor())
	named := map[protoreflect.FieldDescriptor]bool{}
	fields := m.Descriptor().Fields()
	for i, name := range obj.names {
		fd := fields.ByJSONName(name)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(name))
		}
		val := obj.values[i]
		switch {
		case fd == nil:
			continue
		case val == nil:
			if r.nulls != nil && fd != r.nulls {
				m.Mutable(r.nulls).List().Append(protoreflect.ValueOfString(string(fd.Name())))
			}
			continue
		}
		named[fd] = true
		if held := heldMessage(fd); held == nil || !rulesFor(held).active {
			continue
		}
		switch {
		case fd.IsList():
			for j, e := range val.([]any) {
				if p := presenceModel(e, m.Mutable(fd).List().Get(j).Message()); p != "" {
					return fmt.Sprintf("%s[%d].%s", fd.JSONName(), j, p)
				}
			}
		case fd.IsMap():
			entries := val.(*object)
			for j, k := range entries.names {
				mk, _ := mapKey(fd.MapKey(), k)
				if entries.values[j] == nil {
					continue
				}
				if p := presenceModel(entries.values[j], m.Mutable(fd).Map().Mutable(mk).Message()); p != "" {
					return fd.JSONName() + "." + k + "." + p
				}
			}
		default:
			if p := presenceModel(val, m.Mutable(fd).Message()); p != "" {
				return fd.JSONName() + "." + p
			}
		}
	}
	for _, fd := range r.required {
		if !named[fd] {
			return fd.JSONName()
		}
	}
	return ""
}
