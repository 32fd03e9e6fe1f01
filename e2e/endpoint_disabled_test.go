package e2e

import (
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/webhooktest"
)

// Review of issue 21 (6): Resend to a disabled endpoint is FAILED_PRECONDITION because nothing
// would ever be sent; Recover Endpoint and Send Test Event to one made the same promise ("recovered
// 1", a messageId) and each queued delivery failed at once with "endpoint disabled". Here the
// endpoint is the one a receiver's 410 disabled: both are refused, no attempt is added, and once
// enabled again both are sent.
func TestDisabledEndpointRefusesRecoverAndTest(t *testing.T) {
	t.Parallel()
	rcv := webhooktest.Start(t)
	s := realClockSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	s.call("/v2/workspace/advancedwebhookconfig/update", k, map[string]any{"isEnabled": true}).data(t, "")
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	gone := hook(t, s, k, rcv, "/gone", map[string]any{}, webhooktest.WithResponses(webhooktest.Response{Status: 410}, webhooktest.Response{Status: 200}))
	s.publish(t, k, map[string]any{"id": "c1", "type": "comment.add", "organizationId": "o"})
	rcv.WaitFor(t, "/gone", 1, 10*time.Second)
	endpoint := func() map[string]any {
		for _, e := range s.call("/v2/workspace/advancedwebhook/endpoints/get", k, map[string]any{}).data(t, "")["endpoints"].([]any) {
			if e.(map[string]any)["id"] == gone {
				return e.(map[string]any)
			}
		}
		t.Fatalf("endpoint %s not listed", gone)
		return nil
	}
	eventually(t, "the 410 endpoint disabled", func() bool { return endpoint()["disabled"] == true })
	attempts := func() int {
		return len(s.call("/v2/workspace/advancedwebhook/attempts/get", k, map[string]any{"endpointId": gone}).data(t, "")["attempts"].([]any))
	}
	before := attempts()

	recoverIt := map[string]any{"endpointId": gone, "since": since}
	s.call("/v2/workspace/advancedwebhook/endpoints/recover", k, recoverIt).fails(t, 400, "FAILED_PRECONDITION",
		"The endpoint is disabled: enable it to recover messages to it.")
	s.call("/v2/workspace/advancedwebhook/endpoints/test", k, map[string]any{"endpointId": gone}).fails(t, 400, "FAILED_PRECONDITION",
		"The endpoint is disabled: enable it to send it a test event.")
	time.Sleep(300 * time.Millisecond) // a queued delivery would have failed by now
	if n := attempts(); n != before {
		t.Fatalf("a disabled endpoint got %d attempts more", n-before)
	}

	// Enabled again: recovered and tested, both delivered.
	s.call("/v2/workspace/advancedwebhook/endpoints/update", k, map[string]any{"endpointId": gone, "disabled": false}).data(t, "Endpoint updated successfully.")
	if n := s.call("/v2/workspace/advancedwebhook/endpoints/recover", k, recoverIt).data(t, "")["count"]; n != float64(1) {
		t.Fatalf("recovered %v", n)
	}
	s.call("/v2/workspace/advancedwebhook/endpoints/test", k, map[string]any{"endpointId": gone}).data(t, "")
	rcv.WaitFor(t, "/gone", 3, 10*time.Second)
}
