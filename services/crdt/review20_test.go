package crdt

import (
	"encoding/base64"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"

	"github.com/collab/collab/internal/yjs"
)

// Review of issue 21 (4): kindHeld knows an Apply-made root's type only from its visible
// content, so a Y.Text whose text a client deleted (every Yjs editor that clears a field does
// this) "holds nothing" and takes any type: Update with type map writes map entries beside the
// text's items. The clients still hold that root as a Y.Text (getText) and never see the map,
// while Get now reads the root as a map: the very split issue 21 (4) reported, for an editor
// made by Apply instead of Add. The root's type is known to every client; the server forgot
// it when the content was collected.
func TestReview20EmptiedTextKeepsItsType(t *testing.T) {
	h := newHarness(t)
	client := yjs.NewDoc()
	apply := func(u []byte) {
		t.Helper()
		if _, err := h.srv.ApplyCrdtUpdate(k1, &crdtv1.ApplyCrdtUpdateRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Update: base64.StdEncoding.EncodeToString(u)}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := client.Replace("content", yjs.Text, "hello")
	if err != nil {
		t.Fatal(err)
	}
	apply(u)
	// While the text shows, a map is refused (the commit's own case).
	_, err = h.srv.UpdateCrdtData(k1, &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNumberValue(1)}}), Type: "map"})
	wantStatus(t, "a map over a text", err, codes.InvalidArgument, `The editor's content at contentKey "content" is of type text; update it with type text.`)

	// The client clears its text: the root is still its Y.Text.
	if u, err = client.Replace("content", yjs.Text, ""); err != nil {
		t.Fatal(err)
	}
	apply(u)
	_, err = h.srv.UpdateCrdtData(k1, &crdtv1.UpdateCrdtDataRequest{OrganizationId: "o", DocumentId: "d", EditorId: "e", Data: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNumberValue(1)}}), Type: "map"})
	if err == nil {
		t.Fatalf("a map over an emptied text was accepted; Get now reads %v where the clients' Y.Text shows \"\"", h.content(t, "e"))
	}
}
