package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/testkit/webhooktest"
)

// realClockSystem runs with the wall clock: receivers check webhook-timestamp against theirs.
func realClockSystem(t *testing.T, args ...string) *system {
	t.Helper()
	s := &system{t: t}
	p, err := collabd.Start(context.Background(), config(t, args...), collabd.Deps{Clock: clock.Real(), LogOutput: io.Discard})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s.proc, s.base = p, "http://"+p.HTTPAddr
	return s
}

// hook creates an endpoint to the receiver's path and tells the receiver its secret.
func hook(t *testing.T, s *system, k map[string]string, rcv *webhooktest.Receiver, path string, fields map[string]any, opts ...webhooktest.Option) string {
	t.Helper()
	fields["url"] = rcv.URL(path)
	id := s.call("/v2/workspace/advancedwebhook/endpoints/create", k, fields).data(t, "Endpoint created successfully.")["id"].(string)
	secret := s.call("/v2/workspace/advancedwebhook/endpoints/secret/get", k, map[string]any{"endpointId": id}).data(t, "")["secret"].(string)
	rcv.Configure(t, path, []string{secret}, opts...)
	return id
}

func payloadOf(t *testing.T, d webhooktest.Delivery) map[string]any {
	t.Helper()
	if !d.Verified {
		t.Fatalf("delivery not verified by standardwebhooks: %s (%s)", d.VerifyError, d.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v (%s)", d.Payload, err, d.PayloadError)
	}
	return p
}

// Events published over HTTP reach, signed, the endpoints whose filters and channels take them,
// as a real Standard Webhooks receiver verifies; failures are retried, 410 disables.
func TestWebhooksDeliverToARealReceiver(t *testing.T) {
	t.Parallel()
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	s.call("/v2/workspace/advancedwebhook/endpoints/create", k, map[string]any{"url": rcv.URL("/x")}).fails(t, 400, "FAILED_PRECONDITION", "Advanced webhooks are not enabled for this workspace.")
	cfg := s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "Advanced webhook configuration updated successfully.")
	if fmt.Sprint(cfg) != "map[enableDataProtection:false encodeData:false encryptData:false isEnabled:true publicKey:]" {
		t.Fatalf("config %v", cfg)
	}
	hook(t, s, k, rcv, "/all", map[string]any{})
	hook(t, s, k, rcv, "/comments", map[string]any{"filterTypes": []string{"comment.add"}})
	hook(t, s, k, rcv, "/general", map[string]any{"channels": []string{"general"}})
	hook(t, s, k, rcv, "/off", map[string]any{"disabled": true})
	flaky := hook(t, s, k, rcv, "/flaky", map[string]any{"filterTypes": []string{"huddle.join"}},
		webhooktest.WithResponses(webhooktest.Response{Status: 500}, webhooktest.Response{Status: 429, RetryAfter: "1"}, webhooktest.Response{Status: 204}))
	gone := hook(t, s, k, rcv, "/gone", map[string]any{"filterTypes": []string{"comment.add"}}, webhooktest.WithResponses(webhooktest.Response{Status: 410}))

	s.publish(t, k, map[string]any{"id": "c1", "type": "comment.add", "organizationId": "o", "channel": "random", "data": map[string]any{"text": "hi"}})
	s.publish(t, k, map[string]any{"id": "h1", "type": "huddle.join", "organizationId": "o", "channel": "general"})
	all := rcv.WaitFor(t, "/all", 2, 10*time.Second)
	comments := rcv.WaitFor(t, "/comments", 1, 10*time.Second)
	general := rcv.WaitFor(t, "/general", 1, 10*time.Second)
	p := payloadOf(t, comments[0])
	if p["event"] != "comment.add" || p["source"] != "comment" || p["actionType"] != "add" || p["data"].(map[string]any)["text"] != "hi" || p["webhookId"] != comments[0].ID {
		t.Fatalf("payload %v", p)
	}
	for _, d := range append(all, general...) {
		payloadOf(t, d)
	}
	if payloadOf(t, general[0])["event"] != "huddle.join" {
		t.Fatalf("general got %v", general[0].Body)
	}
	// The 500 is retried after about 5 s, the 429 after its Retry-After; the same message id.
	tries := rcv.WaitFor(t, "/flaky", 3, 20*time.Second)
	if tries[0].ID != tries[2].ID || payloadOf(t, tries[2])["event"] != "huddle.join" {
		t.Fatalf("retries %+v", tries)
	}
	attempts := s.call("/v2/workspace/advancedwebhook/attempts/get", k, map[string]any{"endpointId": flaky}).data(t, "Attempts retrieved successfully.")["attempts"].([]any)
	if len(attempts) != 3 || attempts[0].(map[string]any)["status"] != "success" || attempts[2].(map[string]any)["responseStatusCode"] != float64(500) {
		t.Fatalf("attempts %v", attempts)
	}
	// 410: disabled, nothing more.
	rcv.WaitFor(t, "/gone", 1, 10*time.Second)
	eventually(t, "the 410 endpoint disabled", func() bool {
		for _, e := range s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any) {
			if e.(map[string]any)["id"] == gone {
				return e.(map[string]any)["disabled"] == true
			}
		}
		return false
	})
	s.publish(t, k, map[string]any{"id": "c2", "type": "comment.add", "organizationId": "o"})
	rcv.WaitFor(t, "/comments", 2, 10*time.Second)
	if n := len(rcv.Received(t, "/gone")); n != 1 {
		t.Fatalf("a disabled endpoint got %d deliveries", n)
	}
	if n := len(rcv.Received(t, "/off")); n != 0 {
		t.Fatalf("a disabled endpoint got %d deliveries", n)
	}
	msgs := s.call("/v2/workspace/advancedwebhook/messages/get", k, map[string]any{"eventTypes": []string{"huddle.join"}}).data(t, "Messages retrieved successfully.")["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["eventType"] != "huddle.join" {
		t.Fatalf("messages %v", msgs)
	}
}

// Rotation (both secrets verify for a day), encodeData and encryptData (the receiver decrypts
// with its private key), the rate limit, and a test event.
func TestWebhookSecretsEncodingEncryptionAndRate(t *testing.T) {
	t.Parallel()
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	id := hook(t, s, k, rcv, "/r", map[string]any{"filterTypes": []string{"comment.add"}}, webhooktest.WithPrivateKey(key))
	old := s.call("/v2/workspace/advancedwebhook/endpoints/secret/get", k, map[string]any{"endpointId": id}).data(t, "")["secret"].(string)
	fresh := s.call("/v2/workspace/advancedwebhook/endpoints/secret/rotate", k, map[string]any{"endpointId": id}).data(t, "Endpoint secret rotated successfully.")["secret"].(string)
	if fresh == old {
		t.Fatal("rotation kept the secret")
	}
	// The receiver knows only the old secret, then only the new one: both verify.
	s.publish(t, k, map[string]any{"id": "a", "type": "comment.add", "organizationId": "o"})
	payloadOf(t, rcv.WaitFor(t, "/r", 1, 10*time.Second)[0])
	rcv.Configure(t, "/r", []string{fresh}, webhooktest.WithPrivateKey(key))
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"encodeData": true}).data(t, "")
	s.publish(t, k, map[string]any{"id": "b", "type": "comment.add", "organizationId": "o", "data": map[string]any{"n": 2}})
	got := rcv.WaitFor(t, "/r", 2, 10*time.Second)
	if p := payloadOf(t, got[1]); p["data"].(map[string]any)["n"] != float64(2) || !jsonHas(got[1].Body, "encodedPayload") {
		t.Fatalf("encoded delivery %s", got[1].Body)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"encryptData": true, "publicKey": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}).data(t, "")
	s.publish(t, k, map[string]any{"id": "c", "type": "comment.add", "organizationId": "o", "data": map[string]any{"n": 3}})
	got = rcv.WaitFor(t, "/r", 3, 10*time.Second)
	if p := payloadOf(t, got[2]); p["data"].(map[string]any)["n"] != float64(3) || !jsonHas(got[2].Body, "encryptedKey") {
		t.Fatalf("encrypted delivery %s", got[2].Body)
	}
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"encryptData": false, "encodeData": false}).data(t, "")

	// Rate limit 5/s: 15 deliveries take about 3 seconds.
	limited := hook(t, s, k, rcv, "/limited", map[string]any{"filterTypes": []string{"huddle.join"}, "rateLimit": 5})
	for i := range 15 {
		s.publish(t, k, map[string]any{"id": fmt.Sprint("h", i), "type": "huddle.join", "organizationId": "o"})
	}
	ds := rcv.WaitFor(t, "/limited", 15, 20*time.Second)
	// Counted by the second each delivery was sent in (its webhook-timestamp, the second whose
	// rate slot it took), not by arrival: under load a delivery sent at the end of one second
	// arrives in the next beside that second's own.
	perSecond := map[int64]int{}
	for _, d := range ds {
		payloadOf(t, d)
		perSecond[d.Timestamp]++
	}
	for sec, n := range perSecond {
		if n > 5 {
			t.Fatalf("%d deliveries sent in second %d, limit 5", n, sec)
		}
	}
	if len(perSecond) < 3 {
		t.Fatalf("15 deliveries at 5/s sent within %d seconds", len(perSecond))
	}
	sent := s.call("/v2/workspace/advancedwebhook/endpoints/test", k, map[string]any{"endpointId": limited, "eventType": "ping.check"}).data(t, "Test event sent successfully.")
	test := rcv.WaitFor(t, "/limited", 16, 10*time.Second)[15]
	if test.ID != sent["messageId"] || payloadOf(t, test)["event"] != "ping.check" {
		t.Fatalf("test event %+v (sent %v)", test, sent)
	}
}

func jsonHas(body, key string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

func TestWebhooksBadInput(t *testing.T) { onBothStores(t, testWebhooksBadInput) }

func testWebhooksBadInput(t *testing.T, s *system) {
	k := s.devKey()
	bad := func(path string, data map[string]any, msg string) {
		t.Helper()
		s.call(path, k, data).fails(t, 400, "INVALID_ARGUMENT", msg)
	}
	cfg := "/v2/workspace/advancedwebhookconfig/update"
	bad(cfg, map[string]any{}, "Provide at least one of isEnabled, encryptData, encodeData, publicKey, enableDataProtection.")
	bad(cfg, map[string]any{"publicKey": "not a key"}, "publicKey must be an RSA public key in PEM.")
	bad(cfg, map[string]any{"encryptData": true}, "encryptData needs publicKey: an RSA public key in PEM.")
	s.call(cfg, k, map[string]any{"isEnabled": true}).data(t, "")
	create := "/v2/workspace/advancedwebhook/endpoints/create"
	bad(create, map[string]any{}, "url must be a valid http(s) URL.")
	bad(create, map[string]any{"url": "ftp://example.com"}, "url must be a valid http(s) URL.")
	bad(create, map[string]any{"url": "https://user:pw@example.com"}, "url must not hold credentials; use the endpoint's signature to authenticate deliveries.")
	bad(create, map[string]any{"url": "https://example.com", "filterTypes": []string{}}, "filterTypes must be a non-empty array of strings when given.")
	bad(create, map[string]any{"url": "https://example.com", "filterTypes": []any{1}}, "filterTypes must be a non-empty array of strings when given.")
	bad(create, map[string]any{"url": "https://example.com", "filterTypes": []string{"Not A Type"}}, "filterTypes[0] must have the form <feature>.<action>: lowercase letters, digits and _, joined by dots (e.g. comment.add).")
	bad(create, map[string]any{"url": "https://example.com", "channels": []string{}}, "channels must be a non-empty array of strings when given.")
	bad(create, map[string]any{"url": "https://example.com", "rateLimit": 0}, "rateLimit must be a positive integer (at most 10000).")
	bad(create, map[string]any{"url": "https://example.com", "rateLimit": 1.5}, "")
	bad(create, map[string]any{"url": "https://example.com", "metadata": map[string]any{"a": 1}}, "metadata values must be strings (metadata.a is not).")
	update := "/v2/workspace/advancedwebhook/endpoints/update"
	bad(update, map[string]any{"endpointId": "ep_x"}, "At least one endpoint field besides endpointId must be provided.")
	bad(update, map[string]any{"disabled": true}, "endpointId is required.")
	s.call(update, k, map[string]any{"endpointId": "ep_x", "disabled": true}).fails(t, 404, "NOT_FOUND", "Endpoint not found.")
	bad("/v2/workspace/advancedwebhook/endpoints/get", map[string]any{"limit": 251}, "limit must be between 1 and 250.")
	bad("/v2/workspace/advancedwebhook/attempts/get", map[string]any{}, "Provide messageId or endpointId.")
	bad("/v2/workspace/advancedwebhook/attempts/get", map[string]any{"endpointId": "ep_x", "status": "lost"}, "status must be one of success, pending, failed.")
	e := s.call(create, k, map[string]any{"url": "https://example.com/hook"}).data(t, "")
	if e["description"] != nil || e["filterTypes"] != nil || e["channels"] != nil || e["rateLimit"] != nil || e["uid"] != nil || e["metadata"] != nil || e["disabled"] != false {
		t.Fatalf("unset optionals are not null: %v", e)
	}
	bad("/v2/workspace/advancedwebhook/endpoints/recover", map[string]any{"endpointId": e["id"]}, "since is required.")
	bad("/v2/workspace/advancedwebhook/endpoints/recover", map[string]any{"endpointId": e["id"], "since": "yesterday"}, "since must be an ISO-8601 time (e.g. 2026-01-02T15:04:05Z).")
	bad("/v2/workspace/webhookconfig/update", map[string]any{}, "Provide useWebhookService or webhookServiceConfig.")
	bad("/v2/workspace/webhookconfig/update", map[string]any{"webhookServiceConfig": map[string]any{"rawNotificationUrl": "nope"}}, "webhookServiceConfig.rawNotificationUrl must be a valid http(s) URL.")
	// Only the one endpoint made it.
	if got := s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any); len(got) != 1 {
		t.Fatalf("refused requests made endpoints: %v", got)
	}
	// Withheld: every operation says so.
	s.call("/v2/workspace/settings/update", s.devWorkspace(), map[string]any{"advancedWebhooks": false}).data(t, "")
	s.call("/v2/workspace/advancedwebhookconfig/get", k, map[string]any{}).fails(t, 400, "FAILED_PRECONDITION", "Advanced webhooks are not available for this workspace.")
}
