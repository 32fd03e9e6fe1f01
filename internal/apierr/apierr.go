// Package apierr holds the domain error type that every service returns: a gRPC code and the
// message the caller sees, mapped to a gRPC status in one place.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Error is an error the caller is meant to see: its message is shown as is.
type Error struct {
	Code    codes.Code
	Message string
	// Details, when set, is sent as the status detail and shown as error.details by the gateway.
	Details proto.Message
	cause   error
}

func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets grpc and status.FromError see the code and message.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Code, e.Message)
	if e.Details != nil {
		if withDetails, err := st.WithDetails(protoadapt.MessageV1Of(e.Details)); err == nil {
			return withDetails
		}
	}
	return st
}

// WithCause keeps the underlying error for logs without changing what the caller sees.
func (e *Error) WithCause(err error) *Error {
	c := *e
	c.cause = err
	return &c
}

// New returns an Error with the given code and message.
func New(code codes.Code, message string) *Error { return &Error{Code: code, Message: message} }

// Newf is New with a formatted message.
func Newf(code codes.Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func InvalidArgument(format string, args ...any) *Error {
	return Newf(codes.InvalidArgument, format, args...)
}
func NotFound(format string, args ...any) *Error { return Newf(codes.NotFound, format, args...) }
func AlreadyExists(format string, args ...any) *Error {
	return Newf(codes.AlreadyExists, format, args...)
}
func FailedPrecondition(format string, args ...any) *Error {
	return Newf(codes.FailedPrecondition, format, args...)
}
func PermissionDenied(format string, args ...any) *Error {
	return Newf(codes.PermissionDenied, format, args...)
}
func Unauthenticated(format string, args ...any) *Error {
	return Newf(codes.Unauthenticated, format, args...)
}
func ResourceExhausted(format string, args ...any) *Error {
	return Newf(codes.ResourceExhausted, format, args...)
}

// RateLimited is the spec's answer to an operation called too often.
func RateLimited() *Error {
	return ResourceExhausted("Rate limit exceeded. Try again after 1 minute.")
}

// internalMessage is all a caller learns of an unexpected failure; the cause goes to the log.
const internalMessage = "Internal error."

// Internal answers INTERNAL with the generic message and keeps cause for the log.
func Internal(cause error) *Error {
	return (&Error{Code: codes.Internal, Message: internalMessage}).WithCause(cause)
}

// ToStatus maps any error a handler returns to the status sent to the caller. Domain errors
// and statuses from peers keep their code and message; context errors keep their meaning;
// everything else is logged and answered as INTERNAL with a generic message.
func ToStatus(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var domain *Error
	if errors.As(err, &domain) {
		if domain.cause != nil {
			log.WarnContext(ctx, "request failed", "code", domain.Code.String(), "error", err)
		}
		return domain.GRPCStatus().Err()
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "The request was canceled.")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "The request timed out.")
	}
	log.ErrorContext(ctx, "internal error", "error", err)
	return status.Error(codes.Internal, internalMessage)
}

// FromPeer is what a caller sees of a failed call to another service: answers it should see
// as they are (what does not exist, what it sent wrong, the service being away, busy or slow,
// the call being given up) pass through; any other failure is ours, so it becomes INTERNAL with
// op and the cause kept for the log.
func FromPeer(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted,
			codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return err
		}
	}
	return Internal(fmt.Errorf("%s: %w", op, err))
}
