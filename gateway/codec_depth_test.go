package gateway_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/collab/collab/gateway"
)

const tooDeep = "Request body is nested too deeply: at most 64 levels."

// A body of 4 MiB of "[" on a public route is refused with INVALID_ARGUMENT, at a memory cost
// in proportion to its size: the gateway used to grow by hundreds of MB (stack) for it.
func TestDeepBodyRefusedCheaply(t *testing.T) {
	e := newTestEnv(t)
	prefix := `{"data":{"x":`
	body := prefix + strings.Repeat("[", gateway.MaxBodyBytes-len(prefix))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := e.post("/v2/workspace/email/status", body)
	runtime.ReadMemStats(&after)
	// Reading the body into memory takes a few times its size as the buffer grows (about 2.5
	// times, twice that under the race detector); nothing else should. The old decoder grew the
	// process by over 500 MB here.
	allocated, grown := after.TotalAlloc-before.TotalAlloc, int64(after.Sys)-int64(before.Sys)
	if limit := 8 * uint64(len(body)); allocated > limit || grown > int64(limit) {
		t.Errorf("a %d-byte body allocated %d bytes and grew the process by %d", len(body), allocated, grown)
	}
	env := errorOf(t, rec, http.StatusBadRequest, "INVALID_ARGUMENT")
	if env.Message != tooDeep {
		t.Fatalf("error.message %q, want %q", env.Message, tooDeep)
	}
}

// 64 levels reach the service; 65 do not.
func TestDepthLimitThroughGateway(t *testing.T) {
	e := newTestEnv(t)
	nested := func(levels int) string {
		// data's object is level 1; x's arrays take the rest.
		return `{"data":{"ownerEmail":"o@example.com","x":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}}`
	}
	resultOf(t, e.post("/v2/workspace/create", nested(64)))
	env := errorOf(t, e.post("/v2/workspace/create", nested(65)), http.StatusBadRequest, "INVALID_ARGUMENT")
	if env.Message != tooDeep {
		t.Fatalf("error.message %q, want %q", env.Message, tooDeep)
	}
	if n := e.ws.count("CreateWorkspace"); n != 1 {
		t.Fatalf("service called %d times, want once", n)
	}
}
