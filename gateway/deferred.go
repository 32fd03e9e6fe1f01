package gateway

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Responses on their way to HTTP callers are never used as Go values: decoding the binary
// answer into Go structs (maps of messages, mostly) only to walk them again for JSON was the
// largest cost of a large answer. So the gateway's connections keep each answer's bytes
// (deferredCodec), and jsoncodec.Marshal writes the JSON straight from the wire format.

// deferredCodec marshals requests as the proto codec does and keeps response bytes undecoded,
// as the unknown fields of the response message.
type deferredCodec struct{ proto encoding.CodecV2 }

func (c deferredCodec) Name() string { return "proto" }

func (c deferredCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c deferredCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	proto.Reset(m)
	m.ProtoReflect().SetUnknown(data.Materialize())
	return nil
}

// UnmarshalOwned is Unmarshal of bytes the caller hands over for good (internal/inproc's
// answers): they are kept without the copy that a transport's pooled buffers need.
func (c deferredCodec) UnmarshalOwned(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.proto.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, v)
	}
	proto.Reset(m)
	m.ProtoReflect().SetUnknown(b)
	return nil
}

// deferredConn is a connection whose calls answer with deferred responses.
type deferredConn struct {
	grpc.ClientConnInterface
	codec grpc.CallOption
}

func newDeferredConn(conn grpc.ClientConnInterface) deferredConn {
	return deferredConn{conn, grpc.ForceCodecV2(deferredCodec{encoding.GetCodecV2("proto")})}
}

func (d deferredConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return d.ClientConnInterface.Invoke(ctx, method, args, reply, append(opts, d.codec)...)
}
