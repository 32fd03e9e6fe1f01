package jsoncodec

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	// The well-known types the test messages use must be in the registries.
	_ "google.golang.org/protobuf/types/known/anypb"
	_ "google.golang.org/protobuf/types/known/durationpb"
	_ "google.golang.org/protobuf/types/known/emptypb"
	_ "google.golang.org/protobuf/types/known/fieldmaskpb"
	_ "google.golang.org/protobuf/types/known/structpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
	_ "google.golang.org/protobuf/types/known/wrapperspb"
)

// A message set for tests only, built from descriptors so that nothing is added to proto/ and
// no code is generated: every field kind, enums, proto3 optional, packed and unpacked lists,
// maps with every key kind, several oneofs, recursion, the well-known types, and a message with
// more fields and oneofs than the encoder notes on the stack.
//
//	enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; NEGATIVE = -3; }
//	message Leaf {           // few fields: the encoder's notes live on the stack
//	  int32 n = 1; string s = 2; Leaf child = 3; repeated string tags = 4; Color color = 5;
//	  oneof pick { string p_str = 6; sint64 p_num = 7; }
//	  string renamed = 8 [json_name = "customJSON"];
//	}
//	message Kinds { ... }    // see kindsFields

const testPackage = "jsoncodec.test"

var scalarKinds = []struct {
	name string
	typ  descriptorpb.FieldDescriptorProto_Type
}{
	{"int32", descriptorpb.FieldDescriptorProto_TYPE_INT32},
	{"int64", descriptorpb.FieldDescriptorProto_TYPE_INT64},
	{"uint32", descriptorpb.FieldDescriptorProto_TYPE_UINT32},
	{"uint64", descriptorpb.FieldDescriptorProto_TYPE_UINT64},
	{"sint32", descriptorpb.FieldDescriptorProto_TYPE_SINT32},
	{"sint64", descriptorpb.FieldDescriptorProto_TYPE_SINT64},
	{"fixed32", descriptorpb.FieldDescriptorProto_TYPE_FIXED32},
	{"fixed64", descriptorpb.FieldDescriptorProto_TYPE_FIXED64},
	{"sfixed32", descriptorpb.FieldDescriptorProto_TYPE_SFIXED32},
	{"sfixed64", descriptorpb.FieldDescriptorProto_TYPE_SFIXED64},
	{"float", descriptorpb.FieldDescriptorProto_TYPE_FLOAT},
	{"double", descriptorpb.FieldDescriptorProto_TYPE_DOUBLE},
	{"bool", descriptorpb.FieldDescriptorProto_TYPE_BOOL},
	{"string", descriptorpb.FieldDescriptorProto_TYPE_STRING},
	{"bytes", descriptorpb.FieldDescriptorProto_TYPE_BYTES},
}

var wrapperNames = []string{"DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue", "StringValue", "BytesValue"}

type messageBuilder struct {
	msg    *descriptorpb.DescriptorProto
	oneofs []string // the real oneofs; done adds the synthetic ones of proto3 optional after them
}

func (b *messageBuilder) add(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, typeName string, repeated bool) *descriptorpb.FieldDescriptorProto {
	f := &descriptorpb.FieldDescriptorProto{
		Name:   proto.String(name),
		Number: proto.Int32(num),
		Type:   typ.Enum(),
		Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
	}
	if repeated {
		f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	b.msg.Field = append(b.msg.Field, f)
	return f
}

func (b *messageBuilder) inOneof(f *descriptorpb.FieldDescriptorProto, oneof string) {
	for i, name := range b.oneofs {
		if name == oneof {
			f.OneofIndex = proto.Int32(int32(i))
			return
		}
	}
	b.oneofs = append(b.oneofs, oneof)
	f.OneofIndex = proto.Int32(int32(len(b.oneofs) - 1))
}

func (b *messageBuilder) optional(f *descriptorpb.FieldDescriptorProto) {
	f.Proto3Optional = proto.Bool(true)
}

// addMap adds map<key, value> under name, with the entry message protoc would make.
func (b *messageBuilder) addMap(name string, num int32, key, val descriptorpb.FieldDescriptorProto_Type, valType string) {
	entryName := ""
	for _, part := range strings.Split(name, "_") {
		entryName += strings.ToUpper(part[:1]) + part[1:]
	}
	entryName += "Entry"
	entry := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String(entryName), Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)}}}
	entry.add("key", 1, key, "", false)
	entry.add("value", 2, val, valType, false)
	b.msg.NestedType = append(b.msg.NestedType, entry.msg)
	b.add(name, num, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, "."+testPackage+"."+b.msg.GetName()+"."+entryName, true)
}

func (b *messageBuilder) done() *descriptorpb.DescriptorProto {
	for _, name := range b.oneofs {
		b.msg.OneofDecl = append(b.msg.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String(name)})
	}
	for _, f := range b.msg.Field {
		if f.GetProto3Optional() {
			f.OneofIndex = proto.Int32(int32(len(b.msg.OneofDecl)))
			b.msg.OneofDecl = append(b.msg.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_" + f.GetName())})
		}
	}
	return b.msg
}

const (
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
)

func testFile() *descriptorpb.FileDescriptorProto {
	leafName, kindsName, colorName := "."+testPackage+".Leaf", "."+testPackage+".Kinds", "."+testPackage+".Color"

	leaf := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("Leaf")}}
	leaf.add("n", 1, descriptorpb.FieldDescriptorProto_TYPE_INT32, "", false)
	leaf.add("s", 2, tString, "", false)
	leaf.add("child", 3, tMessage, leafName, false)
	leaf.add("tags", 4, tString, "", true)
	leaf.add("color", 5, tEnum, colorName, false)
	leaf.inOneof(leaf.add("p_str", 6, tString, "", false), "pick")
	leaf.inOneof(leaf.add("p_num", 7, descriptorpb.FieldDescriptorProto_TYPE_SINT64, "", false), "pick")
	leaf.add("renamed", 8, tString, "", false).JsonName = proto.String("customJSON")

	k := &messageBuilder{msg: &descriptorpb.DescriptorProto{Name: proto.String("Kinds")}}
	for i, s := range scalarKinds {
		k.add("s_"+s.name, int32(1+i), s.typ, "", false)
		k.optional(k.add("o_"+s.name, int32(21+i), s.typ, "", false))
	}
	k.add("s_enum", 16, tEnum, colorName, false)
	k.optional(k.add("o_enum", 36, tEnum, colorName, false))
	k.optional(k.add("o_leaf", 37, tMessage, leafName, false))
	num := int32(41)
	for _, s := range scalarKinds {
		if s.typ == tString || s.typ == descriptorpb.FieldDescriptorProto_TYPE_BYTES {
			k.add("r_"+s.name, num, s.typ, "", true)
			num++
			continue
		}
		k.add("p_"+s.name, num, s.typ, "", true) // packed: proto3's default
		k.add("u_"+s.name, num+1, s.typ, "", true).Options = &descriptorpb.FieldOptions{Packed: proto.Bool(false)}
		num += 2
	}
	k.add("p_enum", num, tEnum, colorName, true)
	k.add("u_enum", num+1, tEnum, colorName, true).Options = &descriptorpb.FieldOptions{Packed: proto.Bool(false)}
	k.add("r_leaf", num+2, tMessage, leafName, true)
	k.add("r_kinds", num+3, tMessage, kindsName, true)
	num = 90
	for _, s := range scalarKinds {
		switch s.typ {
		case descriptorpb.FieldDescriptorProto_TYPE_FLOAT, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, descriptorpb.FieldDescriptorProto_TYPE_BYTES:
			continue // not map key kinds
		}
		k.addMap("map_"+s.name+"_string", num, s.typ, tString, "")
		num++
	}
	k.addMap("map_string_leaf", 102, tString, tMessage, leafName)
	k.addMap("map_string_color", 103, tString, tEnum, colorName)
	k.addMap("map_int64_kinds", 104, descriptorpb.FieldDescriptorProto_TYPE_INT64, tMessage, kindsName)
	k.addMap("map_string_bytes", 105, tString, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "")
	k.addMap("map_string_double", 106, tString, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "")
	k.addMap("map_bool_float", 107, descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "")
	k.addMap("map_uint32_int64", 108, descriptorpb.FieldDescriptorProto_TYPE_UINT32, descriptorpb.FieldDescriptorProto_TYPE_INT64, "")
	k.addMap("map_string_value", 109, tString, tMessage, ".google.protobuf.Value")
	k.addMap("map_sint64_sfixed32", 119, descriptorpb.FieldDescriptorProto_TYPE_SINT64, descriptorpb.FieldDescriptorProto_TYPE_SFIXED32, "")
	k.inOneof(k.add("a_str", 110, tString, "", false), "choice_a")
	k.inOneof(k.add("a_int", 111, descriptorpb.FieldDescriptorProto_TYPE_INT64, "", false), "choice_a")
	k.inOneof(k.add("a_leaf", 112, tMessage, leafName, false), "choice_a")
	k.inOneof(k.add("b_enum", 113, tEnum, colorName, false), "choice_b")
	k.inOneof(k.add("b_bytes", 114, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "", false), "choice_b")
	k.inOneof(k.add("b_value", 115, tMessage, ".google.protobuf.Value", false), "choice_b")
	k.inOneof(k.add("c_double", 116, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "", false), "choice_c")
	k.inOneof(k.add("c_self", 117, tMessage, kindsName, false), "choice_c")
	k.inOneof(k.add("c_float", 118, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "", false), "choice_c")
	k.add("leaf", 120, tMessage, leafName, false)
	k.add("self", 121, tMessage, kindsName, false)
	k.add("struct", 130, tMessage, ".google.protobuf.Struct", false)
	k.add("value", 131, tMessage, ".google.protobuf.Value", false)
	k.add("list_value", 132, tMessage, ".google.protobuf.ListValue", false)
	for i, w := range wrapperNames {
		k.add("w_"+strings.ToLower(w), int32(133+i), tMessage, ".google.protobuf."+w, false)
	}
	k.add("empty", 142, tMessage, ".google.protobuf.Empty", false)
	k.add("any", 143, tMessage, ".google.protobuf.Any", false)
	k.add("timestamp", 144, tMessage, ".google.protobuf.Timestamp", false)
	k.add("duration", 145, tMessage, ".google.protobuf.Duration", false)
	k.add("field_mask", 146, tMessage, ".google.protobuf.FieldMask", false)
	k.add("r_value", 147, tMessage, ".google.protobuf.Value", true)
	k.add("r_struct", 148, tMessage, ".google.protobuf.Struct", true)
	k.addMap("map_string_struct", 149, tString, tMessage, ".google.protobuf.Struct")
	k.add("r_stringvalue", 150, tMessage, ".google.protobuf.StringValue", true)
	k.add("r_empty", 151, tMessage, ".google.protobuf.Empty", true)
	k.add("r_list_value", 152, tMessage, ".google.protobuf.ListValue", true)
	k.add("big_number", 100000, tString, "", false)
	k.add("max_number", 536870911, descriptorpb.FieldDescriptorProto_TYPE_INT32, "", false)

	return &descriptorpb.FileDescriptorProto{
		Name:    proto.String("jsoncodec_test.proto"),
		Package: proto.String(testPackage),
		Syntax:  proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/wrappers.proto", "google/protobuf/empty.proto",
			"google/protobuf/any.proto", "google/protobuf/timestamp.proto", "google/protobuf/duration.proto", "google/protobuf/field_mask.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Color"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("COLOR_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("RED"), Number: proto.Int32(1)},
				{Name: proto.String("GREEN"), Number: proto.Int32(2)},
				{Name: proto.String("NEGATIVE"), Number: proto.Int32(-3)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{leaf.done(), k.done()},
	}
}

var (
	testTypesOnce sync.Once
	testTypesErr  error
	leafType      protoreflect.MessageType
	kindsType     protoreflect.MessageType
)

// testTypes returns the test message types Leaf and Kinds.
func testTypes(t testing.TB) (leaf, kinds protoreflect.MessageType) {
	t.Helper()
	testTypesOnce.Do(func() {
		fd, err := protodesc.NewFile(testFile(), protoregistry.GlobalFiles)
		if err != nil {
			testTypesErr = fmt.Errorf("build the test messages: %w", err)
			return
		}
		leafType = dynamicpb.NewMessageType(fd.Messages().ByName("Leaf"))
		kindsType = dynamicpb.NewMessageType(fd.Messages().ByName("Kinds"))
	})
	if testTypesErr != nil {
		t.Fatal(testTypesErr)
	}
	return leafType, kindsType
}

// The test message set has what it claims: every kind, and more than maxNoted fields and
// oneofs in Kinds.
func TestTestMessagesCoverEveryKind(t *testing.T) {
	leaf, kinds := testTypes(t)
	if n := leaf.Descriptor().Fields().Len(); n > maxNoted {
		t.Fatalf("Leaf has %d fields: it should take the encoder's small path", n)
	}
	md := kinds.Descriptor()
	if md.Fields().Len() <= maxNoted || md.Oneofs().Len() <= maxNoted {
		t.Fatalf("Kinds has %d fields and %d oneofs; want more than %d of each", md.Fields().Len(), md.Oneofs().Len(), maxNoted)
	}
	kindsSeen := map[protoreflect.Kind]bool{}
	keyKinds := map[protoreflect.Kind]bool{}
	var packed, unpacked, optional, wellKnown int
	for i := 0; i < md.Fields().Len(); i++ {
		fd := md.Fields().Get(i)
		kindsSeen[fd.Kind()] = true
		if fd.IsMap() {
			keyKinds[fd.MapKey().Kind()] = true
		}
		if fd.IsList() && fd.IsPacked() {
			packed++
		} else if fd.IsList() && fd.Message() == nil {
			unpacked++
		}
		if fd.HasOptionalKeyword() {
			optional++
		}
		if fd.Message() != nil && strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
			wellKnown++
		}
	}
	for _, k := range []protoreflect.Kind{protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
		protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind, protoreflect.Sfixed32Kind,
		protoreflect.Fixed32Kind, protoreflect.FloatKind, protoreflect.Sfixed64Kind, protoreflect.Fixed64Kind, protoreflect.DoubleKind,
		protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind} {
		if !kindsSeen[k] {
			t.Errorf("no field of kind %v", k)
		}
	}
	if len(keyKinds) != 12 {
		t.Errorf("map keys of %d kinds, want all 12", len(keyKinds))
	}
	if packed < 14 || unpacked < 14 || optional < 17 || wellKnown < 20 {
		t.Errorf("packed %d, unpacked %d, optional %d, well-known %d: fewer than meant", packed, unpacked, optional, wellKnown)
	}
}
