package gateway

import (
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/gateway/jsoncodec"
)

func TestDeferredCodecKeepsTheBytes(t *testing.T) {
	want := &accessv1.GetPermissionsResponse{Status: "success", Message: "m"}
	codec := deferredCodec{encoding.GetCodecV2("proto")}
	b, _ := proto.Marshal(want)
	got := &accessv1.GetPermissionsResponse{Status: "stale"}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
		t.Fatal(err)
	}
	if got.GetStatus() != "" || len(got.ProtoReflect().GetUnknown()) != len(b) {
		t.Fatalf("not deferred: %v", got)
	}
	out, err := jsoncodec.Marshal(got, "", "")
	if err != nil || !strings.Contains(string(out), `"status":"success"`) {
		t.Fatalf("%s %v", out, err)
	}
}
