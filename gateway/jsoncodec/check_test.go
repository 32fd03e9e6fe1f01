package jsoncodec

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// decodeJSON parses s as the codec does for the check (ordered objects, json.Number).
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := parseJSON([]byte(s))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func desc(m proto.Message) protoreflect.MessageDescriptor { return m.ProtoReflect().Descriptor() }

type checkCase struct {
	name string
	md   protoreflect.MessageDescriptor
	json string
	want string // "" for accepted
}

func runCheckCases(t *testing.T, tests []checkCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkJSON("data", decodeJSON(t, tt.json), tt.md)
			if got != tt.want {
				t.Fatalf("checkJSON(data, %s, %s) = %q, want %q", tt.json, tt.md.FullName(), got, tt.want)
			}
		})
	}
}

func TestCheckJSONWorkspaceMessages(t *testing.T) {
	ws := desc(&workspacev1.Workspace{})
	listResp := desc(&workspacev1.ListApiKeysResponse{})
	tokens := desc(&workspacev1.ListAuthTokensResponse{})
	apikey := desc(&workspacev1.CreateApiKeyRequest{})
	auth := desc(&workspacev1.AuthenticateRequest{})
	runCheckCases(t, []checkCase{
		{"whole workspace accepted", ws, `{"id": "w", "owner": {"email": "e", "name": "n"}, "apiKeyList": {"k": {"apiKeyName": "a", "id": "k", "type": "testing"}}, "settings": {"notifications": true}, "emailVerified": false}`, ""},
		{"empty object accepted", ws, `{}`, ""},
		{"null message field accepted", ws, `{"owner": null, "settings": null, "apiKeyList": null}`, ""},
		{"not an object", ws, `[1]`, "data must be an object."},
		{"null top level", ws, `null`, "data must be an object."},
		{"map value of the wrong type", ws, `{"apiKeyList": {"k": 5}}`, "data.apiKeyList.k must be an object."},
		{"map value null", ws, `{"apiKeyList": {"k": null}}`, "data.apiKeyList.k must not be null."},
		{"map given an array", ws, `{"apiKeyList": [{"apiKeyName": "a"}]}`, "data.apiKeyList must be an object."},
		{"map given a string", ws, `{"api_key_list": "k"}`, "data.api_key_list must be an object."},
		{"field inside a map value", ws, `{"apiKeyList": {"good": {"id": "1"}, "bad key": {"apiKeyName": 3}}}`, "data.apiKeyList.bad key.apiKeyName must be a string."},
		{"snake_case inside a map value", ws, `{"apiKeyList": {"k": {"api_key_name": []}}}`, "data.apiKeyList.k.api_key_name must be a string."},
		{"nested message field", ws, `{"owner": {"email": 1}}`, "data.owner.email must be a string."},
		{"nested message given a string", ws, `{"owner": "o"}`, "data.owner must be an object."},
		{"nested message given an array", ws, `{"settings": [true]}`, "data.settings must be an object."},
		{"nested bool", ws, `{"settings": {"advancedWebhooks": "on"}}`, "data.settings.advancedWebhooks must be a boolean."},
		{"top bool", ws, `{"emailVerified": 0}`, "data.emailVerified must be a boolean."},
		{"unknown nested field ignored", ws, `{"owner": {"nope": [1, 2]}}`, ""},
		{"repeated message accepted", listResp, `{"data": [{"id": "a"}, {"id": "b"}], "nextPageToken": "p"}`, ""},
		{"repeated message element field", listResp, `{"data": [{"id": "a"}, {"id": 2}]}`, "data.data[1].id must be a string."},
		{"repeated message element not an object", listResp, `{"data": [{"id": "a"}, "b"]}`, "data.data[1] must be an object."},
		{"repeated message element null", listResp, `{"data": [null]}`, "data.data[0] must not be null."},
		{"repeated message given an object", listResp, `{"data": {"id": "a"}}`, "data.data must be an array of objects."},
		{"optional string given a number", listResp, `{"nextPageToken": 1}`, "data.nextPageToken must be a string."},
		{"deep list in a list", tokens, `{"data": {"apiKey": "k", "authTokens": [{"token": "t", "domains": ["a", "b"]}, {"domains": ["a", false]}]}}`, "data.data.authTokens[1].domains[1] must be a string."},
		{"deep list given a string", tokens, `{"data": {"authTokens": [{"domains": "a"}]}}`, "data.data.authTokens[0].domains must be an array of strings."},
		{"array element path", apikey, `{"allowedDomains": ["a.com", 7, "c.com"]}`, "data.allowedDomains[1] must be a string."},
		{"array element path with the proto name", apikey, `{"allowed_domains": [true]}`, "data.allowed_domains[0] must be a string."},
		{"optional bool", apikey, `{"createAuthToken": "yes"}`, "data.createAuthToken must be a boolean."},
		{"oneof member", auth, `{"apiKey": {"apiKey": "k", "authToken": 1}}`, "data.apiKey.authToken must be a string."},
		{"other oneof member", auth, `{"workspace": {"workspace_id": ["w"]}}`, "data.workspace.workspace_id must be a string."},
	})
}

// A real API message holding a google.protobuf.Struct and repeated messages with doubles.
func TestCheckJSONAccessMessages(t *testing.T) {
	add := desc(&accessv1.AddPermissionsRequest{})
	runCheckCases(t, []checkCase{
		{"accepted", add, `{"user": {"userId": "u"}, "permissions": {"resources": [{"type": "folder", "id": "f", "expiresAt": 1700000000.5}], "context": {"access": {"team": ["a", 1, null], "x": {"y": null}}}}}`, ""},
		{"double given a string number", add, `{"permissions": {"resources": [{"expiresAt": "1.5"}]}}`, ""},
		{"double given a word", add, `{"permissions": {"resources": [{"id": "a"}, {"expiresAt": "soon"}]}}`, "data.permissions.resources[1].expiresAt must be a number."},
		{"double given a boolean", add, `{"permissions": {"resources": [{"expiresAt": true}]}}`, "data.permissions.resources[0].expiresAt must be a number."},
		{"struct given an array", add, `{"permissions": {"context": {"access": ["team"]}}}`, "data.permissions.context.access must be an object."},
		{"struct given a string", add, `{"permissions": {"context": {"access": "team"}}}`, "data.permissions.context.access must be an object."},
		{"struct null accepted", add, `{"permissions": {"context": {"access": null}}}`, ""},
	})
}

// wellKnown, reached through checkJSON with the well-known messages' own descriptors.
func TestCheckJSONWellKnown(t *testing.T) {
	st := desc(&structpb.Struct{})
	val := desc(&structpb.Value{})
	lv := desc(&structpb.ListValue{})
	runCheckCases(t, []checkCase{
		{"struct object", st, `{"a": 1, "b": [null, {"c": "d"}]}`, ""},
		{"struct string", st, `"x"`, "data must be an object."},
		{"struct array", st, `[]`, "data must be an object."},
		{"value null", val, `null`, ""},
		{"value string", val, `"x"`, ""},
		{"value number", val, `1.5`, ""},
		{"value object", val, `{"a": [1]}`, ""},
		{"value array", val, `[1, "a", null]`, ""},
		{"list value", lv, `[1, "a", null, {}]`, ""},
		{"list value object", lv, `{"values": []}`, "data must be an array."},
		{"list value string", lv, `"a"`, "data must be an array."},

		{"string value", desc(&wrapperspb.StringValue{}), `"s"`, ""},
		{"string value number", desc(&wrapperspb.StringValue{}), `1`, "data must be a string."},
		{"string value object", desc(&wrapperspb.StringValue{}), `{"value": "s"}`, "data must be a string."},
		{"bool value", desc(&wrapperspb.BoolValue{}), `false`, ""},
		{"bool value string", desc(&wrapperspb.BoolValue{}), `"false"`, "data must be a boolean."},
		{"double value", desc(&wrapperspb.DoubleValue{}), `-1.25e3`, ""},
		{"double value string", desc(&wrapperspb.DoubleValue{}), `"2.5"`, ""},
		{"double value word", desc(&wrapperspb.DoubleValue{}), `"x"`, "data must be a number."},
		{"float value bool", desc(&wrapperspb.FloatValue{}), `true`, "data must be a number."},
		{"int32 value", desc(&wrapperspb.Int32Value{}), `2147483647`, ""},
		{"int32 value string", desc(&wrapperspb.Int32Value{}), `"7"`, ""},
		{"int32 value fraction", desc(&wrapperspb.Int32Value{}), `1.5`, "data must be an integer."},
		{"int32 value too big", desc(&wrapperspb.Int32Value{}), `99999999999`, "data is out of range."},
		{"int32 value too small", desc(&wrapperspb.Int32Value{}), `-2147483649`, "data is out of range."},
		{"uint32 value", desc(&wrapperspb.UInt32Value{}), `4294967295`, ""},
		{"uint32 value negative", desc(&wrapperspb.UInt32Value{}), `-1`, "data is out of range."},
		{"uint32 value too big", desc(&wrapperspb.UInt32Value{}), `4294967296`, "data is out of range."},
		{"int64 value at 2^53", desc(&wrapperspb.Int64Value{}), `9007199254740992`, ""},
		{"int64 value string", desc(&wrapperspb.Int64Value{}), `"-9007199254740992"`, ""},
		{"int64 value beyond 2^53", desc(&wrapperspb.Int64Value{}), `9007199254740994`, "data is out of range."},
		{"uint64 value word", desc(&wrapperspb.UInt64Value{}), `"many"`, "data must be an integer."},
		{"timestamp", desc(&timestamppb.Timestamp{}), `"2024-01-02T03:04:05Z"`, ""},
		{"timestamp number", desc(&timestamppb.Timestamp{}), `1700000000`, "data must be a string."},
		{"timestamp object", desc(&timestamppb.Timestamp{}), `{"seconds": 1}`, "data must be a string."},
		{"duration", desc(&durationpb.Duration{}), `"1.5s"`, ""},
		{"duration number", desc(&durationpb.Duration{}), `1.5`, "data must be a string."},
		{"field mask", desc(&fieldmaskpb.FieldMask{}), `"a,b.c"`, ""},
		{"field mask array", desc(&fieldmaskpb.FieldMask{}), `["a"]`, "data must be a string."},
	})
}

func TestWellKnownOrdinaryMessage(t *testing.T) {
	if got := wellKnown("data", &object{}, desc(&workspacev1.Workspace{})); got != "-" {
		t.Fatalf("wellKnown on an ordinary message = %q, want -", got)
	}
	if got := wellKnown("data", "x", desc(&wrapperspb.StringValue{})); got != "" {
		t.Fatalf("wellKnown on a StringValue string = %q, want \"\"", got)
	}
}

// Kinds the API messages do not use yet: enums, bytes, 64-bit integers (descriptorpb has them).
func TestCheckJSONOtherKinds(t *testing.T) {
	field := desc(&descriptorpb.FieldDescriptorProto{})
	opt := desc(&descriptorpb.UninterpretedOption{})
	runCheckCases(t, []checkCase{
		{"enum by name", field, `{"type": "TYPE_STRING", "label": "LABEL_REPEATED"}`, ""},
		{"enum by number", field, `{"type": 9}`, ""},
		{"enum by number in a string", field, `{"type": "9"}`, `data.type has an unknown value "9".`},
		{"enum unknown name", field, `{"type": "TYPE_NOPE"}`, `data.type has an unknown value "TYPE_NOPE".`},
		{"enum fraction", field, `{"label": 1.5}`, "data.label must be an integer."},
		{"enum boolean", field, `{"label": true}`, "data.label must be an integer."},
		{"enum out of int32", field, `{"label": 4294967296}`, "data.label is out of range."},
		{"int32 in a proto2 message", field, `{"number": "x"}`, "data.number must be an integer."},
		{"nested options message", field, `{"options": {"packed": "yes"}}`, "data.options.packed must be a boolean."},
		{"bytes", opt, `{"stringValue": "aGk="}`, ""},
		{"bytes given a number", opt, `{"stringValue": 5}`, "data.stringValue must be a base64 string."},
		{"bytes given an array", opt, `{"string_value": [104, 105]}`, "data.string_value must be a base64 string."},
		{"uint64", opt, `{"positiveIntValue": "9007199254740992"}`, ""},
		{"uint64 negative", opt, `{"positiveIntValue": -1}`, "data.positiveIntValue is out of range."},
		{"int64 negative", opt, `{"negativeIntValue": -9007199254740992}`, ""},
		{"int64 fraction", opt, `{"negativeIntValue": -1.25}`, "data.negativeIntValue must be an integer."},
		{"double", opt, `{"doubleValue": 1e300}`, ""},
		{"double overflow", opt, `{"doubleValue": 1e400}`, "data.doubleValue must be a number."},
		{"repeated message element", opt, `{"name": [{"namePart": "a", "isExtension": false}, {"namePart": 1}]}`, "data.name[1].namePart must be a string."},
		{"repeated message element bool", opt, `{"name": [{"isExtension": "no"}]}`, "data.name[0].isExtension must be a boolean."},
		{"repeated message given an object", opt, `{"name": {"namePart": "a"}}`, "data.name must be an array of objects."},
	})
}

func TestCheckFieldPlurals(t *testing.T) {
	fdOf := func(m proto.Message, name string) protoreflect.FieldDescriptor {
		fd := desc(m).Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%T has no field %s", m, name)
		}
		return fd
	}
	tests := []struct {
		fd   protoreflect.FieldDescriptor
		want string
	}{
		{fdOf(&workspacev1.CreateApiKeyRequest{}, "allowed_domains"), "data.f must be an array of strings."},
		{fdOf(&workspacev1.ListApiKeysResponse{}, "data"), "data.f must be an array of objects."},
		{fdOf(&structpb.ListValue{}, "values"), "data.f must be an array of values."},
		{fdOf(&descriptorpb.SourceCodeInfo_Location{}, "path"), "data.f must be an array of numbers."},
		{fdOf(&descriptorpb.FileDescriptorProto{}, "public_dependency"), "data.f must be an array of numbers."},
	}
	for _, tt := range tests {
		if got := (checker{types: true}).field("data.f", "x", tt.fd, 2); got != tt.want {
			t.Errorf("field(%s, \"x\") = %q, want %q", tt.fd.FullName(), got, tt.want)
		}
	}
}

// google.protobuf.Value elements and map values may be null; other messages may not.
func TestCheckFieldNullValues(t *testing.T) {
	values := desc(&structpb.ListValue{}).Fields().ByName("values")
	if got := (checker{types: true}).field("data.values", []any{nil, json.Number("1"), "a"}, values, 2); got != "" {
		t.Errorf("null in a list of Values: %q", got)
	}
	fields := desc(&structpb.Struct{}).Fields().ByName("fields")
	if got := (checker{types: true}).field("data.fields", &object{names: []string{"k"}, values: []any{nil}}, fields, 2); got != "" {
		t.Errorf("null in a map of Values: %q", got)
	}
	if got := (checker{types: true}).field("data.fields", []any{}, fields, 2); got != "data.fields must be an object." {
		t.Errorf("map of Values given an array: %q", got)
	}
}

func TestCheckInteger(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{json.Number("3"), ""},
		{json.Number("3.0"), ""},
		{json.Number("1e2"), ""},
		{json.Number("-0"), ""},
		{"12", ""},
		{" 12 ", ""},
		{json.Number("10.5"), "p must be an integer."},
		{json.Number("101"), "p is out of range."},
		{json.Number("-1"), "p is out of range."},
		{"NaN", "p must be an integer."},
		{"Infinity", "p is out of range."},
		{"", "p must be an integer."},
		{true, "p must be an integer."},
		{nil, "p must be an integer."},
		{[]any{json.Number("1")}, "p must be an integer."},
		{&object{}, "p must be an integer."},
	}
	for _, tt := range tests {
		if got := checkInteger("p", tt.v, 0, 100); got != tt.want {
			t.Errorf("checkInteger(p, %#v, 0, 100) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// checkScalar on each scalar kind, through the "value" field of the wrapper messages.
func TestCheckSingleKinds(t *testing.T) {
	valueField := func(m proto.Message) protoreflect.FieldDescriptor {
		return desc(m).Fields().ByName("value")
	}
	tests := []struct {
		m    proto.Message
		v    any
		want string
	}{
		{&wrapperspb.StringValue{}, "s", ""},
		{&wrapperspb.StringValue{}, json.Number("1"), "p must be a string."},
		{&wrapperspb.BoolValue{}, true, ""},
		{&wrapperspb.BoolValue{}, "true", "p must be a boolean."},
		{&wrapperspb.Int32Value{}, json.Number("-2147483648"), ""},
		{&wrapperspb.Int32Value{}, json.Number("2147483648"), "p is out of range."},
		{&wrapperspb.UInt32Value{}, json.Number("4294967295"), ""},
		{&wrapperspb.UInt32Value{}, json.Number("-1"), "p is out of range."},
		{&wrapperspb.UInt32Value{}, json.Number("4294967296"), "p is out of range."},
		{&wrapperspb.UInt32Value{}, "x", "p must be an integer."},
		{&wrapperspb.Int64Value{}, json.Number("-9007199254740992"), ""},
		{&wrapperspb.Int64Value{}, json.Number("9007199254740994"), "p is out of range."},
		{&wrapperspb.UInt64Value{}, json.Number("9007199254740992"), ""},
		{&wrapperspb.UInt64Value{}, json.Number("-1"), "p is out of range."},
		{&wrapperspb.DoubleValue{}, json.Number("-0.5"), ""},
		{&wrapperspb.DoubleValue{}, "NaN", ""},
		{&wrapperspb.DoubleValue{}, false, "p must be a number."},
		{&wrapperspb.FloatValue{}, "1.25", ""},
		{&wrapperspb.FloatValue{}, &object{}, "p must be a number."},
		{&wrapperspb.BytesValue{}, "aGk=", ""},
		{&wrapperspb.BytesValue{}, json.Number("1"), "p must be a base64 string."},
	}
	for _, tt := range tests {
		fd := valueField(tt.m)
		if got := checkScalar("p", tt.v, fd); got != tt.want {
			t.Errorf("checkScalar(p, %#v, %s) = %q, want %q", tt.v, fd.FullName(), got, tt.want)
		}
	}
}
