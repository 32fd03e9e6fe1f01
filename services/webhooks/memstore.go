package webhooks

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemoryStore keeps everything in the process: the store of the one-command local run and of
// the delivery benchmark. Records are copied in and out (an endpoint's pointers, slices and maps
// too), so callers never share memory with the store. Times are kept as MongoDB keeps them
// (milliseconds, UTC). Where store.go leaves room, it behaves as MongoStore's comment says.
//
// The delivery queue is built so that the engine's loop (DueDeliveries, ClaimDelivery,
// FinishDelivery) costs O(log n) per delivery however long the queue is:
//
//   - Each endpoint (API key, endpoint id) keeps its pending deliveries that no worker holds in
//     a binary heap ordered by (NextAttempt, ID): its ready heap.
//   - Each workspace keeps its endpoints whose ready heap is not empty in a heap of its own
//     (its heads), ordered by the first delivery of each; the workspaces whose heads are not
//     empty are in the store's heap (heads), ordered by their first endpoint's first delivery.
//   - The pending deliveries under a lease (LeaseUntil set: claimed and not finished) are in one
//     heap ordered by (LeaseUntil, ID); a lease that has run out makes its delivery due again.
//
// DueDeliveries merges the heaps lazily: it walks heads and the ready heaps in key order with a
// small frontier heap, stops at the first delivery that is not due, and never looks into the
// heads of a workspace or the ready heap of an endpoint once its room is taken, so a full
// workspace or endpoint costs one step whatever its backlog. Leases
// that ran out (a worker died) are few; they are collected and merged in. A claim moves the
// delivery from its ready heap to the lease heap, a finish takes it out (and back into its ready
// heap when it is retried later): a few heap steps each.
//
// Prune walks every record: it runs rarely (retention), not in the delivery loop.
type MemoryStore struct {
	mu sync.RWMutex

	configs map[string]*Config
	basic   map[string]*BasicConfig
	tenants map[string]*tenantData

	deliveries map[string]*entry
	queues     map[epKey]*epQueue
	workspaces map[string]*wsQueue
	heads      heap[*wsQueue] // workspaces with ready deliveries, by their first one
	leased     heap[*entry]   // pending deliveries under a lease, by (LeaseUntil, ID)

	// slots counts the deliveries of each second per endpoint key (TakeSlot); seconds more than
	// slotWindow before the newest seen are dropped.
	slots     map[int64]map[string]int
	newestSec int64
}

// slotWindow is how many seconds of rate slots are kept behind the newest one: workers whose
// clocks lag by less still count in the same slots as the others.
const slotWindow = 60

type epKey struct{ apiKey, endpointID string }

// tenantData holds the records of one API key. The id lists are sorted ascending.
type tenantData struct {
	endpoints   map[string]*Endpoint
	endpointIDs []string
	messages    map[string]*Message
	messageIDs  []string
	attempts    map[string]*Attempt
	attemptIDs  []string
	// attempt ids per message and per endpoint, sorted (ListAttempts' filters)
	attemptsByMessage  map[string][]string
	attemptsByEndpoint map[string][]string
}

func newTenantData() *tenantData {
	return &tenantData{
		endpoints: map[string]*Endpoint{}, messages: map[string]*Message{}, attempts: map[string]*Attempt{},
		attemptsByMessage: map[string][]string{}, attemptsByEndpoint: map[string][]string{},
	}
}

func (t *tenantData) empty() bool {
	return len(t.endpoints) == 0 && len(t.messages) == 0 && len(t.attempts) == 0
}

// epQueue holds what the store keeps per endpoint about its deliveries. It exists while the
// endpoint has a delivery (count > 0), whether or not the endpoint does.
type epQueue struct {
	key   epKey
	ws    *wsQueue     // its workspace's: the one of its first delivery
	ready heap[*entry] // pending deliveries without a lease, by (NextAttempt, ID)
	pos   int          // index in ws.heads; -1 while ready is empty
	count int          // deliveries of the endpoint, in every state
	// messageIDs are the messages of its deliveries, sorted (ListMessages by endpoint).
	messageIDs []string
	failed     map[string]*entry // its failed deliveries (FailedDeliveries)
}

// wsQueue holds a workspace's endpoint queues that have ready deliveries. It exists while the
// workspace has an endpoint queue.
type wsQueue struct {
	id     string
	heads  heap[*epQueue] // its endpoints with ready deliveries, by their first one
	pos    int            // index in MemoryStore.heads; -1 while heads is empty
	queues int            // endpoint queues filed under it
}

// first is the workspace's first ready delivery; heads is not empty.
func (w *wsQueue) first() *entry { return w.heads.a[0].ready.a[0] }

// entry is a stored delivery with its keys in milliseconds.
type entry struct {
	d     Delivery
	next  int64 // d.NextAttempt, Unix milliseconds
	lease int64 // d.LeaseUntil, Unix milliseconds (zeroMs: none)
	q     *epQueue
	// idx is the index in the heap that holds it (q.ready, or MemoryStore.leased when
	// inLeased); -1 in neither (finished).
	idx      int
	inLeased bool
}

// zeroMs is the zero time in Unix milliseconds.
var zeroMs = time.Time{}.UnixMilli()

func (e *entry) setNext(t time.Time) { e.d.NextAttempt, e.next = ms(t), t.UnixMilli() }
func (e *entry) setLease(t time.Time) {
	e.d.LeaseUntil, e.lease = ms(t), t.UnixMilli()
}

// byNext orders deliveries by (NextAttempt, ID): DueDeliveries' order.
func byNext(a, b *entry) bool {
	return a.next < b.next || (a.next == b.next && a.d.ID < b.d.ID)
}

func byLease(a, b *entry) bool {
	return a.lease < b.lease || (a.lease == b.lease && a.d.ID < b.d.ID)
}

func setEntryIdx(e *entry, i int) { e.idx = i }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		configs: map[string]*Config{}, basic: map[string]*BasicConfig{}, tenants: map[string]*tenantData{},
		deliveries: map[string]*entry{}, queues: map[epKey]*epQueue{}, workspaces: map[string]*wsQueue{},
		heads: heap[*wsQueue]{
			less: func(a, b *wsQueue) bool { return byNext(a.first(), b.first()) },
			set:  func(w *wsQueue, i int) { w.pos = i },
		},
		leased: heap[*entry]{less: byLease, set: setEntryIdx},
		slots:  map[int64]map[string]int{},
	}
}

// heap is a binary min-heap that tells its items where they are (set), so that any of them can
// be removed or moved in O(log n).
type heap[T any] struct {
	a    []T
	less func(x, y T) bool
	set  func(x T, i int)
}

func (h *heap[T]) push(x T) {
	h.a = append(h.a, x)
	h.set(x, len(h.a)-1)
	h.up(len(h.a) - 1)
}

// remove takes out the item at i.
func (h *heap[T]) remove(i int) {
	n := len(h.a) - 1
	x := h.a[i]
	if i != n {
		h.swap(i, n)
	}
	var zero T
	h.a[n] = zero
	h.a = h.a[:n]
	h.set(x, -1)
	if i != n {
		h.fix(i)
	}
}

// fix restores the order after the key of the item at i changed.
func (h *heap[T]) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *heap[T]) swap(i, j int) {
	h.a[i], h.a[j] = h.a[j], h.a[i]
	h.set(h.a[i], i)
	h.set(h.a[j], j)
}

func (h *heap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *heap[T]) down(i0 int) bool {
	i, n := i0, len(h.a)
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && h.less(h.a[r], h.a[j]) {
			j = r
		}
		if !h.less(h.a[j], h.a[i]) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}

// ms is t as MongoDB keeps it: milliseconds, UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// Sorted string lists: ids arrive nearly always in increasing order, so inserts append.

func insertSorted(l []string, id string) []string {
	if n := len(l); n == 0 || l[n-1] < id {
		return append(l, id)
	}
	i, found := slices.BinarySearch(l, id)
	if found {
		return l
	}
	return slices.Insert(l, i, id)
}

func removeSorted(l []string, id string) []string {
	if i, found := slices.BinarySearch(l, id); found {
		return slices.Delete(l, i, i+1)
	}
	return l
}

// removeAllSorted removes the ids in gone from l, in one pass.
func removeAllSorted(l []string, gone map[string]bool) []string {
	return slices.DeleteFunc(l, func(id string) bool { return gone[id] })
}

// before returns the index of the first id of l not less than after: l[:i] are the ids before
// it. "" is after every id.
func before(l []string, after string) int {
	if after == "" {
		return len(l)
	}
	return sort.SearchStrings(l, after)
}

func cloneOrNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// copyEndpoint copies e whole. Empty filters and metadata are unset (nil), as MongoDB, which
// omits them, gives them back.
func copyEndpoint(e *Endpoint) *Endpoint {
	c := *e
	c.Description, c.RateLimit, c.UID = clonePtr(e.Description), clonePtr(e.RateLimit), clonePtr(e.UID)
	c.FilterTypes, c.Channels = cloneOrNil(e.FilterTypes), cloneOrNil(e.Channels)
	c.Metadata = nil
	if len(e.Metadata) > 0 {
		c.Metadata = maps.Clone(e.Metadata)
	}
	c.Secrets = copySecrets(e.Secrets)
	return &c
}

func copySecrets(ss []Secret) []Secret {
	out := slices.Clone(ss)
	for i := range out {
		out[i].ExpiresAt = ms(out[i].ExpiresAt)
	}
	return out
}

func (s *MemoryStore) tenant(apiKey string) *tenantData { return s.tenants[apiKey] }

func (s *MemoryStore) tenantFor(apiKey string) *tenantData {
	t := s.tenants[apiKey]
	if t == nil {
		t = newTenantData()
		s.tenants[apiKey] = t
	}
	return t
}

func (s *MemoryStore) dropIfEmpty(apiKey string) {
	if t := s.tenants[apiKey]; t != nil && t.empty() {
		delete(s.tenants, apiKey)
	}
}

func (s *MemoryStore) Config(_ context.Context, apiKey string) (*Config, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := Config{}
	if stored := s.configs[apiKey]; stored != nil {
		c = *stored
	}
	return &c, nil
}

func (s *MemoryStore) UpdateConfig(_ context.Context, apiKey string, p ConfigPatch, now time.Time) (*Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.configs[apiKey]
	if c == nil {
		c = &Config{}
		s.configs[apiKey] = c
	}
	for _, f := range []struct {
		to   *bool
		from *bool
	}{{&c.Enabled, p.Enabled}, {&c.EncryptData, p.EncryptData}, {&c.EncodeData, p.EncodeData}, {&c.DataProtection, p.DataProtection}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if p.PublicKey != nil {
		c.PublicKey = *p.PublicKey
	}
	c.UpdatedAt = ms(now)
	out := *c
	return &out, nil
}

func (s *MemoryStore) BasicConfig(_ context.Context, apiKey string) (*BasicConfig, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := BasicConfig{}
	if stored := s.basic[apiKey]; stored != nil {
		c = *stored
	}
	return &c, nil
}

func (s *MemoryStore) UpdateBasicConfig(_ context.Context, apiKey string, p BasicConfigPatch, now time.Time) (*BasicConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.basic[apiKey]
	if c == nil {
		c = &BasicConfig{}
		s.basic[apiKey] = c
	}
	if p.UseWebhookService != nil {
		c.UseWebhookService = *p.UseWebhookService
	}
	for _, f := range []struct {
		to   *string
		from *string
	}{{&c.AuthToken, p.AuthToken}, {&c.RawURL, p.RawURL}, {&c.ProcessedURL, p.ProcessedURL}, {&c.Triggers, p.Triggers}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	c.UpdatedAt = ms(now)
	out := *c
	return &out, nil
}

func (s *MemoryStore) CreateEndpoint(_ context.Context, e *Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantFor(e.APIKey)
	if _, ok := t.endpoints[e.ID]; ok {
		return ErrExists
	}
	if len(t.endpoints) >= MaxEndpoints {
		return ErrLimit
	}
	c := copyEndpoint(e)
	c.FailingSince, c.CreatedAt, c.UpdatedAt = ms(c.FailingSince), ms(c.CreatedAt), ms(c.UpdatedAt)
	t.endpoints[c.ID] = c
	t.endpointIDs = insertSorted(t.endpointIDs, c.ID)
	return nil
}

// endpoint returns the stored endpoint (not a copy), nil when there is none.
func (s *MemoryStore) endpoint(apiKey, id string) *Endpoint {
	if t := s.tenant(apiKey); t != nil {
		return t.endpoints[id]
	}
	return nil
}

func (s *MemoryStore) Endpoint(_ context.Context, apiKey, id string) (*Endpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.endpoint(apiKey, id)
	if e == nil {
		return nil, ErrNotFound
	}
	return copyEndpoint(e), nil
}

func (s *MemoryStore) UpdateEndpoint(_ context.Context, apiKey, id string, p EndpointPatch, now time.Time) (*Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(apiKey, id)
	if e == nil {
		return nil, ErrNotFound
	}
	e = copyEndpoint(e) // stored endpoints are never changed in place (EndpointsByRef shares them)
	s.tenant(apiKey).endpoints[id] = e
	if p.URL != nil {
		e.URL = *p.URL
	}
	if p.Description != nil {
		e.Description = clonePtr(p.Description)
	}
	if p.FilterTypes != nil {
		e.FilterTypes = cloneOrNil(p.FilterTypes)
	}
	if p.Channels != nil {
		e.Channels = cloneOrNil(p.Channels)
	}
	if p.Disabled != nil {
		// The tenant enables or disables it: no reason of the service's stands.
		e.Disabled, e.DisabledReason = *p.Disabled, ""
		if !*p.Disabled {
			e.FailingSince = time.Time{}
		}
	}
	if p.RateLimit != nil {
		e.RateLimit = clonePtr(p.RateLimit)
	}
	if p.UID != nil {
		e.UID = clonePtr(p.UID)
	}
	if p.Metadata != nil {
		e.Metadata = nil
		if len(p.Metadata) > 0 {
			e.Metadata = maps.Clone(p.Metadata)
		}
	}
	clearEndpointFields(e, p.Clear)
	e.UpdatedAt = ms(now)
	return copyEndpoint(e), nil
}

// clearEndpointFields unsets the fields c names.
func clearEndpointFields(e *Endpoint, c EndpointFields) {
	if c.Description {
		e.Description = nil
	}
	if c.FilterTypes {
		e.FilterTypes = nil
	}
	if c.Channels {
		e.Channels = nil
	}
	if c.RateLimit {
		e.RateLimit = nil
	}
	if c.UID {
		e.UID = nil
	}
	if c.Metadata {
		e.Metadata = nil
	}
}

func (s *MemoryStore) DeleteEndpoint(_ context.Context, apiKey, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Its pending deliveries go even when the endpoint is gone already, as in MongoStore.
	if q := s.queues[epKey{apiKey, id}]; q != nil {
		var gone []*entry
		gone = append(gone, q.ready.a...)
		for _, e := range s.leased.a {
			if e.q == q {
				gone = append(gone, e)
			}
		}
		s.removeDeliveries(gone)
	}
	t := s.tenant(apiKey)
	if t == nil || t.endpoints[id] == nil {
		return ErrNotFound
	}
	delete(t.endpoints, id)
	t.endpointIDs = removeSorted(t.endpointIDs, id)
	s.dropIfEmpty(apiKey)
	return nil
}

func (s *MemoryStore) ListEndpoints(_ context.Context, apiKey, after string, limit int) ([]*Endpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*Endpoint{}
	t := s.tenant(apiKey)
	if t == nil {
		return out, nil
	}
	i := 0
	if after != "" {
		i = sort.Search(len(t.endpointIDs), func(i int) bool { return t.endpointIDs[i] > after })
	}
	for ; i < len(t.endpointIDs) && (limit <= 0 || len(out) < limit); i++ {
		out = append(out, copyEndpoint(t.endpoints[t.endpointIDs[i]]))
	}
	return out, nil
}

// Endpoints returns the stored endpoints themselves, not copies: the store never changes one
// in place (UpdateEndpoint and changeEndpoint store a changed copy), and the caller must not.
func (s *MemoryStore) Endpoints(_ context.Context, apiKey string) ([]*Endpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tenant(apiKey)
	if t == nil {
		return []*Endpoint{}, nil
	}
	out := make([]*Endpoint, len(t.endpointIDs))
	for i, id := range t.endpointIDs {
		out[i] = t.endpoints[id]
	}
	return out, nil
}

// EndpointsByRef returns the stored endpoints themselves, as Endpoints does.
func (s *MemoryStore) EndpointsByRef(_ context.Context, refs []Ref) (map[Ref]*Endpoint, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[Ref]*Endpoint, len(refs))
	for _, r := range refs {
		if e := s.endpoint(r.APIKey, r.ID); e != nil {
			out[r] = e
		}
	}
	return out, nil
}

// changeEndpoint applies f to a copy of the stored endpoint and stores the copy, or returns
// ErrNotFound.
func (s *MemoryStore) changeEndpoint(apiKey, id string, f func(e *Endpoint)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(apiKey, id)
	if e == nil {
		return ErrNotFound
	}
	e = copyEndpoint(e) // stored endpoints are never changed in place (EndpointsByRef shares them)
	f(e)
	s.tenant(apiKey).endpoints[id] = e
	return nil
}

func (s *MemoryStore) SetSecrets(_ context.Context, apiKey, id string, secrets []Secret, now time.Time) error {
	return s.changeEndpoint(apiKey, id, func(e *Endpoint) {
		e.Secrets, e.UpdatedAt = copySecrets(secrets), ms(now)
	})
}

func (s *MemoryStore) SwapSecrets(_ context.Context, apiKey, id string, old, secrets []Secret, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(apiKey, id)
	if e == nil {
		return ErrNotFound
	}
	if !slices.EqualFunc(e.Secrets, old, func(a, b Secret) bool { return a.Value == b.Value && a.ExpiresAt.Equal(b.ExpiresAt) }) {
		return ErrChanged
	}
	c := copyEndpoint(e) // stored endpoints are never changed in place (EndpointsByRef shares them)
	c.Secrets, c.UpdatedAt = copySecrets(secrets), ms(now)
	s.tenant(apiKey).endpoints[id] = c
	return nil
}

func (s *MemoryStore) SetFailing(_ context.Context, apiKey, id string, since time.Time) error {
	return s.changeEndpoint(apiKey, id, func(e *Endpoint) {
		if e.FailingSince.IsZero() {
			e.FailingSince = ms(since)
		}
	})
}

func (s *MemoryStore) ClearFailing(_ context.Context, apiKey, id string) error {
	return s.changeEndpoint(apiKey, id, func(e *Endpoint) { e.FailingSince = time.Time{} })
}

func (s *MemoryStore) DisableEndpoint(_ context.Context, apiKey, id, reason string, now time.Time) error {
	return s.changeEndpoint(apiKey, id, func(e *Endpoint) {
		e.Disabled, e.DisabledReason, e.UpdatedAt = true, reason, ms(now)
	})
}

func (s *MemoryStore) AddMessage(_ context.Context, m *Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenantFor(m.APIKey)
	if _, ok := t.messages[m.ID]; ok {
		return ErrExists
	}
	c := *m
	c.CreatedAt = ms(c.CreatedAt)
	t.messages[c.ID] = &c
	t.messageIDs = insertSorted(t.messageIDs, c.ID)
	return nil
}

func (s *MemoryStore) Message(_ context.Context, apiKey, id string) (*Message, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.tenant(apiKey); t != nil {
		if m := t.messages[id]; m != nil {
			c := *m
			return &c, nil
		}
	}
	return nil, ErrNotFound
}

func (s *MemoryStore) Messages(_ context.Context, refs []Ref) (map[Ref]*Message, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[Ref]*Message, len(refs))
	for _, r := range refs {
		if t := s.tenant(r.APIKey); t != nil {
			if m := t.messages[r.ID]; m != nil {
				c := *m
				out[r] = &c
			}
		}
	}
	return out, nil
}

func (s *MemoryStore) ListMessages(_ context.Context, apiKey, endpointID string, types []string, after string, limit int) ([]*Message, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*Message{}
	t := s.tenant(apiKey)
	if t == nil || (types != nil && len(types) == 0) {
		return out, nil
	}
	ids := t.messageIDs
	if endpointID != "" {
		q := s.queues[epKey{apiKey, endpointID}]
		if q == nil {
			return out, nil
		}
		ids = q.messageIDs
	}
	for i := before(ids, after) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		m := t.messages[ids[i]]
		if m == nil || (types != nil && !slices.Contains(types, m.EventType)) {
			continue // pruned, or of another type
		}
		c := *m
		out = append(out, &c)
	}
	return out, nil
}

// queueFor returns the endpoint's queue, made (filed under the workspace) when it has none.
func (s *MemoryStore) queueFor(k epKey, workspaceID string) *epQueue {
	q := s.queues[k]
	if q == nil {
		w := s.workspaces[workspaceID]
		if w == nil {
			w = &wsQueue{id: workspaceID, pos: -1}
			w.heads = heap[*epQueue]{
				less: func(a, b *epQueue) bool { return byNext(a.ready.a[0], b.ready.a[0]) },
				set:  func(q *epQueue, i int) { q.pos = i },
			}
			s.workspaces[workspaceID] = w
		}
		w.queues++
		q = &epQueue{key: k, ws: w, pos: -1, failed: map[string]*entry{}}
		q.ready = heap[*entry]{less: byNext, set: setEntryIdx}
		s.queues[k] = q
	}
	return q
}

// dropQueue forgets an endpoint queue left without deliveries, and its workspace's when it
// was the last.
func (s *MemoryStore) dropQueue(q *epQueue) {
	delete(s.queues, q.key)
	if q.ws.queues--; q.ws.queues == 0 {
		delete(s.workspaces, q.ws.id)
	}
}

// fixHead puts q where it belongs in its workspace's heads, and the workspace in the store's,
// after q's ready heap changed.
func (s *MemoryStore) fixHead(q *epQueue) {
	refile(&q.ws.heads, q, len(q.ready.a) > 0, q.pos)
	refile(&s.heads, q.ws, len(q.ws.heads.a) > 0, q.ws.pos)
}

// refile puts x (at pos in h, -1 when not in it) where it belongs: in h when present, by its
// key as it is now.
func refile[T any](h *heap[T], x T, present bool, pos int) {
	switch {
	case !present && pos >= 0:
		h.remove(pos)
	case present && pos < 0:
		h.push(x)
	case pos >= 0:
		h.fix(pos)
	}
}

// place puts a pending delivery into the heap its lease says: ready when it has none.
func (s *MemoryStore) place(e *entry) {
	switch {
	case e.d.State != StatePending:
	case e.lease != zeroMs:
		e.inLeased = true
		s.leased.push(e)
	default:
		e.inLeased = false
		e.q.ready.push(e)
		s.fixHead(e.q)
	}
}

// unplace takes a delivery out of the heap that holds it, before its state, next attempt or
// lease change.
func (s *MemoryStore) unplace(e *entry) {
	switch {
	case e.idx < 0:
	case e.inLeased:
		s.leased.remove(e.idx)
	default:
		e.q.ready.remove(e.idx)
		s.fixHead(e.q)
	}
}

// setState changes the state, keeping the endpoint's failed set.
func (e *entry) setState(state string) {
	if e.d.State == StateFailed {
		delete(e.q.failed, e.d.ID)
	}
	e.d.State = state
	if state == StateFailed {
		e.q.failed[e.d.ID] = e
	}
}

// removeDeliveries removes deliveries from every structure, and the endpoint queues they leave
// empty.
func (s *MemoryStore) removeDeliveries(gone []*entry) {
	msgs := map[*epQueue]map[string]bool{}
	for _, e := range gone {
		s.unplace(e)
		delete(s.deliveries, e.d.ID)
		delete(e.q.failed, e.d.ID)
		e.q.count--
		if msgs[e.q] == nil {
			msgs[e.q] = map[string]bool{}
		}
		msgs[e.q][e.d.MessageID] = true
	}
	for q, ids := range msgs {
		if q.count == 0 {
			s.dropQueue(q)
			continue
		}
		q.messageIDs = removeAllSorted(q.messageIDs, ids)
	}
}

func (s *MemoryStore) QueueDeliveries(_ context.Context, ds []*Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range ds {
		if _, ok := s.deliveries[in.ID]; ok {
			continue
		}
		e := &entry{d: *in, idx: -1}
		e.d.CreatedAt, e.d.UpdatedAt = ms(e.d.CreatedAt), ms(e.d.UpdatedAt)
		e.setNext(in.NextAttempt)
		e.setLease(in.LeaseUntil)
		e.q = s.queueFor(epKey{in.APIKey, in.EndpointID}, in.WorkspaceID)
		e.q.count++
		e.q.messageIDs = insertSorted(e.q.messageIDs, in.MessageID)
		s.deliveries[e.d.ID] = e
		e.d.State = ""
		e.setState(in.State)
		s.place(e)
	}
	return nil
}

func (s *MemoryStore) Delivery(_ context.Context, id string) (*Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.deliveries[id]
	if e == nil {
		return nil, ErrNotFound
	}
	d := e.d
	return &d, nil
}

func (s *MemoryStore) DueDeliveries(_ context.Context, now time.Time, limit int, room Room) ([]*Delivery, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	nowMs := now.UnixMilli()
	w := walks.Get().(*dueWalk)
	defer w.put()
	w.s, w.nowMs, w.room = s, nowMs, room
	if len(s.heads.a) > 0 {
		w.pushWorkspace(0)
	}
	// Leases that ran out (a worker died) are few: they join the walk in their place.
	for _, e := range s.expiredLeases(nowMs, room) {
		w.frontier.push(cursor{e: e, q: e.q, i: -1, head: -1, top: -1})
	}
	var found []*entry
	for limit <= 0 || len(found) < limit {
		r := w.next()
		if r == nil {
			break
		}
		found = append(found, r)
	}
	vals := make([]Delivery, len(found))
	out := make([]*Delivery, len(found))
	for i, e := range found {
		vals[i] = e.d
		out[i] = &vals[i]
	}
	return out, nil
}

// cursor is a place in DueDeliveries' walk: the delivery at index i of q's ready heap, which is
// q's first (i == 0) when q is at index head of its workspace's heads (else head is -1), and
// q is the first of its workspace when the workspace is at index top of the store's heads
// (else top is -1); or, with i == -1, a delivery whose lease ran out (no children).
type cursor struct {
	e         *entry
	q         *epQueue
	i         int
	head, top int
}

// dueWalk walks the ready deliveries in (next, ID) order. Its frontier holds the places the
// walk may go next; a place's children in the store's heads, in its workspace's heads and in
// its ready heap come after it, so the frontier's least is the next in order. Children are
// pushed only when their parent is taken, so the walk never enters a workspace or endpoint
// whose room is taken.
type dueWalk struct {
	s        *MemoryStore
	nowMs    int64
	room     Room
	frontier heap[cursor]
	takenEp  map[*epQueue]int // deliveries returned per endpoint
	takenWs  map[*wsQueue]int // and per workspace
}

func (w *dueWalk) pushWorkspace(top int) {
	ws := w.s.heads.a[top]
	q := ws.heads.a[0]
	w.frontier.push(cursor{e: q.ready.a[0], q: q, i: 0, head: 0, top: top})
}

// walks keeps dueWalks for reuse: DueDeliveries runs on every dispatch round.
var walks = sync.Pool{New: func() any {
	return &dueWalk{
		frontier: heap[cursor]{less: func(x, y cursor) bool { return byNext(x.e, y.e) }, set: func(cursor, int) {}},
		takenEp:  map[*epQueue]int{}, takenWs: map[*wsQueue]int{},
	}
}}

// put clears the walk (no pointer into the store is kept) and gives it back to walks.
func (w *dueWalk) put() {
	clear(w.frontier.a)
	w.frontier.a = w.frontier.a[:0]
	clear(w.takenEp)
	clear(w.takenWs)
	w.s, w.room = nil, Room{}
	walks.Put(w)
}

// next returns the next due delivery within the room, nil when there is none.
func (w *dueWalk) next() *entry {
	for len(w.frontier.a) > 0 {
		c := w.frontier.a[0]
		if c.e.next > w.nowMs {
			w.frontier.a = w.frontier.a[:0] // everything after it is later still
			return nil
		}
		w.frontier.remove(0)
		ws := c.q.ws
		if c.top >= 0 {
			for _, j := range [2]int{2*c.top + 1, 2*c.top + 2} {
				if j < len(w.s.heads.a) {
					w.pushWorkspace(j)
				}
			}
		}
		if w.takenWs[ws] >= w.room.workspace(ws.id) {
			continue // and the rest of the workspace
		}
		if c.head >= 0 {
			for _, j := range [2]int{2*c.head + 1, 2*c.head + 2} {
				if j < len(ws.heads.a) {
					q := ws.heads.a[j]
					w.frontier.push(cursor{e: q.ready.a[0], q: q, i: 0, head: j, top: -1})
				}
			}
		}
		if w.takenEp[c.q] >= w.room.endpoint(c.q.key.endpointID) {
			continue // and the rest of the endpoint
		}
		for _, i := range [2]int{2*c.i + 1, 2*c.i + 2} {
			if c.i >= 0 && i < len(c.q.ready.a) {
				w.frontier.push(cursor{e: c.q.ready.a[i], q: c.q, i: i, head: -1, top: -1})
			}
		}
		w.takenEp[c.q]++
		w.takenWs[ws]++
		return c.e
	}
	return nil
}

// expiredLeases returns the leased deliveries whose lease and next attempt are not after now,
// not of an endpoint or workspace without room.
func (s *MemoryStore) expiredLeases(nowMs int64, room Room) []*entry {
	var out []*entry
	if len(s.leased.a) == 0 || s.leased.a[0].lease > nowMs {
		return nil
	}
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e := s.leased.a[i]
		if e.lease > nowMs {
			continue // and its subtree, which is later still
		}
		if e.next <= nowMs && room.endpoint(e.d.EndpointID) > 0 && room.workspace(e.d.WorkspaceID) > 0 {
			out = append(out, e)
		}
		for _, j := range [2]int{2*i + 1, 2*i + 2} {
			if j < len(s.leased.a) {
				stack = append(stack, j)
			}
		}
	}
	return out
}

func (s *MemoryStore) ClaimDelivery(_ context.Context, id string, now, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claim(id, now.UnixMilli(), until), nil
}

func (s *MemoryStore) ClaimDeliveries(_ context.Context, ids []string, now, until time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	won := make([]string, 0, len(ids))
	for _, id := range ids {
		if s.claim(id, now.UnixMilli(), until) {
			won = append(won, id)
		}
	}
	return won, nil
}

// claim leases the delivery when it is pending and due at nowMs, under s.mu.
func (s *MemoryStore) claim(id string, nowMs int64, until time.Time) bool {
	e := s.deliveries[id]
	if e == nil || e.d.State != StatePending || e.next > nowMs || e.lease > nowMs {
		return false
	}
	s.unplace(e)
	e.setLease(until)
	s.place(e)
	return true
}

func checkState(state string) error {
	switch state {
	case StatePending, StateSuccess, StateFailed:
		return nil
	}
	return fmt.Errorf("webhooks store: finish delivery: unknown state %q", state)
}

func (s *MemoryStore) FinishDelivery(_ context.Context, id, state string, attempts int, next, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finish(id, nil, state, attempts, next, now)
}

func (s *MemoryStore) FinishLeased(_ context.Context, id string, leaseUntil time.Time, state string, attempts int, next, now time.Time) error {
	if err := checkState(state); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finish(id, &leaseUntil, state, attempts, next, now)
}

func (s *MemoryStore) RecordOutcomes(_ context.Context, outs []Outcome, now time.Time) (int, error) {
	for _, o := range outs {
		if o.Finish {
			if err := checkState(o.State); err != nil {
				return 0, err
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range outs {
		if o.Attempt != nil {
			_ = s.addAttempt(o.Attempt) // ids are unique: a taken one is a repeat, kept as it is
		}
	}
	lost := 0
	for _, o := range outs {
		if o.Finish && s.finish(o.DeliveryID, &o.LeaseUntil, o.State, o.Attempts, o.Next, now) != nil {
			lost++
		}
	}
	return lost, nil
}

// finish records an outcome and releases the lease; with leaseUntil, only while the lease is
// still that one. Under s.mu.
func (s *MemoryStore) finish(id string, leaseUntil *time.Time, state string, attempts int, next, now time.Time) error {
	e := s.deliveries[id]
	if e == nil {
		return ErrNotFound
	}
	if leaseUntil != nil && e.lease != leaseUntil.UnixMilli() {
		return ErrLeaseLost
	}
	s.unplace(e)
	e.setState(state)
	e.d.Attempts, e.d.UpdatedAt = attempts, ms(now)
	e.setNext(next)
	e.setLease(time.Time{})
	s.place(e)
	return nil
}

func (s *MemoryStore) Requeue(_ context.Context, ids []string, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		e := s.deliveries[id]
		if e == nil || seen[id] {
			continue
		}
		seen[id] = true
		n++
		// A lease stands, moved on by a millisecond: the worker that holds it may be sending
		// it now, and must not finish it over the requeue.
		s.unplace(e)
		e.setState(StatePending)
		e.d.Attempts, e.d.UpdatedAt = 0, ms(now)
		e.setNext(now)
		if e.lease > now.UnixMilli() {
			e.setLease(time.UnixMilli(e.lease + 1))
		}
		s.place(e)
	}
	return n, nil
}

func (s *MemoryStore) FailedDeliveries(_ context.Context, apiKey, endpointID string, since, until time.Time) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found []*entry
	if q := s.queues[epKey{apiKey, endpointID}]; q != nil {
		since, until = ms(since), ms(until)
		for _, e := range q.failed {
			if !e.d.CreatedAt.Before(since) && e.d.CreatedAt.Before(until) {
				found = append(found, e)
			}
		}
	}
	slices.SortFunc(found, func(a, b *entry) int {
		return cmp.Or(a.d.CreatedAt.Compare(b.d.CreatedAt), cmp.Compare(a.d.ID, b.d.ID))
	})
	out := make([]string, len(found))
	for i, e := range found {
		out[i] = e.d.ID
	}
	return out, nil
}

func (s *MemoryStore) AddAttempt(_ context.Context, a *Attempt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addAttempt(a)
}

// addAttempt stores a copy of a, or returns ErrExists; under s.mu.
func (s *MemoryStore) addAttempt(a *Attempt) error {
	t := s.tenantFor(a.APIKey)
	if _, ok := t.attempts[a.ID]; ok {
		return ErrExists
	}
	c := *a
	c.Timestamp = ms(c.Timestamp)
	t.attempts[c.ID] = &c
	t.attemptIDs = insertSorted(t.attemptIDs, c.ID)
	t.attemptsByMessage[c.MessageID] = insertSorted(t.attemptsByMessage[c.MessageID], c.ID)
	t.attemptsByEndpoint[c.EndpointID] = insertSorted(t.attemptsByEndpoint[c.EndpointID], c.ID)
	return nil
}

func (s *MemoryStore) ListAttempts(_ context.Context, apiKey string, f AttemptFilter, after string, limit int) ([]*Attempt, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*Attempt{}
	t := s.tenant(apiKey)
	if t == nil {
		return out, nil
	}
	ids := t.attemptIDs
	switch {
	case f.MessageID != "":
		ids = t.attemptsByMessage[f.MessageID]
	case f.EndpointID != "":
		ids = t.attemptsByEndpoint[f.EndpointID]
	}
	for i := before(ids, after) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		a := t.attempts[ids[i]]
		if (f.MessageID != "" && a.MessageID != f.MessageID) || (f.EndpointID != "" && a.EndpointID != f.EndpointID) ||
			(f.Status != "" && a.Status != f.Status) {
			continue
		}
		c := *a
		out = append(out, &c)
	}
	return out, nil
}

func (s *MemoryStore) TakeSlot(_ context.Context, endpointKey string, second int64, limit int) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if second > s.newestSec {
		s.newestSec = second
		for sec := range s.slots {
			if sec < second-slotWindow {
				delete(s.slots, sec)
			}
		}
	}
	m := s.slots[second]
	if m == nil {
		m = map[string]int{}
		s.slots[second] = m
	}
	m[endpointKey]++
	return m[endpointKey] <= limit, nil
}

func (s *MemoryStore) Prune(_ context.Context, before time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	before = ms(before)
	for apiKey, t := range s.tenants {
		gone := map[string]bool{}
		for id, m := range t.messages {
			if m.CreatedAt.Before(before) {
				delete(t.messages, id)
				gone[id] = true
			}
		}
		if len(gone) > 0 {
			t.messageIDs = removeAllSorted(t.messageIDs, gone)
		}
		gone = map[string]bool{}
		for id, a := range t.attempts {
			if a.Timestamp.Before(before) {
				delete(t.attempts, id)
				gone[id] = true
			}
		}
		if len(gone) > 0 {
			t.attemptIDs = removeAllSorted(t.attemptIDs, gone)
			for _, byKey := range []map[string][]string{t.attemptsByMessage, t.attemptsByEndpoint} {
				for k, ids := range byKey {
					if ids = removeAllSorted(ids, gone); len(ids) == 0 {
						delete(byKey, k)
					} else {
						byKey[k] = ids
					}
				}
			}
		}
		s.dropIfEmpty(apiKey)
	}
	var finished []*entry
	for _, e := range s.deliveries {
		if e.d.State != StatePending && e.d.CreatedAt.Before(before) {
			finished = append(finished, e)
		}
	}
	s.removeDeliveries(finished)
	for sec := range s.slots {
		if sec < before.Unix() {
			delete(s.slots, sec)
		}
	}
	return nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }

var _ Store = (*MemoryStore)(nil)

// BusiestEndpoints returns the endpoints with the most pending deliveries, most first.
func (s *MemoryStore) BusiestEndpoints(_ context.Context, limit int) ([]EndpointBacklog, error) {
	s.mu.RLock()
	counts := map[string]int{}
	for _, e := range s.deliveries {
		if e.d.State == StatePending {
			counts[e.d.EndpointID]++
		}
	}
	s.mu.RUnlock()
	out := make([]EndpointBacklog, 0, len(counts))
	for id, n := range counts {
		out = append(out, EndpointBacklog{EndpointID: id, Pending: n})
	}
	slices.SortFunc(out, func(a, b EndpointBacklog) int {
		if a.Pending != b.Pending {
			return b.Pending - a.Pending
		}
		return strings.Compare(a.EndpointID, b.EndpointID)
	})
	return out[:min(len(out), max(limit, 0))], nil
}

// Backlog counts the pending deliveries and returns the earliest next attempt among those due
// at now (zero when none is due): the queue's depth and how far behind it is.
func (s *MemoryStore) Backlog(_ context.Context, now time.Time) (int, time.Time, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n, oldest := 0, time.Time{}
	for _, e := range s.deliveries {
		if e.d.State != StatePending {
			continue
		}
		n++
		if !e.d.NextAttempt.After(now) && !e.d.LeaseUntil.After(now) && (oldest.IsZero() || e.d.NextAttempt.Before(oldest)) {
			oldest = e.d.NextAttempt
		}
	}
	return n, oldest, nil
}
