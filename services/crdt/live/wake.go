package live

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Wake-ups between replicas (docs/architecture.md, "Wake-ups between replicas"): a replica
// that appends to a room's log publishes the entry's cursor on the room's subject; a replica
// holding the room is subscribed to it while the room is loaded, and catches up at once. The
// log stays the truth: a wake-up only hastens the read the safety poll would make, so a lost
// one costs latency, never data.

// subject is the room's wake-up subject: a digest of its key, as keys hold characters NATS
// subjects may not (dots, spaces, wildcards). Two keys sharing a digest would only wake each
// other for nothing.
func subject(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "collab.crdt.room." + hex.EncodeToString(sum[:16])
}

// wakePayload is a wake-up's body: the new entry's cursor ("seq version").
func wakePayload(at Cursor) []byte {
	return []byte(strconv.FormatUint(at.Seq, 10) + " " + at.Version)
}

// readWake reads a wake-up's cursor; ok is false for a body that is not one (a catch-up then
// reads the log anyway: a hint that cannot be read is taken as "something changed").
func readWake(p []byte) (at Cursor, ok bool) {
	seq, version, found := strings.Cut(string(p), " ")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !found || err != nil {
		return Cursor{}, false
	}
	return Cursor{Version: version, Seq: n}, true
}

// Wake tells the other replicas that the room of key has entries up to at (or, with a zero
// Cursor, that its data changed otherwise: deleted). Without a bus it does nothing.
func (h *Hub) Wake(key string, at Cursor) {
	if h.cfg.Wakeup != nil {
		h.cfg.Wakeup.Publish(subject(key), wakePayload(at))
	}
}

// subscribe makes the room follow its wake-ups (with a bus): each one that may bring news
// starts a catch-up, at most one waiting at a time.
func (r *room) subscribe() {
	bus := r.hub.cfg.Wakeup
	if bus == nil {
		return
	}
	unsub, err := bus.Subscribe(subject(r.key), func(p []byte) {
		at, ok := readWake(p)
		if ok {
			r.wakeAt.Store(&at)
		} else {
			r.wakeAt.Store(nil)
		}
		// Runs on the bus's goroutine (or the publisher's, in process): no lock is taken
		// here, the catch-up runs on a goroutine of its own.
		if r.woken.CompareAndSwap(false, true) {
			go r.wake()
		}
	})
	if err != nil {
		r.hub.log.Warn("crdt sync: follow wake-ups; the room follows the log at the safety poll", "err", err)
		return
	}
	r.unsub = unsub
}

// wake catches up after a wake-up, unless the room already holds what it announced (its own
// appends, or updates applied already).
func (r *room) wake() {
	r.woken.Store(false)
	if at := r.wakeAt.Load(); at != nil {
		r.mu.Lock()
		known := at.Version == r.at.Version && at.Seq > 0 && (at.Seq <= r.seq || r.seen[at.Seq])
		r.mu.Unlock()
		if known {
			return
		}
	}
	r.catchUp()
}

// safetyPollDue reports whether the tick should read the log: every tick without a bus (or
// without a safety poll set), else once the last read is SafetyPoll old.
func (r *room) safetyPollDue(now time.Time) bool {
	cfg := &r.hub.cfg
	if cfg.Wakeup == nil || cfg.SafetyPoll <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.lastFollow) >= cfg.SafetyPoll
}
