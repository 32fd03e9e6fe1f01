package jsoncodec

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// Messages with presence rules, for tests only (testproto_test.go builds the others):
//
//	message PPerson { string id = 1 [(required) = true]; string name = 2;
//	                  repeated string nulls = 3 [(json_nulls) = true]; }
//	message PReq {
//	  repeated PPerson people = 1 [(required) = true];
//	  PPerson lead = 2;
//	  map<string, PPerson> by_name = 3;
//	  map<int32, PPerson> by_num = 4;
//	  optional string note = 5;
//	  repeated string cleared = 6 [(json_nulls) = true];
//	  google.protobuf.Struct free = 7;
//	  PReq self = 8;
//	  int64 count = 9 [(json_nulls) = true]; // not a repeated string: ignored
//	  repeated string tags = 10;
//	}
//	message PPlain { string a = 1; PPlain next = 2; }               // no rules anywhere
//	message PLoopA { PLoopB b = 1; }  message PLoopB { PLoopA a = 1; PPerson p = 2; } // rules past a loop
func presenceFile() *descriptorpb.FileDescriptorProto {
	name := func(n string) string { return "." + testPackage + "." + n }
	required := &descriptorpb.FieldOptions{}
	proto.SetExtension(required, optionsv1.E_Required, true)
	nulls := &descriptorpb.FieldOptions{}
	proto.SetExtension(nulls, optionsv1.E_JsonNulls, true)

	person := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("PPerson")}}
	person.add("id", 1, tString, "", false).Options = required
	person.add("name", 2, tString, "", false)
	person.add("nulls", 3, tString, "", true).Options = nulls

	req := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("PReq")}}
	req.add("people", 1, tMessage, name("PPerson"), true).Options = required
	req.add("lead", 2, tMessage, name("PPerson"), false)
	req.addMap("by_name", 3, tString, tMessage, name("PPerson"))
	req.addMap("by_num", 4, descriptorpb.FieldDescriptorProto_TYPE_INT32, tMessage, name("PPerson"))
	req.optional(req.add("note", 5, tString, "", false))
	req.add("cleared", 6, tString, "", true).Options = nulls
	req.add("free", 7, tMessage, ".google.protobuf.Struct", false)
	req.add("self", 8, tMessage, name("PReq"), false)
	req.add("count", 9, descriptorpb.FieldDescriptorProto_TYPE_INT64, "", false).Options = nulls
	req.add("tags", 10, tString, "", true)

	plain := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("PPlain")}}
	plain.add("a", 1, tString, "", false)
	plain.add("next", 2, tMessage, name("PPlain"), false)

	loopA := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("PLoopA")}}
	loopA.add("b", 1, tMessage, name("PLoopB"), false)
	loopB := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("PLoopB")}}
	loopB.add("a", 1, tMessage, name("PLoopA"), false)
	loopB.add("p", 2, tMessage, name("PPerson"), false)

	return &descriptorpb.FileDescriptorProto{
		Name:        proto.String("jsoncodec_presence_test.proto"),
		Package:     proto.String(testPackage),
		Syntax:      proto.String("proto3"),
		Dependency:  []string{"google/protobuf/struct.proto", "collab/options/v1/options.proto"},
		MessageType: []*descriptorpb.DescriptorProto{person.done(), req.done(), plain.done(), loopA.done(), loopB.done()},
	}
}

var (
	presenceTypesOnce sync.Once
	presenceTypesErr  error
	presenceTypesFile protoreflect.FileDescriptor
)

// presenceType returns the test message type of that name (PReq, PPerson...).
func presenceType(t testing.TB, name string) protoreflect.MessageType {
	t.Helper()
	testTypes(t) // the well-known types are registered
	presenceTypesOnce.Do(func() {
		presenceTypesFile, presenceTypesErr = protodesc.NewFile(presenceFile(), protoregistry.GlobalFiles)
	})
	if presenceTypesErr != nil {
		t.Fatal(presenceTypesErr)
	}
	return dynamicpb.NewMessageType(presenceTypesFile.Messages().ByName(protoreflect.Name(name)))
}

// unmarshalReq decodes body as a PReq and returns it as protojson writes it ("" when refused),
// with the refusal's message.
func unmarshalReq(t *testing.T, body string) (string, string) {
	t.Helper()
	m := presenceType(t, "PReq").New().Interface()
	err := Unmarshal([]byte(body), m)
	if err != nil {
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: %T %v, not an *InputError", body, err, err)
		}
		if n := proto.Size(m); n != 0 {
			t.Fatalf("%s: refused, but left %d bytes in the message", body, n)
		}
		return "", ie.Message
	}
	return fmt.Sprint(m), ""
}

// A (required) field must be named with a value other than null, at any depth: in data, in a
// message, in a list of messages, in a map's values; [] and {} name it.
func TestPresenceRequired(t *testing.T) {
	for _, c := range []struct{ body, refusal string }{
		{``, "people is required."},
		{`  `, "people is required."},
		{`{"data": {}}`, "people is required."},
		{`{"data": {"people": null}}`, "people is required."},
		{`{"data": {"note": "x", "tags": ["a"]}}`, "people is required."},
		{`{"data": {"people": []}}`, ""},
		{`{"data": {"people": [{"id": ""}]}}`, ""},
		{`{"data": {"people": [{"id": "a"}, {"name": "b"}]}}`, "people[1].id is required."},
		{`{"data": {"people": [{"id": "a"}, {"id": null}]}}`, "people[1].id is required."},
		{`{"data": {"people": [], "lead": {}}}`, "lead.id is required."},
		{`{"data": {"people": [], "lead": null}}`, ""},
		{`{"data": {"people": [], "byName": {"x": {"id": "1"}, "y": {}}}}`, "byName.y.id is required."},
		{`{"data": {"people": [], "by_num": {"7": {}}}}`, "byNum.7.id is required."},
		{`{"data": {"people": [], "self": {}}}`, "self.people is required."},
		{`{"data": {"people": [], "self": {"people": [], "self": {"people": [{}]}}}}`, "self.self.people[0].id is required."},
		// Either name of the field; escapes in names; the slow path (a number in a string).
		{`{"data": {"peop\u006ce": []}}`, ""},
		{`{"data": {"people": [], "count": "5"}}`, ""},
		{`{"data": {"count": "5"}}`, "people is required."},
		// A wrong type is reported first; the type check's message names data.
		{`{"data": {"people": "x"}}`, "data.people must be an array of objects."},
		{`{"data": {"people": [{"id": 1}]}}`, "data.people[0].id must be a string."},
		// Of several data members the last counts, as for the decoder.
		{`{"data": {"people": []}, "data": {}}`, "people is required."},
		{`{"data": {}, "data": {"people": []}}`, ""},
		{`{"other": 1, "data": {"people": []}, "more": [{"people": null}]}`, ""},
		// Beside data, strings encoding/json takes and the fast decoder would not: the slow
		// path decoded these, and the scan passes over them.
		{`{"x": "\ud800", "data": {"people": []}, "y": ["\udc00", {"z": "]"}], "w": true}`, ""},
		{"{\"x\xff\": \"a\xffb\", \"data\": {}}", "people is required."},
		{`{"x": "\ud800", "data": {"people": [{}]}}`, "people[0].id is required."},
	} {
		got, refusal := unmarshalReq(t, c.body)
		if refusal != c.refusal {
			t.Errorf("%s: refused with %q, want %q (decoded %s)", c.body, refusal, c.refusal, got)
		}
	}
}

// A (json_nulls) field lists, by proto name and in the order written, the fields of its message
// the JSON set to null, at any depth, after what the JSON put in it itself; not itself, nor
// unknown fields. (want is the message expected, in protojson's JSON.)
func TestPresenceNulls(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"data": {"people": []}}`, `{}`},
		{`{"data": {"people": [], "note": null, "lead": null, "free": null, "by_name": null, "tags": null}}`,
			`{"cleared": ["note", "lead", "free", "by_name", "tags"]}`},
		{`{"data": {"people": [], "cleared": null, "unknownField": null, "count": null}}`, `{"cleared": ["count"]}`},
		{`{"data": {"people": [], "cleared": ["x"], "note": null}}`, `{"cleared": ["x", "note"]}`},
		{`{"data": {"people": [], "note": "n"}}`, `{"note": "n"}`},
		{`{"data": {"people": [{"id": "a", "name": null}], "lead": {"id": "b", "name": null, "nulls": ["x"]}}}`,
			`{"people": [{"id": "a", "nulls": ["name"]}], "lead": {"id": "b", "nulls": ["x", "name"]}}`},
		{`{"data": {"people": [], "byName": {"k": {"id": "a", "name": null}}}}`, `{"byName": {"k": {"id": "a", "nulls": ["name"]}}}`},
		{`{"data": {"people": [], "self": {"people": [], "note": null}}}`, `{"self": {"cleared": ["note"]}}`},
		// The slow path: protojson decoded it.
		{`{"data": {"people": [], "count": "5", "note": null}}`, `{"cleared": ["note"], "count": "5"}`},
	} {
		got, refusal := unmarshalReq(t, c.body)
		if refusal != "" {
			t.Errorf("%s: refused: %s", c.body, refusal)
			continue
		}
		want := presenceType(t, "PReq").New().Interface()
		if err := protojsonIn.Unmarshal([]byte(c.want), want); err != nil {
			t.Fatal(err)
		}
		if got != fmt.Sprint(want) {
			t.Errorf("%s:\n got %s\nwant %s", c.body, got, want)
		}
	}
}

// Which messages the scan reads: those with a rule of their own or one in a message they hold,
// past recursion; the well-known types never. A (json_nulls) on a field that is not a repeated
// string is no rule.
func TestPresenceRulesReach(t *testing.T) {
	for _, c := range []struct {
		name   string
		active bool
	}{{"PReq", true}, {"PPerson", true}, {"PPlain", false}, {"PLoopA", true}, {"PLoopB", true}} {
		if got := rulesFor(presenceType(t, c.name).Descriptor()).active; got != c.active {
			t.Errorf("%s: active %v, want %v", c.name, got, c.active)
		}
	}
	r := rulesFor(presenceType(t, "PReq").Descriptor())
	if len(r.required) != 1 || r.required[0].Name() != "people" || r.nulls == nil || r.nulls.Name() != "cleared" {
		t.Fatalf("PReq's rules: required %v, nulls %v", r.required, r.nulls)
	}
	_, kinds := testTypes(t)
	if rulesFor(kinds.Descriptor()).active {
		t.Fatal("Kinds has no rule")
	}
	// Without rules, nulls stay unrecorded and nothing is required.
	m := presenceType(t, "PPlain").New().Interface()
	if err := Unmarshal([]byte(`{"data": {"a": null, "next": null}}`), m); err != nil || proto.Size(m) != 0 {
		t.Fatalf("PPlain: %v %v", m, err)
	}
}

// Presence costs no allocation where it records nothing: Unmarshal allocates what decoding
// alone does, for a request without a rule (Get Permissions), and for one with rules whose body
// names its required fields and sends no null.
func TestPresenceAllocatesNothingToRecord(t *testing.T) {
	for _, c := range []struct {
		body string
		m    proto.Message
	}{
		{`{"data": {"organizationId": "o", "userIds": ["u1"], "documentIds": ["d1", "d2", "d3"], "folderIds": null}}`, &accessv1.GetPermissionsRequest{}},
		{`{"data": {"people": [{"id": "a", "name": "A"}, {"id": "b"}], "lead": {"id": "c"}, "note": "n", "tags": ["t"]}}`,
			presenceType(t, "PReq").New().Interface()},
	} {
		body := []byte(c.body)
		decodeOnly := testing.AllocsPerRun(200, func() {
			if err := decode(body, c.m); err != nil {
				t.Fatal(err)
			}
		})
		whole := testing.AllocsPerRun(200, func() {
			if err := Unmarshal(body, c.m); err != nil {
				t.Fatal(err)
			}
		})
		slack := 0.0
		if raceEnabled {
			slack = 1 // pooled buffers dropped by the race detector, in either measurement
		}
		if math.Abs(whole-decodeOnly) > slack {
			t.Errorf("%s: Unmarshal allocates %.0f, decoding alone %.0f", c.body, whole, decodeOnly)
		}
	}
}
