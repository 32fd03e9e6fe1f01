package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Label values come from fixed sets whatever callers send: unknown methods are OTHER, status
// codes their class.
func TestHTTPLabelsStayBounded(t *testing.T) {
	r := New()
	h := r.HTTP()
	h.Observe("/v2/documents/get", http.MethodPost, 200, time.Millisecond)
	h.Observe("/v2/documents/get", "BREW", 418, time.Millisecond)
	h.Observe("other", "X-"+strings.Repeat("a", 100), 999, time.Millisecond)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`collab_http_requests_total{code="2xx",method="POST",route="/v2/documents/get"} 1`,
		`collab_http_requests_total{code="4xx",method="OTHER",route="/v2/documents/get"} 1`,
		`collab_http_requests_total{code="other",method="OTHER",route="other"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	if strings.Contains(body, "BREW") || strings.Contains(body, "aaaa") {
		t.Error("a caller's method became a label value")
	}
}

// A nil HTTP (metrics off) records nothing and does not fail.
func TestNilHTTP(t *testing.T) {
	var h *HTTP
	h.Observe("other", http.MethodGet, 200, time.Second)
}
