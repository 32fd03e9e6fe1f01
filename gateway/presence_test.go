package gateway_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/collab/collab/gateway/jsoncodec"
	"github.com/collab/collab/internal/protoset"
	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"
)

// The API's presence options (collab.options.v1 required and json_nulls, read by the codec) are
// where docs/api.md ("Presence") says, and well formed: a json_nulls field is a repeated
// string, one per message.
func TestPresenceOptionsOfTheAPI(t *testing.T) {
	var required, nulls []string
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := 0; i < ms.Len(); i++ {
			md := ms.Get(i)
			perMessage := 0
			for j := 0; j < md.Fields().Len(); j++ {
				f := md.Fields().Get(j)
				if v, _ := proto.GetExtension(f.Options(), optionsv1.E_Required).(bool); v {
					required = append(required, string(f.FullName()))
				}
				if v, _ := proto.GetExtension(f.Options(), optionsv1.E_JsonNulls).(bool); v {
					nulls = append(nulls, string(f.FullName()))
					if perMessage++; !f.IsList() || f.Kind() != protoreflect.StringKind || perMessage > 1 {
						t.Errorf("%s: json_nulls must be on one repeated string field of its message", f.FullName())
					}
				}
			}
			walk(md.Messages())
		}
	}
	for _, fd := range protoset.Files() {
		walk(fd.Messages())
	}
	if fmt.Sprint(required) != "[collab.notifications.v1.AddNotificationsRequest.notify_users]" ||
		fmt.Sprint(nulls) != "[collab.comments.v1.AnnotationUpdate.null_fields collab.comments.v1.CommentChanges.null_fields collab.webhooks.v1.UpdateEndpointRequest.clear_fields]" {
		t.Fatalf("required on %v, json_nulls on %v: docs/api.md (\"Presence\") lists them", required, nulls)
	}
}

// The API's two rules through the codec: Add Notifications needs notifyUsers ([] will do);
// Update Endpoint's nulls reach clear_fields.
func TestPresenceOfAPIRequests(t *testing.T) {
	add := &notificationsv1.AddNotificationsRequest{}
	if err := jsoncodec.Unmarshal([]byte(`{"data": {"organizationId": "o"}}`), add); err == nil || err.Error() != "notifyUsers is required." {
		t.Fatalf("Add Notifications without notifyUsers: %v", err)
	}
	if err := jsoncodec.Unmarshal([]byte(`{"data": {"organizationId": "o", "notifyUsers": []}}`), add); err != nil || add.GetOrganizationId() != "o" {
		t.Fatalf("Add Notifications with notifyUsers []: %v %v", add, err)
	}
	up := &webhooksv1.UpdateEndpointRequest{}
	body := `{"data": {"endpointId": "ep", "filterTypes": null, "rate_limit": null, "description": "d", "clearFields": null}}`
	if err := jsoncodec.Unmarshal([]byte(body), up); err != nil ||
		fmt.Sprint(up.GetClearFields()) != "[filter_types rate_limit]" || up.GetDescription() != "d" {
		t.Fatalf("Update Endpoint with nulls: %v %v", up, err)
	}
}
