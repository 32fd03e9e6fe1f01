package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collab/collab/internal/egress"
)

// Scheduling limits (docs/webhooks.md, "Workers and fairness").
const (
	// circuitTimeouts is how many attempts in a row to one endpoint must time out before this
	// process gives it one worker at a time (its circuit opens); an answer closes it again.
	circuitTimeouts = 2
	// circuitFor is how long an open circuit stays open without a new timeout.
	circuitFor = 10 * time.Minute
	// workerIdle is how long a worker goroutine waits for another attempt before it ends.
	workerIdle = time.Second
	// roundMin is how many of a workspace's workers an attempt that ends must find free to
	// start a round (release).
	roundMin = 4
)

// newClient is the HTTP client of deliveries (internal/egress): no redirects, and no blocked
// address unless allowed. It keeps an idle connection per worker to a host, so that endpoints
// that share a host (paths of one receiver) do not open a connection per delivery.
func newClient(tg targets, workers int, timeout time.Duration) *http.Client {
	return egress.Client(tg.allowPrivate, timeout, max(workers, perEndpoint*2))
}

// engine sends the queued deliveries. It shares this process's workers fairly: each round it
// reads the due deliveries that are not of an endpoint or workspace at its cap, gives each free
// worker in turn to the workspace with the fewest attempts in flight and, within it, to the
// endpoint with the fewest, claims what it chose in one store call, reads what the attempts
// need in one call per kind, and records their outcomes in batches (recorder).
//
// Its counts are this process's own: every process shares its workers the same way, and the
// shared rules (leases, rate limits) stay in the store. Keeping them per process is safe: a
// count only bounds what this process holds, so a tenant holds at most its cap in each
// process, and losing the counts (a restart) loses nothing but the circuits' memory.
type engine struct {
	s     *Server
	wake  chan struct{}
	rec   *recorder
	tasks chan func() // attempts handed to a waiting worker goroutine (run)

	// dispatchMu makes one dispatch round at a time, the only user of the scratch maps below
	// (cleared and refilled each round rather than made anew).
	dispatchMu   sync.Mutex
	roomEp       map[string]int // Room.Endpoints
	roomWs       map[string]int // Room.Workspaces
	candidatesEp map[string]*endpointCandidates
	candidatesWs map[string]*workspaceCandidates

	mu        sync.Mutex
	running   int                      // attempts in flight
	endpoints map[string]*endpointLoad // by endpoint id
	tenants   map[string]int           // attempts in flight per workspace
	wg        sync.WaitGroup
}

// endpointLoad is what this process knows of an endpoint: its attempts in flight, and how many
// attempts in a row timed out (the circuit).
type endpointLoad struct {
	inflight    int
	timeouts    int
	lastTimeout time.Time
}

func newEngine(s *Server) *engine {
	return &engine{s: s, wake: make(chan struct{}, 1), rec: newRecorder(s), tasks: make(chan func()),
		roomEp: map[string]int{}, roomWs: map[string]int{},
		candidatesEp: map[string]*endpointCandidates{}, candidatesWs: map[string]*workspaceCandidates{},
		endpoints: map[string]*endpointLoad{}, tenants: map[string]int{}}
}

func (e *engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// RunDeliveries sends deliveries until ctx ends, and prunes old messages hourly.
func (s *Server) RunDeliveries(ctx context.Context) {
	t := time.NewTicker(enginePoll)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		s.engine.dispatch(ctx)
		if time.Since(lastPrune) > time.Hour {
			if err := s.store.Prune(ctx, s.now().Add(-retention)); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "webhooks: pruning", "error", err)
			}
			lastPrune = time.Now()
		}
		select {
		case <-ctx.Done():
			s.engine.wg.Wait()
			return
		case <-t.C:
		case <-s.engine.wake:
			// Let the attempts finishing about now free their workers first, so that the
			// round starts several: its store calls are paid once for all it starts.
			runtime.Gosched()
		}
	}
}

// SendDue dispatches what is due and waits for those attempts (tests step the engine with it).
func (s *Server) SendDue(ctx context.Context) {
	s.engine.dispatch(ctx)
	s.engine.wg.Wait()
}

func endpointKey(apiKey, id string) string { return apiKey + "\x1f" + id }

// basicEndpointID names the basic webhook config's target of a tenant: an id of its own, so
// its deliveries are held to their own share of the workers like any endpoint's.
func basicEndpointID(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return basicPrefix + hex.EncodeToString(sum[:6])
}

// dispatch starts attempts while workers are free and deliveries due.
func (e *engine) dispatch(ctx context.Context) {
	if e.s.workers == 0 {
		return // this process only stores messages
	}
	e.dispatchMu.Lock()
	defer e.dispatchMu.Unlock()
	for ctx.Err() == nil {
		now := e.s.clock.Now()
		free, room := e.room(now)
		if free <= 0 {
			return // a finishing attempt wakes the engine
		}
		due, err := e.s.store.DueDeliveries(ctx, now, dispatchBatch, room)
		if err != nil {
			if ctx.Err() == nil {
				e.s.log.ErrorContext(ctx, "webhooks: reading due deliveries", "error", err)
			}
			return
		}
		picked := e.pick(due, free, now)
		if len(picked) == 0 || e.claimAndStart(ctx, picked) == 0 {
			return
		}
	}
}

// room returns how many workers are free and how many more attempts each endpoint and
// workspace may have: what is left under their caps. Under dispatchMu: its maps are reused.
func (e *engine) room(now time.Time) (int, Room) {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.roomEp)
	clear(e.roomWs)
	room := Room{Endpoints: e.roomEp, Workspaces: e.roomWs, PerEndpoint: perEndpoint, PerWorkspace: e.s.tenantWorkers}
	for id, l := range e.endpoints {
		if l.inflight == 0 && now.Sub(l.lastTimeout) >= circuitFor {
			delete(e.endpoints, id) // a circuit closed by time, of an endpoint no longer sent to
			continue
		}
		room.Endpoints[id] = endpointCap(l, now) - l.inflight
	}
	for ws, n := range e.tenants {
		room.Workspaces[ws] = e.s.tenantWorkers - n
	}
	return e.s.workers - e.running, room
}

// endpointCap is how many attempts to the endpoint may be in flight in this process: one while
// its circuit is open, perEndpoint otherwise.
func endpointCap(l *endpointLoad, now time.Time) int {
	if l != nil && l.timeouts >= circuitTimeouts && now.Sub(l.lastTimeout) < circuitFor {
		return 1
	}
	return perEndpoint
}

// candidates are the due deliveries of one endpoint, and of one workspace, in due order.
type (
	endpointCandidates struct {
		id string
		ds []*Delivery
	}
	workspaceCandidates struct {
		id  string
		eps []*endpointCandidates
	}
)

// pick chooses up to free of the due deliveries (in due order) and counts them in flight. Each
// free worker goes to the workspace with the fewest attempts in flight (on a tie, the one
// whose delivery is due first), and within it to the endpoint with the fewest, which sends its
// oldest; a workspace or endpoint at its cap gets none.
// Under dispatchMu: its maps are reused.
func (e *engine) pick(due []*Delivery, free int, now time.Time) []*Delivery {
	var order []*workspaceCandidates
	byWs, byEp := e.candidatesWs, e.candidatesEp
	clear(byWs)
	clear(byEp)
	for _, d := range due {
		ec := byEp[d.EndpointID]
		if ec == nil {
			ec = &endpointCandidates{id: d.EndpointID}
			byEp[d.EndpointID] = ec
			wc := byWs[d.WorkspaceID]
			if wc == nil {
				wc = &workspaceCandidates{id: d.WorkspaceID}
				byWs[d.WorkspaceID] = wc
				order = append(order, wc)
			}
			wc.eps = append(wc.eps, ec)
		}
		ec.ds = append(ec.ds, d)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*Delivery
	for len(out) < free {
		var bestW *workspaceCandidates
		var bestE *endpointCandidates
		for _, w := range order {
			n := e.tenants[w.id]
			if n >= e.s.tenantWorkers || (bestW != nil && n >= e.tenants[bestW.id]) {
				continue
			}
			if c := e.emptiestEndpoint(w, now); c != nil {
				bestW, bestE = w, c
			}
		}
		if bestE == nil {
			break
		}
		d := bestE.ds[0]
		bestE.ds = bestE.ds[1:]
		e.reserve(d)
		out = append(out, d)
	}
	return out
}

// emptiestEndpoint returns the workspace's endpoint with candidates left, room under its cap,
// and the fewest attempts in flight; nil when none has. Under e.mu.
func (e *engine) emptiestEndpoint(w *workspaceCandidates, now time.Time) *endpointCandidates {
	var best *endpointCandidates
	bestN := 0
	for _, c := range w.eps {
		if len(c.ds) == 0 {
			continue
		}
		l := e.endpoints[c.id]
		n := 0
		if l != nil {
			n = l.inflight
		}
		if n < endpointCap(l, now) && (best == nil || n < bestN) {
			best, bestN = c, n
		}
	}
	return best
}

// reserve counts an attempt in flight; under e.mu.
func (e *engine) reserve(d *Delivery) {
	e.running++
	e.tenants[d.WorkspaceID]++
	l := e.endpoints[d.EndpointID]
	if l == nil {
		l = &endpointLoad{}
		e.endpoints[d.EndpointID] = l
	}
	l.inflight++
}

// release ends what reserve counted. It says whether a round should start now: when a worker
// is free again after all were busy (another workspace may be waiting for one), or when the
// delivery's workspace has a round's worth of its workers free (roundMin, or a quarter of its
// cap when that is less). Under load a round then starts several attempts and pays its store
// calls once for all of them (they were a round per attempt); a delivery due meanwhile goes
// in the next round, at the latest at the poll (enginePoll).
func (e *engine) release(d *Delivery) (wake bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	wake = e.running == e.s.workers // a worker is free again, which another workspace may use
	e.running--
	if e.tenants[d.WorkspaceID]--; e.tenants[d.WorkspaceID] <= 0 {
		delete(e.tenants, d.WorkspaceID)
	}
	if e.s.tenantWorkers-e.tenants[d.WorkspaceID] >= max(1, min(roundMin, e.s.tenantWorkers/4)) {
		wake = true
	}
	if l := e.endpoints[d.EndpointID]; l != nil {
		l.inflight--
		if l.inflight <= 0 && (l.timeouts == 0 || e.s.clock.Now().Sub(l.lastTimeout) >= circuitFor) {
			delete(e.endpoints, d.EndpointID)
		}
	}
	return wake
}

// timedOut and answered keep an endpoint's circuit: timeouts in a row open it, an answer (any
// status) closes it. Only timeouts count: a refused connection holds no worker.
func (e *engine) timedOut(endpointID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.endpoints[endpointID]; l != nil {
		l.timeouts++
		l.lastTimeout = e.s.clock.Now()
	}
}

func (e *engine) answered(endpointID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l := e.endpoints[endpointID]; l != nil {
		l.timeouts = 0
	}
}

// claimAndStart leases the picked deliveries in one store call, reads what their attempts need
// and starts them; it returns how many it started. Those it did not win go back.
func (e *engine) claimAndStart(ctx context.Context, picked []*Delivery) int {
	now := e.s.clock.Now()
	until := now.Add(e.s.lease).UTC().Truncate(time.Millisecond)
	ids := make([]string, len(picked))
	for i, d := range picked {
		ids[i] = d.ID
	}
	won, err := e.s.store.ClaimDeliveries(ctx, ids, now, until)
	if err != nil && ctx.Err() == nil {
		e.s.log.ErrorContext(ctx, "webhooks: claiming deliveries", "error", err)
	}
	wonSet := make(map[string]bool, len(won))
	for _, id := range won {
		wonSet[id] = true
	}
	claimed := make([]*Delivery, 0, len(won))
	for _, d := range picked {
		if wonSet[d.ID] {
			claimed = append(claimed, d)
		} else {
			e.release(d)
		}
	}
	if len(claimed) == 0 {
		return 0
	}
	// The attempts, store calls included, end before their lease does.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.s.lease-2*time.Second)
	left := atomic.Int64{}
	left.Store(int64(len(claimed)))
	e.wg.Add(len(claimed))
	// What the attempts need is read on a worker, so that the next round need not wait for it.
	e.run(func() {
		jobs := e.s.prepare(actx, claimed, until)
		// Each attempt may take the client's timeout from here: one deadline serves the round.
		sendCtx, cancelSend := context.WithTimeout(actx, e.s.timeout)
		cancelRound := func() { cancelSend(); cancel() }
		for _, j := range jobs {
			j.sendCtx = sendCtx //nolint:fatcontext // one context for the round's jobs, not one nested per job
			e.run(func() {
				defer func() {
					wake := e.release(j.d)
					if left.Add(-1) == 0 {
						cancelRound()
					}
					e.wg.Done()
					if wake {
						e.notify()
					}
				}()
				e.s.attempt(actx, j)
			})
		}
	})
	return len(claimed)
}

// run runs a task (an attempt, or the reads of a round's attempts) on a worker goroutine that
// waits for one, or on a new one. A worker waits workerIdle for its next task before it ends,
// so that under load attempts run on goroutines whose stacks have grown already (an HTTP
// request needs more than a new goroutine's), and at rest none is left. There are never more
// workers than attempts in flight and rounds being read.
func (e *engine) run(attempt func()) {
	select {
	case e.tasks <- attempt:
	default:
		go e.worker(attempt)
	}
}

func (e *engine) worker(attempt func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		attempt()
		idle.Reset(workerIdle)
		select {
		case attempt = <-e.tasks:
		case <-idle.C:
			return
		}
	}
}

// job is one claimed delivery with what its attempt needs, read for its whole batch at once.
type job struct {
	d          *Delivery
	sendCtx    context.Context // the attempt's request's: ends at its round's timeout
	leaseUntil time.Time
	msg        *Message     // nil: gone
	ep         *Endpoint    // nil: the basic config's target, or gone
	cfg        *Config      // the tenant's advanced config (endpoints only)
	basic      *BasicConfig // the basic config (its target only)
	readWhat   string       // what could not be read ("" when all was)
	readErr    error
}

func (j *job) isBasic() bool { return strings.HasPrefix(j.d.EndpointID, basicPrefix) }

// prepare reads what the attempts of the claimed deliveries need: their messages and endpoints
// in one call each, each tenant's config once.
func (s *Server) prepare(ctx context.Context, ds []*Delivery, leaseUntil time.Time) []*job {
	jobs := make([]*job, len(ds))
	msgRefs, epRefs := make([]Ref, 0, len(ds)), make([]Ref, 0, len(ds))
	for i, d := range ds {
		jobs[i] = &job{d: d, leaseUntil: leaseUntil}
		msgRefs = append(msgRefs, Ref{d.APIKey, d.MessageID})
		if !jobs[i].isBasic() {
			epRefs = append(epRefs, Ref{d.APIKey, d.EndpointID})
		}
	}
	failAll := func(what string, err error) []*job {
		for _, j := range jobs {
			j.readWhat, j.readErr = what, err
		}
		return jobs
	}
	msgs, err := s.store.Messages(ctx, msgRefs)
	if err != nil {
		return failAll("message", err)
	}
	eps, err := s.store.EndpointsByRef(ctx, epRefs)
	if err != nil {
		return failAll("endpoint", err)
	}
	cfgs, basics := map[string]*Config{}, map[string]*BasicConfig{}
	for _, j := range jobs {
		j.msg = msgs[Ref{j.d.APIKey, j.d.MessageID}]
		key := j.d.APIKey
		if j.isBasic() {
			if _, ok := basics[key]; !ok {
				if basics[key], err = s.store.BasicConfig(ctx, key); err != nil {
					delete(basics, key)
					j.readWhat, j.readErr = "basic config", err
					continue
				}
			}
			j.basic = basics[key]
			continue
		}
		j.ep = eps[Ref{key, j.d.EndpointID}]
		if _, ok := cfgs[key]; !ok {
			if cfgs[key], err = s.store.Config(ctx, key); err != nil {
				delete(cfgs, key)
				j.readWhat, j.readErr = "config", err
				continue
			}
		}
		j.cfg = cfgs[key]
	}
	return jobs
}
