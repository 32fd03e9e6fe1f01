package crdt

import (
	"strings"

	"github.com/collab/collab/internal/wakeup"
)

// goneSubject is where a replica that applied a lifecycle deletion or move tells the others to
// close the rooms it took away (docs/crdt.md, "Live sync (`services/crdt/live`)"): one process
// runs the lifecycle event, and the rooms of the other replicas would otherwise notice only at
// their access recheck (a moved document's data is still found under its generation, so the
// log never says it is gone).
const goneSubject = "collab.crdt.gone"

// goneMessage is the scope as sent on the bus: digests of the ids, never the ids or the API
// key (the engine is shared infrastructure). The document's digest is empty for a whole
// organization.
func goneMessage(sc Scope) []byte {
	msg := wakeup.Digest(sc.APIKey, sc.Org)
	if sc.Doc != "" {
		msg += " " + wakeup.Digest(sc.APIKey, sc.Org, sc.Doc)
	}
	return []byte(msg)
}

// reload closes this replica's rooms of the scope, then tells the other replicas to.
func (l *liveSync) reload(sc Scope) {
	l.hub.Gone(func(k string) bool {
		e, err := editorOf(k)
		return err == nil && sc.Matches(e)
	})
	if l.bus != nil {
		l.bus.Publish(goneSubject, goneMessage(sc))
	}
}

// followGone closes the rooms that another replica's lifecycle event took away, until the
// returned function is called. A message that cannot be read is dropped: the rooms' access
// recheck still ends those connections.
func (l *liveSync) followGone(bus wakeup.Bus) (stop func(), err error) {
	l.bus = bus
	return bus.Subscribe(goneSubject, func(p []byte) {
		org, doc, _ := strings.Cut(string(p), " ")
		if len(org) != 32 || (doc != "" && len(doc) != 32) {
			return
		}
		// The bus's goroutine must not wait on rooms: closing them sends close frames.
		go l.hub.Gone(func(k string) bool {
			e, err := editorOf(k)
			if err != nil || wakeup.Digest(e.APIKey, e.OrganizationID) != org {
				return false
			}
			return doc == "" || wakeup.Digest(e.APIKey, e.OrganizationID, e.DocumentID) == doc
		})
	})
}
