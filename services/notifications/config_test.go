package notifications

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
)

// Issue 21 (3): a config belongs to a member of the organization. Set answers success: false
// for anyone else and keeps nothing for them; Get of anyone else is NOT_FOUND. Membership is one
// MembersAmong call per request, and ListMembers of the users named from a users service of the
// release before (a rolling upgrade); a second call after the write confirms it.
func TestConfigBelongsToMembers(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older users service %v", older), func(t *testing.T) {
			h := newHarness(t, 3) // members m00000..m00002
			h.users.noCount = older
			set := &notificationsv1.SetNotificationConfigRequest{OrganizationId: "o", DocumentIds: []string{"d", "e"},
				UserIds: []string{"m00001", "stranger", "m00002", "m00009"}, Config: &notificationsv1.SetConfigValues{Inbox: None, Email: None, Slack: None}}
			resp, err := h.srv.SetNotificationConfig(k1, set)
			if err != nil {
				t.Fatal(err)
			}
			for u, ok := range map[string]bool{"m00001": true, "m00002": true, "stranger": false, "m00009": false} {
				r := resp.GetData()[u]
				want := msgUserMissing
				if ok {
					want = msgConfigSet
				}
				if r.GetSuccess() != ok || r.GetMessage() != want || r.GetUserId() != u || r.GetDocumentId() != "d,e" {
					t.Errorf("%s: %v", u, r)
				}
			}
			if len(resp.GetData()) != 4 {
				t.Fatalf("items %v", resp.GetData())
			}
			if !older && h.users.amongCalls.Load() != 2 {
				t.Fatalf("%d MembersAmong calls, want 2 (the check and the confirmation)", h.users.amongCalls.Load())
			}
			for _, doc := range []string{"d", "e"} {
				got, err := h.store.Configs(k1, Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: doc, DocGen: "dg-" + doc}, []string{"m00001", "stranger", "m00009"})
				if err != nil || len(got) != 1 || got["m00001"] != (Config{Inbox: None, Email: None, Slack: None}) {
					t.Fatalf("stored configs of %s: %v %v", doc, got, err)
				}
			}

			get, err := h.srv.GetNotificationConfig(k1, &notificationsv1.GetNotificationConfigRequest{OrganizationId: "o", DocumentIds: []string{"d"}, UserId: "m00001"})
			if err != nil || get.GetData()[0].GetConfig().GetInbox() != None {
				t.Fatalf("member's config %v %v", get, err)
			}
			for _, u := range []string{"stranger", "m00009"} {
				_, err := h.srv.GetNotificationConfig(k1, &notificationsv1.GetNotificationConfigRequest{OrganizationId: "o", DocumentIds: []string{"d"}, UserId: u})
				if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != msgUserMissing {
					t.Fatalf("%s: %v", u, err)
				}
			}
		})
	}
}

// A member removed from the organization while Set Notification Config runs (after its check,
// before its write lands: the removal's users.removed may already have swept their configs) is
// answered as if the removal had come first, and keeps no config.
func TestConfigOfAUserRemovedMeanwhile(t *testing.T) {
	h := newHarness(t, 3)
	h.users.leaver = "m00002"
	resp, err := h.srv.SetNotificationConfig(k1, &notificationsv1.SetNotificationConfigRequest{OrganizationId: "o", DocumentIds: []string{"d", "e"},
		UserIds: []string{"m00001", "m00002"}, Config: &notificationsv1.SetConfigValues{Inbox: None, Email: None, Slack: None}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetData()["m00002"]; r.GetSuccess() || r.GetMessage() != msgUserMissing {
		t.Fatalf("the removed user: %v", r)
	}
	if r := resp.GetData()["m00001"]; !r.GetSuccess() {
		t.Fatalf("the member: %v", r)
	}
	for _, doc := range []string{"d", "e"} {
		got, err := h.store.Configs(k1, Scope{APIKey: "k1", OrganizationID: "o", OrgGen: "g1", DocumentID: doc, DocGen: "dg-" + doc}, []string{"m00001", "m00002"})
		if err != nil || len(got) != 1 || got["m00002"] != (Config{}) {
			t.Fatalf("stored configs of %s: %v %v", doc, got, err)
		}
	}
}
