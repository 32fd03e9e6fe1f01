package apierr

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestWriteHTTP: the envelope with the status's name, the message as given (quotes and angle
// brackets escaped as JSON, never HTML), the HTTP status, a JSON type that browsers do not sniff.
func TestWriteHTTP(t *testing.T) {
	w := httptest.NewRecorder()
	WriteHTTP(w, http.StatusNotFound, codes.NotFound, `No "such" <page>.`)
	var env map[string]map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusNotFound || env["error"]["status"] != "NOT_FOUND" || env["error"]["message"] != `No "such" <page>.` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("Content-Type") != "application/json" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers %v", w.Header())
	}
}
