package live

// A Yjs client id is a writer's: its structs are numbered by the client's clock, and a struct
// another connection writes under that id at the clocks the client uses next makes the
// client's own edits look already held, so the room and every peer drop them while the client
// goes on showing them (FuzzRoom found it: a hostile editor's update under an honest
// client's id, waiting for a struct that never came, took the clock of that client's next
// edit). y-websocket's provider announces its document's client id in awareness when it
// connects, before it edits, so the room takes the first announcement of an id as its claim:
// the id belongs to that user for the room's life (a reconnection keeps it), other users'
// updates may not add structs under it (close 4403) and their awareness may not take it over.
// docs/crdt.md, "Live sync".

// maxOwnedPerUser bounds the client ids one user holds in a room: every page load of a
// y-websocket client is a new id. Past it, a user's further ids are not claimed (they work,
// unprotected); the room's memory for claims stays bounded by its users.
const maxOwnedPerUser = 256

// claimsKept is how many claims a room holds before it forgets those no writer needs: ids
// that hold nothing in the document, of users with no connection to the room (every page load
// of every reader is a new id, and a room that is never idle would keep them all). A client
// that wrote keeps its claim for the room's life: those are bounded by the document's size.
const claimsKept = 1024

// claimLocked records client as user's unless another user holds it, and reports whether
// user holds it now.
func (r *room) claimLocked(user string, client uint64) bool {
	if owner, ok := r.owners[client]; ok {
		return owner == user
	}
	if r.ownedBy[user] >= maxOwnedPerUser {
		return true
	}
	if r.owners == nil {
		r.owners, r.ownedBy = map[uint64]string{}, map[string]int{}
	}
	r.owners[client] = user
	r.ownedBy[user]++
	return true
}

// mayWriteLocked is the room's yjs.Limits.MayWrite for user's updates: client ids no other
// user holds. It reads the room's claims, so it runs under the room's lock.
func (r *room) mayWriteLocked(user string) func(client uint64) bool {
	if len(r.owners) == 0 {
		return nil
	}
	return func(client uint64) bool {
		owner, ok := r.owners[client]
		return !ok || owner == user
	}
}

// pruneClaimsLocked forgets, once the room holds more claims than claimsKept and twice what
// its last pruning kept (so that claims that must stay are not scanned at every tick), the
// claims of ids that hold nothing in the document and whose user has no connection to the
// room. Such a client, if it comes back, announces its id again when it connects.
func (r *room) pruneClaimsLocked() {
	if len(r.owners) <= max(claimsKept, 2*r.claimsAfterPrune) {
		return
	}
	for client, user := range r.owners {
		if u := r.users[user]; (u != nil && u.conns > 0) || r.doc.Holds(client) {
			continue
		}
		delete(r.owners, client)
		if r.ownedBy[user]--; r.ownedBy[user] == 0 {
			delete(r.ownedBy, user)
		}
	}
	r.claimsAfterPrune = len(r.owners)
}
