package apierr

import "google.golang.org/grpc/codes"

// StatusName is the API's status string for a gRPC code, as the error envelope's error.status
// carries it: NOT_FOUND, INVALID_ARGUMENT, ... (docs/api.md, "Envelope and transport");
// UNKNOWN for a code outside gRPC's. The gateway and the routes services serve themselves
// (the comments stream) write it alike.
func StatusName(c codes.Code) string {
	name, ok := statusNames[c]
	if !ok {
		return "UNKNOWN"
	}
	return name
}

var statusNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}
