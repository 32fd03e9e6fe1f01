package jsoncodec

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

func TestMarshalRefusesWhatProtojsonRefuses(t *testing.T) {
	for _, c := range []struct {
		why string
		m   proto.Message
	}{
		{"invalid UTF-8", &accessv1.PermissionEntry{Error: proto.String("bad \xff utf8")}},
		{"a Value with no kind", &structpb.Value{}},
		{"a NaN Value", structpb.NewNumberValue(math.NaN())},
		{"an infinite Value in a Struct", &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.Inf(-1))}}},
		{"invalid UTF-8 in a map key", &accessv1.GetPermissionsResponse{Data: map[string]*accessv1.UserPermissions{"\xc0": {}}}},
	} {
		if _, err := protojson.Marshal(c.m); err == nil {
			t.Fatalf("%s: protojson accepts it", c.why)
		}
		if b, err := Marshal(c.m, "", ""); err == nil {
			t.Errorf("%s accepted: %s", c.why, b)
		}
	}
}

// An answer kept undecoded (all of it in unknown fields, as the gateway's connections keep
// answers) is written as the same message decoded.
func TestMarshalUndecodedAnswer(t *testing.T) {
	resp := permissionsResponse()
	wire, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	kept := &accessv1.GetPermissionsResponse{}
	kept.ProtoReflect().SetUnknown(wire)
	fromWire, err := Marshal(kept, `{"result":`, "}")
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := Marshal(resp, `{"result":`, "}")
	if err != nil {
		t.Fatal(err)
	}
	if string(fromWire) != string(decoded) || !strings.HasPrefix(string(decoded), `{"result":{"status":"success",`) {
		t.Fatalf("undecoded %.80s...\ndecoded   %.80s...", fromWire, decoded)
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

// The 100 users × 30 documents answer of docs/benchmarks.md: protojson, Marshal of the decoded
// message (proto.Marshal, then the wire encoder), and the wire encoder on the bytes the
// gateway's connections keep.
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
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			if _, err := Marshal(resp, `{"result":`, "}"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("undecoded", func(b *testing.B) {
		wire, _ := proto.Marshal(resp)
		kept := &accessv1.GetPermissionsResponse{}
		kept.ProtoReflect().SetUnknown(wire)
		for b.Loop() {
			if _, err := Marshal(kept, `{"result":`, "}"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMarshalPermissionsFromWire(b *testing.B) {
	resp := permissionsResponse()
	wire, _ := proto.Marshal(resp)
	md := resp.ProtoReflect().Descriptor()
	for b.Loop() {
		if _, err := appendWireJSON(nil, md, wire); err != nil {
			b.Fatal(err)
		}
	}
}
