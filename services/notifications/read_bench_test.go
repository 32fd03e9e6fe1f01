package notifications

import (
	"fmt"
	"testing"

	notificationsv1 "github.com/collab/collab/proto/collab/notifications/v1"
)

// BenchmarkInboxRead reads a page of 50 of a member's inbox, newest first, through the server
// (Get Notifications with userId): 100 notifications with a headline naming their reader,
// mentions of the reader alone (the caller gave their name, the contact list gives their email)
// or notifications to everyone in an organization of 1,000 members. Headlines are rendered when
// read (issue 20): one contact-list call per read and a render per notification, which this
// measures against the stored headlines before (docs/benchmarks.md). cpu-ns/op is the process's
// CPU time per read, garbage collection included, which the machine's load changes less than
// ns/op.
func BenchmarkInboxRead(b *testing.B) {
	for _, c := range []struct {
		name string
		req  func(i int) *notificationsv1.AddNotificationsRequest
	}{
		{"mentions", func(i int) *notificationsv1.AddNotificationsRequest {
			return &notificationsv1.AddNotificationsRequest{NotificationId: fmt.Sprint("n", i), NotifyAll: new(false),
				NotifyUsers: []*notificationsv1.NotificationUser{{UserId: "m00001", Name: "Bo"}}}
		}},
		{"to everyone of 1000", func(i int) *notificationsv1.AddNotificationsRequest {
			return &notificationsv1.AddNotificationsRequest{NotificationId: fmt.Sprint("n", i)}
		}},
	} {
		h := newHarness(b, 1001)
		for i := range 100 {
			h.add(b, c.req(i))
			h.clock.Advance(1000) // a microsecond: each its own timestamp
		}
		size := int32(50)
		req := &notificationsv1.GetNotificationsRequest{OrganizationId: "o", UserId: "m00001", PageSize: &size}
		got, err := h.srv.GetNotifications(k1, req)
		if err != nil || len(got.GetData()) != 50 || got.GetData()[0].GetDisplayHeadlineMessage() != "Ada wrote to "+map[bool]string{true: "Bo", false: "Member m00001"}[c.name == "mentions"] {
			b.Fatalf("%s: %d notifications (%v), headline %q", c.name, len(got.GetData()), err, got.GetData()[0].GetDisplayHeadlineMessage())
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := h.srv.GetNotifications(k1, req); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := processCPU() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
