package jsoncodec

import (
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

// Writing JSON from the wire bytes gives exactly what writing it from the decoded message
// gives, for random values of every message of the API, including bytes where a message
// field occurs twice (which proto merges).
func TestAppendWireJSONMatchesAppendJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	types := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if !strings.HasPrefix(string(mt.Descriptor().FullName()), "collab.") {
			return true
		}
		types++
		for i := range 60 {
			a, b := mt.New(), mt.New()
			if i > 0 {
				fill(r, a, 4)
				fill(r, b, 4)
			}
			wa, err := proto.Marshal(a.Interface())
			if err != nil {
				t.Fatal(err)
			}
			wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b.Interface())
			for _, c := range []struct {
				name string
				wire []byte
				msg  proto.Message
			}{
				{"one", wa, a.Interface()},
				{"merged", append(append([]byte{}, wa...), wb...), merged(a.Interface(), b.Interface())},
			} {
				want, wantErr := appendJSON(nil, c.msg.ProtoReflect())
				got, gotErr := appendWireJSON(nil, mt.Descriptor(), c.wire)
				if (wantErr != nil) != (gotErr != nil) {
					t.Fatalf("%s %s: decoded error %v, wire error %v", mt.Descriptor().FullName(), c.name, wantErr, gotErr)
				}
				if wantErr == nil && string(want) != string(got) {
					t.Fatalf("%s %s differs:\ndecoded %s\nwire    %s", mt.Descriptor().FullName(), c.name, want, got)
				}
			}
		}
		return true
	})
	if types < 50 {
		t.Fatalf("only %d message types compared", types)
	}
}

func merged(a, b proto.Message) proto.Message {
	m := proto.Clone(a)
	proto.Merge(m, b)
	return m
}

func TestAppendWireJSONRefusesBrokenBytes(t *testing.T) {
	md := (&accessv1.GetPermissionsResponse{}).ProtoReflect().Descriptor()
	good, _ := proto.Marshal(&accessv1.GetPermissionsResponse{Status: "success", Data: map[string]*accessv1.UserPermissions{"u": {}}})
	for _, bad := range [][]byte{good[:len(good)-1], {0xff}, {0x0a, 0x05, 'a'}} {
		if _, err := appendWireJSON(nil, md, bad); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
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
