package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestToStatus(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	cases := []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{NotFound("Workspace not found."), codes.NotFound, "Workspace not found."},
		{fmt.Errorf("wrapped: %w", InvalidArgument("x is %d.", 3)), codes.InvalidArgument, "x is 3."},
		{status.Error(codes.Unauthenticated, "from a peer"), codes.Unauthenticated, "from a peer"},
		{context.Canceled, codes.Canceled, "The request was canceled."},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "The request timed out."},
		{errors.New("mongo: connection refused to 10.0.0.1"), codes.Internal, "Internal error."},
		{Internal(errors.New("disk on fire")), codes.Internal, "Internal error."},
	}
	for _, c := range cases {
		st := status.Convert(ToStatus(ctx, log, c.err))
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%v -> %v %q, want %v %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
	}
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("causes of internal errors not logged:\n%s", logs.String())
	}
	if ToStatus(ctx, log, nil) != nil {
		t.Error("nil error mapped to a status")
	}
}

func TestDetailsTravel(t *testing.T) {
	detail, _ := structpb.NewStruct(map[string]any{"u1": map[string]any{"errorCode": "does_not_exist"}})
	err := &Error{Code: codes.NotFound, Message: "Folder or document does not exist", Details: detail}
	st := status.Convert(ToStatus(context.Background(), slog.New(slog.DiscardHandler), err))
	if len(st.Details()) != 1 {
		t.Fatalf("details %v", st.Details())
	}
	got, ok := st.Details()[0].(*structpb.Struct)
	if !ok || got.Fields["u1"].GetStructValue().Fields["errorCode"].GetStringValue() != "does_not_exist" {
		t.Fatalf("detail %v", st.Details()[0])
	}
}

func TestCauseStaysOutOfTheMessage(t *testing.T) {
	err := PermissionDenied("Invalid API key.").WithCause(errors.New("secret internals"))
	if st := status.Convert(err); st.Message() != "Invalid API key." {
		t.Fatalf("message %q", st.Message())
	}
	if !errors.Is(err, err.Unwrap()) || !strings.Contains(err.Error(), "secret internals") {
		t.Fatal("cause lost for logs")
	}
}

func TestFromPeer(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{status.Error(codes.NotFound, "Organization does not exist."), codes.NotFound, "Organization does not exist."},
		{status.Error(codes.Unavailable, "down"), codes.Unavailable, "down"},
		{status.Error(codes.Unauthenticated, "internal token"), codes.Internal, "Internal error."},
		{errors.New("plain"), codes.Internal, "Internal error."},
		{context.Canceled, codes.Canceled, "The request was canceled."},
	} {
		st := status.Convert(ToStatus(context.Background(), slog.New(slog.DiscardHandler), FromPeer("call", c.err)))
		if st.Code() != c.code || st.Message() != c.msg {
			t.Errorf("%v -> %v %q, want %v %q", c.err, st.Code(), st.Message(), c.code, c.msg)
		}
	}
}
