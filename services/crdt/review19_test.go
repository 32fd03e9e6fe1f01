package crdt

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/collab/collab/internal/yjs"
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
	wantStatus(t, "add", err, codes.FailedPrecondition, msgStateTooMany)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 2*maxDocMemory {
		t.Fatalf("refusing an Add of %d bytes allocated %d MiB", len(data.GetStringValue()), alloc>>20)
	}
}

// Apply's refusals by the codec's limits answer as docs/crdt.md ("Limits") says: the encoded
// size and the memory FAILED_PRECONDITION, the waiting structs FAILED_PRECONDITION, the work
// INVALID_ARGUMENT; each leaves the data as it was.
func TestReview19ApplyRefusals(t *testing.T) {
	h := newHarness(t)
	a := yjs.NewDocWithClient(5)
	first, _ := a.Replace("content", yjs.Text, strings.Repeat("a", 3<<20))
	h.apply(t, "e", first)
	apply := func(u []byte) error {
		_, err := h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString(u)})
		return err
	}
	// 2.5 MiB more: past 5 MiB encoded.
	more, _ := yjs.NewDocWithClient(6).Replace("other", yjs.Text, strings.Repeat("b", 5<<19))
	wantStatus(t, "encoded", apply(more), codes.FailedPrecondition, msgStateTooBig)
	// 10,001 structs of a client whose clock 0 never came.
	var w []byte
	w = append(w, 1, 0x91, 0x4e, 77, 1) // one client, 10,001 structs, client 77 from clock 1
	for range 10001 {
		w = append(w, 4, 1, 1, 't', 1, 'x')
	}
	w = append(w, 0)
	wantStatus(t, "waiting", apply(w), codes.FailedPrecondition, msgTooManyWait)
	// Insertions right to left after client 5's characters by a higher client: quadratic.
	const n = 5000
	var q []byte
	q = append(q, 1, 0x88, 0x27, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0) // 5,000 structs of client 1<<40
	for k := 0; k < n; k++ {
		q = append(q, 0x80|4, 5)
		q = binary.AppendUvarint(q, uint64(n-1-k))
		q = append(q, 1, 'x')
	}
	q = append(q, 0)
	wantStatus(t, "work", apply(q), codes.InvalidArgument, msgTooComplex)
	// Every second of the first 1.2 million characters deleted: 1.2 million structs.
	var m []byte
	m = append(m, 0, 1, 5)
	m = binary.AppendUvarint(m, 600_000)
	for i := uint64(1); i < 1_200_000; i += 2 {
		m = binary.AppendUvarint(m, i)
		m = append(m, 1)
	}
	wantStatus(t, "memory", apply(m), codes.FailedPrecondition, msgStateTooMany)
	if got := h.yjsState(t, "e", ""); !bytes.Equal(got, mustEncode(t, first)) {
		t.Fatal("a refused Apply changed the data")
	}
}

func mustEncode(t *testing.T, u []byte) []byte {
	t.Helper()
	d := yjs.NewDoc()
	if err := d.Apply(u); err != nil {
		t.Fatal(err)
	}
	b, err := d.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
