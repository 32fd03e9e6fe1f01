package jsoncodec

import (
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// checkAgainstProtojson decodes body both ways: when the fast decoder accepts it, protojson
// must accept its data too and produce the same message.
func checkAgainstProtojson(t *testing.T, mt protoreflect.MessageType, body string) (fast proto.Message) {
	t.Helper()
	fast = mt.New().Interface()
	if decodeFast([]byte(body), fast) != nil {
		return nil
	}
	slow := mt.New().Interface()
	if err := slowUnmarshal([]byte(body), slow); err != nil {
		t.Fatalf("%s: fast decoder accepted what protojson refuses (%v):\n%s", mt.Descriptor().FullName(), err, body)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("%s: decoders disagree on\n%s\nfast %v\nslow %v", mt.Descriptor().FullName(), body, fast, slow)
	}
	return fast
}

func TestDecodeFastMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if !strings.HasPrefix(string(mt.Descriptor().FullName()), "collab.") {
			return true
		}
		for i := range 40 {
			m := mt.New()
			if i > 0 {
				fill(r, m, 3)
			}
			data, err := protojson.MarshalOptions{UseProtoNames: i%2 == 0, EmitUnpopulated: i%3 == 0}.Marshal(m.Interface())
			if err != nil {
				continue // values JSON cannot hold (NaN in a Value, say)
			}
			got := checkAgainstProtojson(t, mt, `{"data":`+string(data)+`}`)
			if got == nil {
				continue
			}
			accepted++
			// The body was written from m, so reading it back must give m again.
			if !proto.Equal(got, m.Interface()) {
				t.Fatalf("%s: round trip changed the message\nsent %v\ngot  %v", mt.Descriptor().FullName(), m, got)
			}
		}
		return true
	})
	if accepted < 500 {
		t.Fatalf("the fast path took only %d bodies: it is hardly used", accepted)
	}
}

func TestDecodeFastOddInputs(t *testing.T) {
	create := (&workspacev1.CreateWorkspaceRequest{}).ProtoReflect().Type()
	list := (&workspacev1.ListApiKeysRequest{}).ProtoReflect().Type()
	perms := (&accessv1.AddPermissionsRequest{}).ProtoReflect().Type()
	cases := []struct {
		mt     protoreflect.MessageType
		body   string
		expect bool // whether the fast path should take it
	}{
		{create, `{"data":{"ownerEmail":"a@b.co"}}`, true},
		{create, ` {"other":[1,{"x":null}],"data":{"owner_email":"a\u00e9\ud83d\ude00\"\\\/\n"}} `, true},
		{create, `{"data":{"ownerEmail":"a","owner_email":"b"}}`, false},
		{create, `{"data":{"ownerEmail":"\ud83d"}}`, false},
		{create, "{\"data\":{\"ownerEmail\":\"\xff\"}}", false},
		{create, "{\"data\":{\"ownerEmail\":\"a\tb\"}}", false},
		{create, `{"data":{"ownerEmail":null}}`, true},
		{create, `{"data":{}} {}`, false},
		{create, `{"data":{}}}`, false},
		{create, `{"data":{},"data":{}}`, false},
		{create, `{"data":{"unknown":01}}`, false},
		{list, `{"data":{"pageSize":7}}`, true},
		{list, `{"data":{"pageSize":"7"}}`, false},
		{list, `{"data":{"pageSize":1e2}}`, false},
		{list, `{"data":{"pageSize":-0}}`, true},
		{list, `{"data":{"pageSize":2147483648}}`, false},
		{perms, `{"data":{"user":{"userId":"u"},"permissions":{"resources":[{"type":"document","id":"d","expiresAt":1.5e9}],"context":{"access":{"a":1}}}}}`, false},
		{perms, `{"data":{"user":{"userId":"u"},"permissions":{"resources":[{"type":"document","id":"d","expiresAt":1.5e9}]}}}`, true},
	}
	for _, c := range cases {
		if got := checkAgainstProtojson(t, c.mt, c.body) != nil; got != c.expect {
			t.Errorf("fast path took %q: %v, want %v", c.body, got, c.expect)
		}
	}
}

func BenchmarkDecodePermissionsRequest(b *testing.B) {
	var ids []string
	for i := range 30 {
		ids = append(ids, "document-"+strings.Repeat("x", i%5))
	}
	data, _ := protojson.Marshal(&accessv1.GetPermissionsRequest{OrganizationId: "org", UserIds: []string{"user-1"}, DocumentIds: ids})
	body := []byte(`{"data":` + string(data) + `}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if err := Unmarshal(body, &accessv1.GetPermissionsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		for b.Loop() {
			if err := slowUnmarshal(body, &accessv1.GetPermissionsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
