package grpcserver

import (
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
)

// tooDeepField is the field number of the marker serverCodec leaves on a request it could not
// decode for its depth: the highest a field may have, which no message of ours uses.
const tooDeepField = protowire.Number(1<<29 - 1)

// tooDeepMarker is the marker itself, an unknown bytes field.
var tooDeepMarker = protowire.AppendBytes(protowire.AppendTag(nil, tooDeepField, protowire.BytesType), []byte("collab: nested too deeply"))

// serverCodec is gRPC's protobuf codec, except that a request nested past protobuf's recursion
// limit (10,000 messages) is decoded as an empty message carrying tooDeepMarker instead of
// failing: gRPC would answer INTERNAL with the decoder's words, where the request limits answer
// INVALID_ARGUMENT "Request body is nested too deeply" as the gateway does. protobuf does not
// export its recursion error, so it is known by its text (checked by a test against the real
// decoder).
type serverCodec struct{ encoding.CodecV2 }

func newServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(serverCodec{encoding.GetCodecV2(proto.Name)})
}

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil || !strings.Contains(err.Error(), "exceeded maximum recursion depth") {
		return err
	}
	m, ok := v.(protov2.Message)
	if !ok {
		return err
	}
	protov2.Reset(m)
	m.ProtoReflect().SetUnknown(tooDeepMarker)
	return nil
}

// markedTooDeep reports whether serverCodec marked m.
func markedTooDeep(m protov2.Message) bool {
	u := m.ProtoReflect().GetUnknown()
	return len(u) > 0 && string(u) == string(tooDeepMarker)
}
