package webhooks

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
)

// referencePayload is the payload as encoding/json makes it from maps, as buildPayload made it
// before it wrote the JSON itself: the bytes buildPayload must still write.
func referencePayload(d *eventsv1.Event, webhookID string, protect bool) ([]byte, error) {
	data := d.GetData().AsMap()
	ctxFields := map[string]any{
		"organizationId": d.GetOrganizationId(), "documentId": d.GetDocumentId(), "targetEntityId": d.GetTargetEntityId(),
		"channel": d.GetChannel(), "eventId": d.GetId(), "timestamp": d.GetTimestamp(),
		"actionUser": map[string]any{"userId": d.GetActionUser().GetUserId(), "name": d.GetActionUser().GetName(), "email": d.GetActionUser().GetEmail()},
	}
	for k, v := range ctxFields {
		if _, set := data[k]; !set {
			data[k] = v
		}
	}
	if protect {
		data = referenceProtect(data).(map[string]any)
	}
	feature, action, _ := strings.Cut(d.GetType(), ".")
	return json.Marshal(map[string]any{"event": d.GetType(), "actionType": action, "source": feature, "data": data, "webhookId": webhookID, "platform": "collab"})
}

func referenceProtect(v any) any {
	switch x := v.(type) {
	case map[string]any:
		_, isUser := x["userId"]
		out := make(map[string]any, len(x))
		for k, val := range x {
			if k == "email" || (isUser && k == "name") {
				continue
			}
			out[k] = referenceProtect(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = referenceProtect(val)
		}
		return out
	}
	return v
}

// samePayload checks buildPayload against the reference for an event, with and without data
// protection.
func samePayload(t *testing.T, d *eventsv1.Event) {
	t.Helper()
	for _, protect := range []bool{false, true} {
		want, wantErr := referencePayload(d, "msg_1", protect)
		got, err := buildPayload(d, "msg_1", protect)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("protect %v:\n got %s (%v)\nwant %s (%v)", protect, got, err, want, wantErr)
		}
	}
}

func eventWith(t testing.TB, dataJSON string) *eventsv1.Event {
	d := &eventsv1.Event{Id: "e1", Type: "comment.add", OrganizationId: "o<1>", DocumentId: "d&1", TargetEntityId: "t\u2028", Channel: "c",
		Timestamp: 1731705121123, ActionUser: &eventsv1.ActionUser{UserId: "u1", Name: "Ann \"A\"", Email: "ann@example.com"}}
	if dataJSON != "" {
		d.Data = &structpb.Struct{}
		if err := d.Data.UnmarshalJSON([]byte(dataJSON)); err != nil {
			t.Fatalf("data %s: %v", dataJSON, err)
		}
	}
	return d
}

func TestPayloadIsWhatJSONMarshalWrites(t *testing.T) {
	for _, data := range []string{
		``, `{}`,
		`{"text":"a comment of ordinary length","n":1,"f":0.1,"big":1e21,"small":1e-7,"neg":-0,"t":true,"nil":null}`,
		`{"userId":"u9","name":"N","email":"e@x","nested":{"userId":"u2","name":"M","email":"f@x","keep":"k"},"list":[{"email":"x"},{"name":"kept"},1,"s",null,[]]}`,
		`{"actionUser":"overridden","timestamp":"now","channel":null,"organizationId":{"a":1}}`,
		`{"esc":"\u0000\u0001\b\f\n\r\t\\\"<>&\u007f\u2029é😀","k<>":"v"}`,
		`{"e":[1e20,123456789012345680000,1e-6,0.000001234,5e-324,1.7976931348623157e308,-1e-7]}`,
		`{"":"empty key","deep":{"a":{"b":{"c":[[[{"email":"gone"}]]]}}}}`,
	} {
		samePayload(t, eventWith(t, data))
	}
	// Invalid UTF-8 (a gRPC caller can send it in a string) and numbers JSON cannot hold.
	d := eventWith(t, `{}`)
	d.Data.Fields["bad"] = structpb.NewStringValue("a\xffb\xc0")
	d.Data.Fields["\xfekey"] = structpb.NewStringValue("v")
	samePayload(t, d)
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		d := eventWith(t, `{}`)
		d.Data.Fields["x"] = structpb.NewNumberValue(f)
		samePayload(t, d)
		d = eventWith(t, `{}`)
		d.Timestamp = f
		samePayload(t, d)
	}
	// A value of no kind reads as null.
	d = eventWith(t, `{}`)
	d.Data.Fields["none"] = &structpb.Value{}
	samePayload(t, d)
}

// FuzzPayload holds buildPayload to encoding/json's bytes for any data a caller can publish.
func FuzzPayload(f *testing.F) {
	f.Add(`{"text":"hello","n":1.5,"u":{"userId":"x","name":"y","email":"z"}}`, "comment.add", 1731705121123.0)
	f.Add(`{"a":[1,"<&>",null,true,{"email":"e"}],"timestamp":"x"}`, "x", math.Copysign(0, -1))
	f.Add(`{"s":"\u2028\u0007\ud83d\ude00"}`, "no-dot", 1e-9)
	f.Fuzz(func(t *testing.T, data, typ string, ts float64) {
		d := eventWith(t, "")
		d.Data = &structpb.Struct{}
		if err := d.Data.UnmarshalJSON([]byte(data)); err != nil {
			return
		}
		d.Type, d.Timestamp = typ, ts
		samePayload(t, d)
	})
}
