package embedmongo

import "sync"

// locks are the proxy's write locks, one level per scope: one over every database, one per
// database, per collection and per document (by _id key). A request takes the lock of its
// scope's level exclusively and those above it shared, always from the top down and documents
// in key order, so no two requests can each wait for the other:
//
//   - scopeDocuments: the documents' locks, one by one; writes of other documents of the
//     collection run beside it (an insert takes none: a new document is no one else's);
//   - scopeCollection: the collection's: no other write of the collection runs beside it;
//   - scopeDatabase: the database's; scopeAll: every database's.
//
// Reads take none. FerretDB writes a document by reading it, changing it and writing it back,
// so two writes of one document must not overlap; writes of different documents may, as they
// did without the proxy.
type locks struct {
	all   sync.RWMutex
	mu    sync.Mutex
	named map[lockName]*namedLock
}

// lockName names the lock of a database (coll and key empty), a collection (key empty) or a
// document.
type lockName struct {
	level         scope
	db, coll, key string
}

// namedLock is a lock and how many hold or wait for it: it is dropped when none do, so the map
// holds only what is being written.
type namedLock struct {
	sync.RWMutex
	users int
}

func noUnlock() {}

// lock takes the locks req needs and returns their release.
func (l *locks) lock(req request) (unlock func()) {
	switch req.scope {
	case scopeRead:
		return noUnlock
	case scopeAll:
		l.all.Lock()
		return l.all.Unlock
	}
	l.all.RLock()
	held := []func(){l.all.RUnlock}
	take := func(n lockName, exclusive bool) {
		nl := l.get(n)
		if exclusive {
			nl.Lock()
			held = append(held, func() { nl.Unlock(); l.put(n, nl) })
		} else {
			nl.RLock()
			held = append(held, func() { nl.RUnlock(); l.put(n, nl) })
		}
	}
	take(lockName{level: scopeDatabase, db: req.db}, req.scope == scopeDatabase)
	if req.scope != scopeDatabase {
		take(lockName{level: scopeCollection, db: req.db, coll: req.coll}, req.scope == scopeCollection)
		for _, k := range req.keys { // sorted: two requests take shared documents in one order
			take(lockName{level: scopeDocuments, db: req.db, coll: req.coll, key: k}, true)
		}
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
}

func (l *locks) get(n lockName) *namedLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.named == nil {
		l.named = map[lockName]*namedLock{}
	}
	nl := l.named[n]
	if nl == nil {
		nl = &namedLock{}
		l.named[n] = nl
	}
	nl.users++
	return nl
}

func (l *locks) put(n lockName, nl *namedLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if nl.users--; nl.users == 0 {
		delete(l.named, n)
	}
}
