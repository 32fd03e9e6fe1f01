package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
)

// IsLifecycle reports whether an event type is one of the lifecycle types above, which carry
// changes to stored data rather than something that happened in a product.
func IsLifecycle(eventType string) bool {
	return slices.Contains([]string{OrganizationDeleted, DocumentDeleted, FolderDeleted, DocumentMigrated, LocationDataDeleted, UsersRemoved}, eventType)
}

// Reserved reports whether an event type is one only collab itself publishes: the lifecycle
// types above, which their consumers apply to stored data, the notifications service's
// notification.* (its own handler fans them out), and the webhook engine's own message.*
// announcements.
func Reserved(eventType string) bool {
	return IsLifecycle(eventType) || strings.HasPrefix(eventType, "message.") || strings.HasPrefix(eventType, "notification.")
}

// DomainKey is the relay id of a tenant's domain event: the same tenant and event id always
// give the same key, so the outbox's unique id refuses a repeat, and two tenants' ids never
// meet. Hashed, so the API key does not show in logs.
func DomainKey(apiKey, eventID string) string {
	sum := sha256.Sum256([]byte(apiKey + "\x00" + eventID))
	return "de_" + hex.EncodeToString(sum[:16])
}

// Domain wraps a domain event in the relay's envelope, mirroring its id (as DomainKey), type,
// tenant, organization, time and organization generation.
func Domain(e *eventsv1.Event) *lifecyclev1.Event {
	return &lifecyclev1.Event{
		Id: DomainKey(e.GetApiKey(), e.GetId()), Type: e.GetType(), ApiKey: e.GetApiKey(), OrganizationId: e.GetOrganizationId(),
		CreatedAt: e.GetTimestamp(), OrganizationGeneration: e.GetOrganizationGeneration(),
		Payload: &lifecyclev1.Event_Domain{Domain: e},
	}
}
