package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

func TestCodecContentType(t *testing.T) {
	if got := newEnvelopeCodec().ContentType(nil); got != "application/json" {
		t.Fatalf("ContentType = %q, want application/json", got)
	}
}

func TestUnmarshalFillsRequest(t *testing.T) {
	c := newEnvelopeCodec()
	tests := []struct {
		name string
		body string
		got  proto.Message
		want proto.Message
	}{
		{
			name: "create workspace",
			body: `{"data": {"ownerEmail": "owner@example.com", "name": "Ann", "workspaceName": "Acme", "avatar": "https://a/b.png"}}`,
			got:  &workspacev1.CreateWorkspaceRequest{},
			want: &workspacev1.CreateWorkspaceRequest{OwnerEmail: "owner@example.com", Name: "Ann", WorkspaceName: "Acme", Avatar: "https://a/b.png"},
		},
		{
			name: "create api key with a list and an optional bool set to false",
			body: `{"data": {"type": "production", "apiKeyName": "ci", "allowedDomains": ["a.com", "b.com"], "createAuthToken": false}}`,
			got:  &workspacev1.CreateApiKeyRequest{},
			want: &workspacev1.CreateApiKeyRequest{Type: "production", ApiKeyName: "ci", AllowedDomains: []string{"a.com", "b.com"}, CreateAuthToken: proto.Bool(false)},
		},
		{
			name: "create api key without the optional bool",
			body: `{"data": {"apiKeyName": "ci"}}`,
			got:  &workspacev1.CreateApiKeyRequest{},
			want: &workspacev1.CreateApiKeyRequest{ApiKeyName: "ci"},
		},
		{
			name: "list api keys",
			body: `{"data": {"pageSize": 25, "pageToken": "tok"}}`,
			got:  &workspacev1.ListApiKeysRequest{},
			want: &workspacev1.ListApiKeysRequest{PageSize: 25, PageToken: "tok"},
		},
		{
			name: "int32 given as a number in a string",
			body: `{"data": {"pageSize": "7"}}`,
			got:  &workspacev1.ListApiKeysRequest{},
			want: &workspacev1.ListApiKeysRequest{PageSize: 7},
		},
		{
			name: "int32 given as an integral float",
			body: `{"data": {"pageSize": 7.0}}`,
			got:  &workspacev1.ListApiKeysRequest{},
			want: &workspacev1.ListApiKeysRequest{PageSize: 7},
		},
		{
			name: "int32 range edges",
			body: `{"data": {"pageSize": -2147483648}}`,
			got:  &workspacev1.ListApiKeysRequest{},
			want: &workspacev1.ListApiKeysRequest{PageSize: -2147483648},
		},
		{
			name: "snake_case field names",
			body: `{"data": {"owner_email": "o@example.com", "workspace_name": "Acme"}}`,
			got:  &workspacev1.CreateWorkspaceRequest{},
			want: &workspacev1.CreateWorkspaceRequest{OwnerEmail: "o@example.com", WorkspaceName: "Acme"},
		},
		{
			name: "snake_case list and optional",
			body: `{"data": {"allowed_domains": ["x.io"], "create_auth_token": true, "page_size": 3}}`,
			got:  &workspacev1.CreateApiKeyRequest{},
			want: &workspacev1.CreateApiKeyRequest{AllowedDomains: []string{"x.io"}, CreateAuthToken: proto.Bool(true)},
		},
		{
			name: "unknown fields ignored, inside and beside data",
			body: `{"data": {"ownerEmail": "o@example.com", "bogus": 1, "nested": {"x": [1, "y", null]}}, "extra": true}`,
			got:  &workspacev1.CreateWorkspaceRequest{},
			want: &workspacev1.CreateWorkspaceRequest{OwnerEmail: "o@example.com"},
		},
		{
			name: "null fields leave the field unset",
			body: `{"data": {"ownerEmail": null, "name": "n", "avatar": null}}`,
			got:  &workspacev1.CreateWorkspaceRequest{},
			want: &workspacev1.CreateWorkspaceRequest{Name: "n"},
		},
		{
			name: "null list leaves the list empty",
			body: `{"data": {"allowedDomains": null}}`,
			got:  &workspacev1.UpdateAllowedDomainsRequest{},
			want: &workspacev1.UpdateAllowedDomainsRequest{},
		},
		{
			name: "empty data",
			body: `{"data": {}}`,
			got:  &workspacev1.GetWorkspaceRequest{},
			want: &workspacev1.GetWorkspaceRequest{},
		},
		{
			name: "html-sensitive characters survive the re-encoding",
			body: `{"data": {"name": "<a&b>\u00e9\"q\""}}`,
			got:  &workspacev1.CreateWorkspaceRequest{},
			want: &workspacev1.CreateWorkspaceRequest{Name: "<a&b>é\"q\""},
		},
		{
			name: "surrounding whitespace",
			body: " \n\t{\"data\": {\"token\": \"abc\"}}\n\n ",
			got:  &workspacev1.VerifyOwnerEmailRequest{},
			want: &workspacev1.VerifyOwnerEmailRequest{Token: "abc"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Unmarshal([]byte(tt.body), tt.got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.body, err)
			}
			if !proto.Equal(tt.got, tt.want) {
				t.Fatalf("Unmarshal(%s) = %v, want %v", tt.body, tt.got, tt.want)
			}
		})
	}
}

func TestUnmarshalOptionalPresence(t *testing.T) {
	c := newEnvelopeCodec()
	var set workspacev1.UpdateWorkspaceSettingsRequest
	if err := c.Unmarshal([]byte(`{"data": {"notifications": false}}`), &set); err != nil {
		t.Fatal(err)
	}
	if set.Notifications == nil || *set.Notifications {
		t.Fatalf("notifications = %v, want present and false", set.Notifications)
	}
	if set.AdvancedQueries != nil || set.AdvancedWebhooks != nil {
		t.Fatalf("unsent optional fields are present: %v", &set)
	}
}

func TestUnmarshalEmptyBody(t *testing.T) {
	c := newEnvelopeCodec()
	for _, body := range []string{"", " ", "\n\t \r\n"} {
		m := &workspacev1.CreateWorkspaceRequest{}
		if err := c.Unmarshal([]byte(body), m); err != nil {
			t.Errorf("Unmarshal(%q): %v", body, err)
		}
		if !proto.Equal(m, &workspacev1.CreateWorkspaceRequest{}) {
			t.Errorf("Unmarshal(%q) filled the message: %v", body, m)
		}
	}
	if err := c.Unmarshal(nil, &workspacev1.GetWorkspaceRequest{}); err != nil {
		t.Errorf("Unmarshal(nil): %v", err)
	}
}

func TestUnmarshalRefusals(t *testing.T) {
	c := newEnvelopeCodec()
	const (
		notJSON  = "Request body is not valid JSON."
		twoVals  = "Request body is not valid JSON: it holds more than one value."
		notObj   = `Request body must be a JSON object: {"data": {...}}.`
		noData   = `Request body must have a "data" object: {"data": {...}}.`
		dataObj  = "data must be an object."
		badForm  = "data holds a value of the wrong form for this operation."
		create   = "create"
		apikey   = "apikey"
		list     = "list"
		settings = "settings"
	)
	target := func(kind string) proto.Message {
		switch kind {
		case create:
			return &workspacev1.CreateWorkspaceRequest{}
		case apikey:
			return &workspacev1.CreateApiKeyRequest{}
		case list:
			return &workspacev1.ListApiKeysRequest{}
		case settings:
			return &workspacev1.UpdateWorkspaceSettingsRequest{}
		}
		panic(kind)
	}
	tests := []struct {
		name   string
		target string
		body   string
		want   string
	}{
		{"invalid JSON", create, `{"data": {`, notJSON},
		{"not JSON at all", create, `data=1`, notJSON},
		{"truncated string", create, `{"data": {"name": "x}}`, notJSON},
		{"trailing comma", create, `{"data": {"name": "x",}}`, notJSON},
		{"two JSON values", create, `{"data": {}} {"data": {}}`, twoVals},
		{"a value then garbage", create, `{"data": {}} x`, notJSON},
		{"a value then a stray brace", create, `{"data":{"name":"x"}}}`, notJSON},
		{"a value then stray brackets", create, `{"data":{}}]]`, notJSON},
		{"two numbers", create, `1 2`, twoVals},
		{"top-level array", create, `[{"data": {}}]`, notObj},
		{"top-level string", create, `"data"`, notObj},
		{"top-level number", create, `42`, notObj},
		{"top-level null", create, `null`, notObj},
		{"missing data", create, `{"ownerEmail": "a@b.c"}`, noData},
		{"empty object", create, `{}`, noData},
		{"data with other case", create, `{"Data": {}}`, noData},
		{"data null", create, `{"data": null}`, dataObj},
		{"data a string", create, `{"data": "x"}`, dataObj},
		{"data an array", create, `{"data": []}`, dataObj},
		{"data a number", create, `{"data": 3}`, dataObj},
		{"data a boolean", create, `{"data": true}`, dataObj},
		{"string given a number", create, `{"data": {"ownerEmail": 5}}`, "data.ownerEmail must be a string."},
		{"string given an object", create, `{"data": {"name": {}}}`, "data.name must be a string."},
		{"string given a boolean (snake_case path)", create, `{"data": {"workspace_name": false}}`, "data.workspace_name must be a string."},
		{"repeated given a string", apikey, `{"data": {"allowedDomains": "a.com"}}`, "data.allowedDomains must be an array of strings."},
		{"repeated element of the wrong type", apikey, `{"data": {"allowedDomains": ["a.com", 2]}}`, "data.allowedDomains[1] must be a string."},
		{"repeated element null", apikey, `{"data": {"allowedDomains": [null]}}`, "data.allowedDomains[0] must not be null."},
		{"bool given yes", apikey, `{"data": {"createAuthToken": "yes"}}`, "data.createAuthToken must be a boolean."},
		{"bool given 1", settings, `{"data": {"notifications": 1}}`, "data.notifications must be a boolean."},
		{"bool given true in a string", settings, `{"data": {"advancedQueries": "true"}}`, "data.advancedQueries must be a boolean."},
		{"int32 given 1.5", list, `{"data": {"pageSize": 1.5}}`, "data.pageSize must be an integer."},
		{"int32 given 99999999999", list, `{"data": {"pageSize": 99999999999}}`, "data.pageSize is out of range."},
		{"int32 just above the range", list, `{"data": {"pageSize": 2147483648}}`, "data.pageSize is out of range."},
		{"int32 just below the range", list, `{"data": {"pageSize": -2147483649}}`, "data.pageSize is out of range."},
		{"int32 given a word", list, `{"data": {"pageSize": "seven"}}`, "data.pageSize must be an integer."},
		{"int32 given 1.5 in a string", list, `{"data": {"pageSize": "1.5"}}`, "data.pageSize must be an integer."},
		{"int32 given a boolean", list, `{"data": {"pageSize": true}}`, "data.pageSize must be an integer."},
		{"int32 given an array", list, `{"data": {"page_size": [1]}}`, "data.page_size must be an integer."},
		// checkJSON lets these through; protojson refuses them for its own reasons.
		{"duplicate field under both names", create, `{"data": {"ownerEmail": "a", "owner_email": "b"}}`, badForm},
		{"int32 in a string with spaces", list, `{"data": {"pageSize": " 7 "}}`, badForm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := target(tt.target)
			err := c.Unmarshal([]byte(tt.body), m)
			if err == nil {
				t.Fatalf("Unmarshal(%s) succeeded with %v, want error %q", tt.body, m, tt.want)
			}
			if err.Error() != tt.want {
				t.Fatalf("Unmarshal(%s) error = %q, want %q", tt.body, err.Error(), tt.want)
			}
		})
	}
}

func TestUnmarshalNotAProtoMessage(t *testing.T) {
	var m map[string]any
	err := newEnvelopeCodec().Unmarshal([]byte(`{"data": {}}`), &m)
	if err == nil || err.Error() != "request target is not a protobuf message" {
		t.Fatalf("Unmarshal into a map: err = %v", err)
	}
}

// decodeResult marshals m with the codec and returns the object under "result".
func decodeResult(t *testing.T, m any) map[string]any {
	t.Helper()
	b, err := newEnvelopeCodec().Marshal(m)
	if err != nil {
		t.Fatalf("Marshal(%v): %v", m, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("Marshal output %s is not a JSON object: %v", b, err)
	}
	if len(top) != 1 || top["result"] == nil {
		t.Fatalf("Marshal output %s: want exactly one key, result", b)
	}
	var res map[string]any
	if err := json.Unmarshal(top["result"], &res); err != nil {
		t.Fatalf("result in %s is not an object: %v", b, err)
	}
	return res
}

func TestMarshalWrapsInResult(t *testing.T) {
	res := decodeResult(t, &workspacev1.CreateWorkspaceResponse{
		Status: "success",
		Data: &workspacev1.Workspace{
			Id:         "ws1",
			Owner:      &workspacev1.Owner{Email: "o@example.com"},
			ApiKeyList: map[string]*workspacev1.ApiKeyInfo{"k1": {ApiKeyName: "n", Id: "k1", Type: "testing"}},
		},
	})
	if res["status"] != "success" {
		t.Errorf("result.status = %v", res["status"])
	}
	data, _ := res["data"].(map[string]any)
	if data["id"] != "ws1" {
		t.Errorf("result.data.id = %v", data["id"])
	}
	keys, _ := data["apiKeyList"].(map[string]any)
	k1, _ := keys["k1"].(map[string]any)
	if k1["apiKeyName"] != "n" || k1["type"] != "testing" {
		t.Errorf("result.data.apiKeyList = %v", data["apiKeyList"])
	}
	// Unpopulated plain fields appear, with lowerCamelCase names.
	if v, ok := data["emailVerified"]; !ok || v != false {
		t.Errorf("result.data.emailVerified = %v (present %v), want false", v, ok)
	}
	if v, ok := data["authToken"]; !ok || v != "" {
		t.Errorf("result.data.authToken = %v (present %v), want \"\"", v, ok)
	}
	if v, ok := res["message"]; !ok || v != "" {
		t.Errorf("result.message = %v (present %v), want \"\"", v, ok)
	}
	if v, ok := data["settings"]; !ok || v != nil {
		t.Errorf("result.data.settings = %v (present %v), want null", v, ok)
	}
	if _, ok := data["email_verified"]; ok {
		t.Errorf("result.data has the proto name email_verified: %v", data)
	}
}

func TestMarshalEmitsUnpopulated(t *testing.T) {
	res := decodeResult(t, &workspacev1.GetDomainsResponse{Data: &workspacev1.AllowedDomains{}})
	data, _ := res["data"].(map[string]any)
	if v, ok := data["allowedDomains"].([]any); !ok || len(v) != 0 {
		t.Errorf("result.data.allowedDomains = %#v, want []", data["allowedDomains"])
	}

	res = decodeResult(t, &workspacev1.GetEmailVerificationStatusResponse{Data: &workspacev1.EmailVerificationStatus{}})
	data, _ = res["data"].(map[string]any)
	if v, ok := data["verified"]; !ok || v != false {
		t.Errorf("result.data.verified = %v (present %v), want false", v, ok)
	}

	res = decodeResult(t, &workspacev1.ListApiKeysResponse{})
	if v, ok := res["data"].([]any); !ok || len(v) != 0 {
		t.Errorf("result.data = %#v, want []", res["data"])
	}

	res = decodeResult(t, &workspacev1.GetWorkspaceResponse{Data: &workspacev1.Workspace{}})
	data, _ = res["data"].(map[string]any)
	if v, ok := data["apiKeyList"].(map[string]any); !ok || len(v) != 0 {
		t.Errorf("result.data.apiKeyList = %#v, want {}", data["apiKeyList"])
	}
}

func TestMarshalOptionalFields(t *testing.T) {
	res := decodeResult(t, &workspacev1.ListApiKeysResponse{Status: "success"})
	if _, ok := res["nextPageToken"]; ok {
		t.Errorf("unset nextPageToken is present: %v", res)
	}
	res = decodeResult(t, &workspacev1.ListApiKeysResponse{NextPageToken: proto.String("p2")})
	if res["nextPageToken"] != "p2" {
		t.Errorf("result.nextPageToken = %v, want p2", res["nextPageToken"])
	}
	// Set to the zero value: still shown, since presence is tracked.
	res = decodeResult(t, &workspacev1.ListApiKeysResponse{NextPageToken: proto.String("")})
	if v, ok := res["nextPageToken"]; !ok || v != "" {
		t.Errorf("result.nextPageToken = %v (present %v), want \"\"", v, ok)
	}

	res = decodeResult(t, &workspacev1.CreateApiKeyResponse{Data: &workspacev1.CreatedApiKey{ApiKey: "k"}})
	data, _ := res["data"].(map[string]any)
	if data["apiKey"] != "k" {
		t.Errorf("result.data.apiKey = %v", data["apiKey"])
	}
	if _, ok := data["authToken"]; ok {
		t.Errorf("unset authToken is present: %v", data)
	}
	res = decodeResult(t, &workspacev1.CreateApiKeyResponse{Data: &workspacev1.CreatedApiKey{ApiKey: "k", AuthToken: proto.String("t")}})
	data, _ = res["data"].(map[string]any)
	if data["authToken"] != "t" {
		t.Errorf("result.data.authToken = %v, want t", data["authToken"])
	}
}

func TestMarshalExactBytes(t *testing.T) {
	b, err := newEnvelopeCodec().Marshal(&workspacev1.EmailVerificationStatus{Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{"result": map[string]any{"verified": true}}
	if gb, _ := json.Marshal(got); string(gb) != mustJSON(t, want) {
		t.Fatalf("Marshal = %s, want %s", gb, mustJSON(t, want))
	}
}

func TestMarshalNonProto(t *testing.T) {
	b, err := newEnvelopeCodec().Marshal(map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"result":{"n":1}}` {
		t.Fatalf("Marshal(map) = %s", b)
	}
	if _, err := newEnvelopeCodec().Marshal(make(chan int)); err == nil {
		t.Fatal("Marshal(chan) succeeded")
	}
}

func TestNewEncoder(t *testing.T) {
	var buf bytes.Buffer
	c := newEnvelopeCodec()
	if err := c.NewEncoder(&buf).Encode(&workspacev1.CreatedApiKey{ApiKey: "k"}); err != nil {
		t.Fatal(err)
	}
	want, _ := c.Marshal(&workspacev1.CreatedApiKey{ApiKey: "k"})
	if buf.String() != string(want) {
		t.Fatalf("encoder wrote %s, want %s", buf.String(), want)
	}
	if !strings.HasPrefix(buf.String(), `{"result":`) {
		t.Fatalf("encoder wrote %s", buf.String())
	}
}

func TestNewDecoder(t *testing.T) {
	c := newEnvelopeCodec()

	t.Run("body", func(t *testing.T) {
		var m workspacev1.CreateWorkspaceRequest
		if err := c.NewDecoder(strings.NewReader(`{"data": {"name": "n"}}`)).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if m.GetName() != "n" {
			t.Fatalf("name = %q", m.GetName())
		}
	})

	t.Run("empty body is EOF", func(t *testing.T) {
		for _, body := range []string{"", "  \n "} {
			err := c.NewDecoder(strings.NewReader(body)).Decode(&workspacev1.GetWorkspaceRequest{})
			if !errors.Is(err, io.EOF) {
				t.Errorf("Decode(%q) = %v, want io.EOF", body, err)
			}
		}
	})

	t.Run("refusal passes through", func(t *testing.T) {
		err := c.NewDecoder(strings.NewReader(`{"data": []}`)).Decode(&workspacev1.GetWorkspaceRequest{})
		if err == nil || err.Error() != "data must be an object." {
			t.Fatalf("Decode = %v", err)
		}
	})

	padded := func(n int) string {
		const prefix = `{"data": {"name": "n"}}`
		return prefix + strings.Repeat(" ", n-len(prefix))
	}

	t.Run("body at the limit", func(t *testing.T) {
		body := padded(MaxBodyBytes)
		r := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), MaxBodyBytes)
		var m workspacev1.CreateWorkspaceRequest
		if err := c.NewDecoder(r).Decode(&m); err != nil {
			t.Fatalf("Decode of a %d-byte body: %v", len(body), err)
		}
		if m.GetName() != "n" {
			t.Fatalf("name = %q", m.GetName())
		}
	})

	t.Run("body over the limit", func(t *testing.T) {
		body := padded(MaxBodyBytes + 1)
		r := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), MaxBodyBytes)
		err := c.NewDecoder(r).Decode(&workspacev1.CreateWorkspaceRequest{})
		if err == nil || err.Error() != "Request body is larger than 4 MiB." {
			t.Fatalf("Decode of a %d-byte body = %v, want the size message", len(body), err)
		}
	})

	t.Run("read error", func(t *testing.T) {
		r := iotest.ErrReader(errors.New("connection reset"))
		err := c.NewDecoder(r).Decode(&workspacev1.CreateWorkspaceRequest{})
		if err == nil || err.Error() != "Request body could not be read." {
			t.Fatalf("Decode = %v", err)
		}
	})
}

func TestMaxBodyBytes(t *testing.T) {
	if MaxBodyBytes != 4*1024*1024 {
		t.Fatalf("MaxBodyBytes = %d, want 4 MiB", MaxBodyBytes)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
