package jsoncodec

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

var tricky = []string{"", "a", "café", "quote\"back\\slash", "ctl\x00\x01\x1f", "tab\tnl\n\r\b\f", "<&>", "\u2028\u2029", "😀 emoji", strings.Repeat("x", 70)}
var floats = []float64{0, 1, -1, 0.5, 1e-7, 1e-6, 123456789.125, 1e20, 1e21, 5e-324, math.MaxFloat64, 1.0 / 3, math.NaN(), math.Inf(1), math.Inf(-1), 1784567890}

// fill sets a random subset of m's fields to random values, nesting up to depth.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Value":
		fillValue(r, m, depth)
		return
	}
	fields := m.Descriptor().Fields()
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

func fillValue(r *rand.Rand, m protoreflect.Message, depth int) {
	v := m.Interface().(*structpb.Value)
	switch n := r.IntN(6); {
	case n == 0 || depth <= 0:
		v.Kind = &structpb.Value_StringValue{StringValue: tricky[r.IntN(len(tricky))]}
	case n == 1:
		v.Kind = &structpb.Value_NullValue{}
	case n == 2:
		f := floats[r.IntN(len(floats))]
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 2.5
		}
		v.Kind = &structpb.Value_NumberValue{NumberValue: f}
	case n == 3:
		v.Kind = &structpb.Value_BoolValue{BoolValue: r.IntN(2) == 0}
	case n == 4:
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for range r.IntN(3) {
			inner := &structpb.Value{}
			fillValue(r, inner.ProtoReflect(), depth-1)
			s.Fields[tricky[r.IntN(len(tricky))]] = inner
		}
		v.Kind = &structpb.Value_StructValue{StructValue: s}
	default:
		l := &structpb.ListValue{}
		for range r.IntN(3) {
			inner := &structpb.Value{}
			fillValue(r, inner.ProtoReflect(), depth-1)
			l.Values = append(l.Values, inner)
		}
		v.Kind = &structpb.Value_ListValue{ListValue: l}
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
		return protoreflect.ValueOfString(tricky[r.IntN(len(tricky))])
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(r.Uint32()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(r.Uint64()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(floats[r.IntN(len(floats))]))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(floats[r.IntN(len(floats))])
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	}
	panic("kind " + fd.Kind().String())
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	return buf.String()
}

// The fast encoder writes exactly what protojson writes, byte for byte once protojson's
// deliberately random spaces are removed, for random values of every message of the API.
func TestAppendJSONMatchesProtojson(t *testing.T) {
	ref := protojson.MarshalOptions{EmitUnpopulated: true}
	r := rand.New(rand.NewPCG(1, 2))
	types := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if !strings.HasPrefix(string(mt.Descriptor().FullName()), "collab.") {
			return true
		}
		types++
		for i := range 60 {
			m := mt.New()
			if i > 0 {
				fill(r, m, 4)
			}
			want, wantErr := ref.Marshal(m.Interface())
			got, gotErr := appendJSON(nil, m)
			if (wantErr != nil) != (gotErr != nil) {
				t.Fatalf("%s: protojson error %v, ours %v", mt.Descriptor().FullName(), wantErr, gotErr)
			}
			if wantErr != nil {
				continue
			}
			if w, g := compact(t, want), compact(t, got); w != g {
				t.Fatalf("%s differs:\nprotojson %s\nours      %s", mt.Descriptor().FullName(), w, g)
			}
		}
		return true
	})
	if types < 50 {
		t.Fatalf("only %d collab message types compared", types)
	}
}

func TestAppendJSONRefusesWhatProtojsonRefuses(t *testing.T) {
	bad := &accessv1.PermissionEntry{Error: proto.String("bad \xff utf8")}
	if _, err := Marshal(bad, "", ""); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
	if _, err := Marshal(&structpb.Value{}, "", ""); err == nil {
		t.Fatal("a Value with no kind accepted")
	}
	if _, err := Marshal(structpb.NewNumberValue(math.NaN()), "", ""); err == nil {
		t.Fatal("a NaN Value accepted")
	}
}

func permissionsResponse() *accessv1.GetPermissionsResponse {
	resp := &accessv1.GetPermissionsResponse{Status: "success", Message: "User permissions retrieved successfully.", Data: map[string]*accessv1.UserPermissions{}}
	for u := range 100 {
		up := &accessv1.UserPermissions{Documents: map[string]*accessv1.PermissionEntry{}, Folders: map[string]*accessv1.PermissionEntry{},
			Organization: map[string]*accessv1.OrganizationAccess{"org": {AccessRole: "editor"}}}
		for d := range 30 {
			up.Documents["doc-"+strings.Repeat("x", d%3)+string(rune('a'+d))] = &accessv1.PermissionEntry{AccessRole: proto.String("viewer"), AccessType: proto.String("restricted")}
		}
		resp.Data["user-"+string(rune('A'+u%26))+strings.Repeat("u", u/26)] = up
	}
	return resp
}

func BenchmarkMarshalPermissions(b *testing.B) {
	resp := permissionsResponse()
	b.Run("protojson", func(b *testing.B) {
		opts := protojson.MarshalOptions{EmitUnpopulated: true}
		for b.Loop() {
			if _, err := opts.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(resp, `{"result":`, "}"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
