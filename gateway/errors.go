package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/grpcserver"
)

type errorBody struct {
	Status  string          `json:"status"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

// writeError writes {"error": {...}} with the given HTTP status.
func writeError(w http.ResponseWriter, httpStatus int, code codes.Code, message string, details json.RawMessage) {
	body, _ := json.Marshal(map[string]errorBody{"error": {Status: apierr.StatusName(code), Message: message, Details: details}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(body)
}

// errorHandler is grpc-gateway's error handler: a gRPC status becomes the error envelope with
// the HTTP status grpc-gateway maps for its code. A status detail becomes error.details.
func errorHandler(log *slog.Logger) runtime.ErrorHandlerFunc {
	detailJSON := protojson.MarshalOptions{EmitUnpopulated: true}
	return func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
		st := status.Convert(err)
		code, msg := st.Code(), st.Message()
		if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok && x.body.busy {
			// readBody's refusal, which grpc-gateway reports as a bad body: the server is busy.
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, codes.Unavailable, busyMessage, nil)
			return
		}
		switch {
		case strings.HasPrefix(msg, "grpc: "):
			// The gRPC library's own words (an answer over the message limit, a transport
			// failure): logged, never shown.
			log.ErrorContext(r.Context(), "transport error", "path", r.URL.Path, "error", err)
			if code == codes.ResourceExhausted {
				code, msg = codes.FailedPrecondition, fmt.Sprintf("The answer is larger than %d MiB; ask for fewer items at once.", grpcserver.MaxMessageBytes>>20)
			} else {
				code, msg = codes.Internal, "Internal error."
			}
		case code == codes.Unavailable:
			// The gRPC client's text says why a peer is unreachable; the caller learns only that.
			log.ErrorContext(r.Context(), "service unavailable", "path", r.URL.Path, "error", err)
			msg = "The service is unavailable. Try again later."
		case code == codes.Unknown:
			log.ErrorContext(r.Context(), "unknown error from service", "path", r.URL.Path, "error", err)
			code, msg = codes.Internal, "Internal error."
		}
		var details json.RawMessage
		for _, d := range st.Details() {
			if m, ok := d.(proto.Message); ok {
				if b, err := detailJSON.Marshal(m); err == nil {
					details = b
					break
				}
			}
		}
		writeError(w, runtime.HTTPStatusFromCode(code), code, msg, details)
	}
}

// routingErrorHandler answers requests no route matches: an unknown path is NOT_FOUND (404),
// a known path with another method 405 with the methods it takes.
func (g *Gateway) routingErrorHandler(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		allow, msg := http.MethodPost, fmt.Sprintf("Method %s is not allowed: every operation of this API is a POST.", r.Method)
		if g.getRoutes[r.URL.Path] {
			allow, msg = "GET, POST", fmt.Sprintf("Method %s is not allowed here: use GET or POST.", r.Method)
		}
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, codes.Unimplemented, msg, nil)
	case http.StatusBadRequest:
		writeError(w, http.StatusBadRequest, codes.InvalidArgument, "Bad request.", nil)
	default:
		writeError(w, http.StatusNotFound, codes.NotFound, fmt.Sprintf("No operation at %s %s.", r.Method, r.URL.Path), nil)
	}
}
