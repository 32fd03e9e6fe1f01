package grpcserver

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protojson"
	protov2 "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// jsonDepth is the oracle: how deeply the message's JSON (protojson, the gateway's mapping)
// nests, its own object being level 1, as the gateway counts a body's data.
func jsonDepth(t *testing.T, m protov2.Message) int {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// randomValue is a free-form value nesting at most levels more levels of lists and objects.
func randomValue(r *rand.Rand, levels int) *structpb.Value {
	if levels == 0 || r.IntN(40) == 0 {
		return structpb.NewStringValue("x")
	}
	n := 1 // mostly a chain; now and then a sibling, a short one, so the tree stays small
	if r.IntN(10) == 0 {
		n = 2
	}
	if r.IntN(2) == 0 {
		l := &structpb.ListValue{}
		for i := range n {
			l.Values = append(l.Values, randomValue(r, (levels-1)>>i))
		}
		return structpb.NewListValue(l)
	}
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range n {
		s.Fields[string(rune('a'+i))] = randomValue(r, (levels-1)>>i)
	}
	return structpb.NewStructValue(s)
}

// tooDeep agrees with the JSON the gateway would read, for free-form values at several places
// in the API's requests (data of an event; an access context inside a message inside a
// message) and for maps and lists of messages (an answer's permissions).
func TestTooDeepCountsAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var over, under int
	for range 400 {
		v := randomValue(r, 50+r.IntN(40))
		var m protov2.Message
		if s := v.GetStructValue(); s != nil && r.IntN(2) == 0 {
			m = &eventsv1.PublishEventRequest{Type: "t", Data: s}
		} else if s != nil {
			m = &accessv1.GenerateTokenRequest{Permissions: &accessv1.Permissions{Context: &accessv1.ContextAccess{Access: s}}}
		} else {
			m = &eventsv1.PublishEventRequest{Type: "t", Data: &structpb.Struct{Fields: map[string]*structpb.Value{"v": v}}}
		}
		want := jsonDepth(t, m) > MaxRequestDepth
		if got := tooDeep(m.ProtoReflect(), 1); got != want {
			t.Fatalf("tooDeep %v, the JSON nests %d levels: %s", got, jsonDepth(t, m), protojson.Format(m)[:200])
		}
		if want {
			over++
		} else {
			under++
		}
	}
	if over < 40 || under < 40 {
		t.Fatalf("the cases do not straddle the limit: %d over, %d under", over, under)
	}
	perms := &accessv1.GetPermissionsResponse{Data: map[string]*accessv1.UserPermissions{
		"u": {Documents: map[string]*accessv1.PermissionEntry{"d": {}}},
	}}
	if d := jsonDepth(t, perms); tooDeep(perms.ProtoReflect(), MaxRequestDepth-d+1) || !tooDeep(perms.ProtoReflect(), MaxRequestDepth-d+2) {
		t.Fatalf("maps of messages: %d levels not counted as JSON", d)
	}
}

// Types that cannot nest past the limit are never walked; free-form ones are.
func TestStaticDepth(t *testing.T) {
	for _, c := range []struct {
		m    protov2.Message
		walk bool
	}{
		{&workspacev1.CreateWorkspaceRequest{}, false},
		{&accessv1.GetPermissionsRequest{}, false},
		{&eventsv1.PublishEventRequest{}, true},
		{&accessv1.GenerateTokenRequest{}, true},
	} {
		if got := checkFor("/none/Method", c.m.ProtoReflect().Descriptor()).walk; got != c.walk {
			t.Errorf("%T: walk %v, want %v", c.m, got, c.walk)
		}
	}
}

// The codec turns protobuf's own recursion refusal (the real decoder's error, known by its
// text) into the marker, and leaves other errors alone.
func TestServerCodecMarksTooDeep(t *testing.T) {
	var v any = "x"
	for range 6000 {
		v = []any{v}
	}
	deep, err := structpb.NewStruct(map[string]any{"l": v})
	if err != nil {
		t.Fatal(err)
	}
	b, err := protov2.Marshal(&eventsv1.PublishEventRequest{Type: "t", Data: deep})
	if err != nil {
		t.Fatal(err)
	}
	plain := encoding.GetCodecV2(proto.Name)
	if err := plain.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &eventsv1.PublishEventRequest{}); err == nil || !strings.Contains(err.Error(), "exceeded maximum recursion depth") {
		t.Fatalf("protobuf's decoder: %v, want its recursion error", err)
	}
	c := serverCodec{plain}
	got := &eventsv1.PublishEventRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil || !markedTooDeep(got) || got.GetType() != "" {
		t.Fatalf("codec: %v, marked %v, type %q", err, markedTooDeep(got), got.GetType())
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &eventsv1.PublishEventRequest{}); err == nil {
		t.Fatal("a broken message decoded")
	}
	ok := &eventsv1.PublishEventRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x12, 0x01, 't'})}, ok); err != nil || markedTooDeep(ok) || ok.GetType() != "t" {
		t.Fatalf("a plain message: %v, %v", err, ok)
	}
}
