package comments

import (
	"context"
	"sync"
	"time"
)

// DefaultStreamPoll is how often a document with live streams reads its feed when no wake-up
// came: the safety net for a lost one (with the wake-up engine), and the only way to see other
// processes' changes without it.
const DefaultStreamPoll = 2 * time.Second

// recentChanges is how many of a document's latest changes its room keeps for its streams, so
// that one read of the store serves every stream that is up to date; recentBytes bounds their
// size (a stream that fell behind what is kept reads the store itself).
const (
	recentChanges = 256
	recentBytes   = 8 << 20
)

// feedRoom follows one document's feed for the streams of this process: it reads the store
// once per wake-up (or poll) and signals its streams, which take the changes from its recent
// list (or read the store themselves when they fell behind it).
type feedRoom struct {
	ref Ref
	// wake is signalled by wake-ups; the room's goroutine reads the feed.
	wake chan struct{}
	stop chan struct{}

	// ready is closed once the room knows its feed's newest change (err when it could not).
	ready chan struct{}
	err   error

	mu     sync.Mutex
	newest int64 // the newest Seq read
	recent []Change
	subs   map[chan struct{}]struct{}
	unsub  func()
}

// rooms are the process's feed rooms, by document incarnation.
type rooms struct {
	s      *Server
	mu     sync.Mutex
	byFeed map[feedKey]*feedRoom
	closed bool
}

// join returns the document's room, started when it is the first stream's, with sub added to
// its subscribers, and the newest Seq the room knew when sub joined.
func (rs *rooms) join(ctx context.Context, r Ref, sub chan struct{}) (*feedRoom, int64, error) {
	rs.mu.Lock()
	if rs.closed {
		rs.mu.Unlock()
		return nil, 0, errClosing
	}
	room := rs.byFeed[feedOf(r)]
	fresh := room == nil
	if fresh {
		room = &feedRoom{ref: r, wake: make(chan struct{}, 1), stop: make(chan struct{}), ready: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
		rs.byFeed[feedOf(r)] = room
	}
	room.mu.Lock()
	room.subs[sub] = struct{}{} // before anyone can leave: the room is not stopped under us
	room.mu.Unlock()
	rs.mu.Unlock()
	if fresh {
		// Read outside the rooms' lock: other documents' streams open meanwhile. Not on the
		// first stream's context: its client leaving would fail the others joining now.
		rs.start(context.WithoutCancel(ctx), room)
	}
	<-room.ready
	if room.err != nil {
		rs.leave(room, sub)
		return nil, 0, room.err
	}
	room.mu.Lock()
	defer room.mu.Unlock()
	return room, room.newest, nil
}

// start reads the feed's newest change, subscribes to its wake-ups and follows it.
func (rs *rooms) start(ctx context.Context, room *feedRoom) {
	defer close(room.ready)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, _, newest, err := rs.s.store.Changes(ctx, room.ref, 0, 1)
	if err != nil {
		room.err = err
		return
	}
	room.mu.Lock()
	room.newest = newest
	room.mu.Unlock()
	if rs.s.bus != nil {
		unsub, err := rs.s.bus.Subscribe(feedSubject(room.ref), func([]byte) { room.signal() })
		if err != nil {
			rs.s.log.Warn("comments stream: follow wake-ups; the stream follows its feed at the poll", "err", err)
		} else {
			room.mu.Lock()
			room.unsub = unsub
			room.mu.Unlock()
		}
	}
	go rs.follow(room)
}

// leave removes a stream's subscription; the last one stops the room.
func (rs *rooms) leave(room *feedRoom, sub chan struct{}) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	room.mu.Lock()
	delete(room.subs, sub)
	empty := len(room.subs) == 0
	room.mu.Unlock()
	if empty && rs.byFeed[feedOf(room.ref)] == room {
		delete(rs.byFeed, feedOf(room.ref))
		room.close()
	}
}

// close stops every room (the process is stopping); their streams end.
func (rs *rooms) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	for k, room := range rs.byFeed {
		room.close()
		delete(rs.byFeed, k)
	}
}

func (room *feedRoom) close() {
	room.mu.Lock()
	unsub := room.unsub
	room.mu.Unlock()
	if unsub != nil {
		unsub()
	}
	close(room.stop)
}

// signal asks the room to read its feed; it never blocks (the bus's goroutine calls it).
func (room *feedRoom) signal() {
	select {
	case room.wake <- struct{}{}:
	default:
	}
}

// follow reads the room's feed on each wake-up and at the poll, until the room stops.
func (rs *rooms) follow(room *feedRoom) {
	t := time.NewTicker(rs.s.poll)
	defer t.Stop()
	for {
		select {
		case <-room.stop:
			return
		case <-room.wake:
		case <-t.C:
		}
		rs.read(room)
	}
}

// read takes the feed's new changes into the room's recent list and signals its streams. The
// room counts only what it read (the feed's newest can be past it: more than one read's worth
// came, or writers appended while Changes read), so its recent list holds consecutive changes
// up to its newest, each once (since relies on it).
func (rs *rooms) read(room *feedRoom) {
	room.mu.Lock()
	after := room.newest
	room.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, _, newest, err := rs.s.store.Changes(ctx, room.ref, after, recentChanges)
	if err != nil {
		rs.s.log.Warn("comments stream: read feed", "err", err)
		return
	}
	if len(cs) == 0 {
		return
	}
	room.mu.Lock()
	defer room.mu.Unlock()
	if cs[0].Seq != after+1 {
		// The feed's window moved past the room: its streams read the store (and are reset).
		room.recent = nil
	}
	room.recent = append(room.recent, cs...)
	if drop := len(room.recent) - recentChanges; drop > 0 {
		room.recent = room.recent[drop:]
	}
	size := 0
	for i := len(room.recent) - 1; i >= 0; i-- {
		if size += len(room.recent[i].Data); size > recentBytes {
			room.recent = room.recent[i+1:]
			break
		}
	}
	room.newest = cs[len(cs)-1].Seq
	for sub := range room.subs {
		select {
		case sub <- struct{}{}:
		default:
		}
	}
	if newest > room.newest {
		room.signal() // more to read
	}
}

// since returns the room's changes after seq, and false when the room's recent list does not
// reach back to seq (the stream reads the store itself).
func (room *feedRoom) since(seq int64) ([]Change, bool) {
	room.mu.Lock()
	defer room.mu.Unlock()
	if seq >= room.newest {
		return nil, true
	}
	if len(room.recent) == 0 || room.recent[0].Seq > seq+1 {
		return nil, false
	}
	i := int(seq + 1 - room.recent[0].Seq)
	if i > len(room.recent) {
		return nil, false // not the room's: the stream reads the store
	}
	return append([]Change(nil), room.recent[i:]...), true
}
