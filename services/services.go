// Package services is the composition root's list of every service collab runs. Adding a
// service is its own folders (proto/collab/<name>, services/<name>) and one line here; the
// process, the gateway, the flags and the deployment files follow from this list.
package services

import (
	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/services/access"
	"github.com/collab/collab/services/activity"
	"github.com/collab/collab/services/comments"
	"github.com/collab/collab/services/crdt"
	"github.com/collab/collab/services/documents"
	"github.com/collab/collab/services/events"
	"github.com/collab/collab/services/memory"
	"github.com/collab/collab/services/notifications"
	"github.com/collab/collab/services/users"
	"github.com/collab/collab/services/webhooks"
	"github.com/collab/collab/services/workspace"
)

// All lists every service. A producer's own handler gets its events first (the outbox's gate:
// a migration that conflicts in documents stops before any other service moves data); the
// other consumers get them independently, each in its own lane.
func All() []service.Module {
	return []service.Module{
		workspace.Module(),
		documents.Module(),
		users.Module(),
		access.Module(),
		events.Module(),
		activity.Module(),
		notifications.Module(),
		memory.Module(),
		crdt.Module(),
		webhooks.Module(),
		comments.Module(),
	}
}
