package crdt

import (
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"
)

// Add and Update write what Replace makes of the caller's content, trusted: the document's
// memory limit (maxDocMemory, 64 MiB, which Apply and live sync hold updates to) does not bound
// it. 4 MiB of XML, a million empty elements, becomes a million structs: some 300 MiB for one
// request before checkSize refuses its 12 MB encoding.
func TestReview19AddIsHeldToTheMemoryLimit(t *testing.T) {
	h := newHarness(t)
	data := str(strings.Repeat("<a/>", 1<<20-16))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err := h.srv.AddCrdtData(k1, &crdtv1.AddCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: data, Type: "xml"})
	runtime.ReadMemStats(&m1)
	wantStatus(t, "add", err, codes.FailedPrecondition, msgStateTooBig)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 2*maxDocMemory {
		t.Fatalf("refusing an Add of %d bytes allocated %d MiB", len(data.GetStringValue()), alloc>>20)
	}
}
