package apierr

import (
	"encoding/json"
	"net/http"

	"google.golang.org/grpc/codes"
)

// WriteHTTP answers with the API's error envelope, {"error": {"status", "message"}}, and the
// given HTTP status: for the handlers that answer HTTP themselves rather than through the
// gateway (live sync's handshake, the comments stream, the proxy to services' routes, the
// console), so that every answer of the public listener has one form
// (docs/api.md, "Envelope and transport").
func WriteHTTP(w http.ResponseWriter, httpStatus int, code codes.Code, message string) {
	body, _ := json.Marshal(map[string]map[string]string{"error": {"status": StatusName(code), "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(body)
}
