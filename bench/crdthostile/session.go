package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/collab/collab/bench/collabproc"
)

// config is how scenarios run: the program measures the old server as far as the hard cap
// lets it; the tests stop a server as soon as it breaks a scenario's bound by a margin.
type config struct {
	// watchLimit is the RSS growth, over the server's RSS when the attack starts, at which the
	// watchdog kills the server, given the scenario's bound of growth (0: none).
	watchLimit func(bound int64) int64
	// restTimeout bounds one REST call of an attack (an Update that takes a minute).
	restTimeout time.Duration
	// settleMax bounds how long an attack waits for the server to go idle after its last
	// frame.
	settleMax time.Duration
}

// errNotChecked is a result's Honest until the honest clients were checked.
var errNotChecked = errors.New("not checked")

// hardCap is the watchdog's limit without a bound, and while a scenario sets up its data.
const hardCap = 3 << 30

// Result is one scenario's row: what the attacker saw, what it cost the server (measured from
// /proc, never from what the server reports), and whether honest clients kept working.
type Result struct {
	Name    string
	Outcome string
	// Growth is the server's peak RSS (VmHWM, reset when the attack starts) minus its RSS
	// when the attack started.
	Growth int64
	// CPU is the server's CPU time (user and system) during the attack.
	CPU time.Duration
	// Wall is the attack's duration, checks included.
	Wall time.Duration
	// Honest is the honest clients' check: nil when one's edit reached the other in time.
	Honest error
	// HonestTook is how long that edit took to arrive.
	HonestTook time.Duration
	// Watchdog is non-nil when the watchdog killed the server (collabproc.ErrOverLimit) or
	// the server died on its own (collabproc.ErrExited); Limit is the growth it allowed.
	Watchdog error
	Limit    int64
	// Err: the scenario could not be run (a setup step failed); its figures mean nothing.
	Err error
}

// target is a scenario's server and the editor it attacks.
type target struct {
	srv              *collabproc.Server
	cfg              config
	org, doc, editor string
	res              *Result
}

// The attacked editor's place.
const (
	orgID    = "org"
	docID    = "doc"
	editorID = "editor"
)

// session runs one scenario on a fresh collabd: setup (watched with the hard cap), then the
// attack, watched with the scenario's limit, between two readings of the server's figures.
// attack records what the attacker saw in t.res.Outcome and the honest clients' check; it
// returns an error only when it could not be carried out.
func session(ctx context.Context, cfg config, name string, bound int64, setup, attack func(ctx context.Context, t *target) error) Result {
	res := Result{Name: name, Honest: errNotChecked, Limit: cfg.watchLimit(bound)}
	srv, err := collabproc.Start(ctx, "--rate-limit=off", "--log-level=error")
	if err != nil {
		res.Err = err
		return res
	}
	defer func() { _ = srv.Stop() }() // the process goes either way: Stop kills when it must
	t := &target{srv: srv, cfg: cfg, org: orgID, doc: docID, editor: editorID, res: &res}

	dog, sctx := srv.Watch(ctx, hardCap)
	err = srv.CreateDocument(sctx, t.org, t.doc)
	if err == nil && setup != nil {
		err = setup(sctx, t)
	}
	if rep := dog.Stop(); err != nil || rep.Err != nil {
		res.Err = fmt.Errorf("setup: %w", errors.Join(err, rep.Err))
		return res
	}

	before, err := srv.Stats()
	if err == nil {
		err = srv.ResetPeak()
	}
	if err != nil {
		res.Err = err
		return res
	}
	dog, actx := srv.Watch(ctx, before.RSS+res.Limit)
	start := time.Now()
	err = attack(actx, t)
	res.Wall = time.Since(start)
	rep := dog.Stop()
	res.Watchdog = rep.Err
	if res.Watchdog != nil && res.Honest != nil {
		// Whatever the honest clients saw, the server's death decided it.
		res.Honest = errNotChecked
	}
	peak, cpu := rep.PeakRSS, rep.CPU
	if after, serr := srv.Stats(); serr == nil {
		peak, cpu = max(peak, after.PeakRSS), after.CPU
	}
	res.Growth, res.CPU = peak-before.RSS, cpu-before.CPU
	if err != nil && res.Watchdog == nil {
		res.Err = err
	}
	return res
}

// limitFor is the watchdog's limit of growth for a scenario's bound in the tests: the bound
// and half again, so a server that breaks it is stopped long before it harms the machine and
// one that keeps it is never stopped.
func limitFor(bound int64) int64 {
	if bound == 0 {
		return hardCap
	}
	return bound + bound/2
}

// Idle is a quarter second in which the server used under 30 ms of CPU.
const (
	idleWindow = 250 * time.Millisecond
	idleCPU    = 30 * time.Millisecond
)

// settle waits until the server has gone idle after an attack (it may work through queued
// frames long after the last one arrived), at most cfg.settleMax, and at least one window.
func (t *target) settle(ctx context.Context) {
	deadline := time.Now().Add(t.cfg.settleMax)
	last, err := t.srv.Stats()
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(idleWindow):
		}
		var now collabproc.Stats
		if now, err = t.srv.Stats(); err == nil {
			if now.CPU-last.CPU < idleCPU {
				return
			}
			last = now
		}
	}
}

// honestWithin is how soon an honest client's edit must reach another honest client.
const honestWithin = 2 * time.Second

// honestPair is two honest editors of the attacked editor's data: one edits, the other must
// receive it.
type honestPair struct {
	a, b *honestPeer
	n    int
}

// connectHonest connects two honest editors (users of their own) and waits until both synced.
func (t *target) connectHonest(ctx context.Context) (*honestPair, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var peers [2]*honestPeer
	for i, user := range []string{"honest-a", "honest-b"} {
		url, err := t.syncURL(ctx, user, collabproc.RoleEditor)
		if err != nil {
			return nil, err
		}
		if peers[i], err = dialHonest(ctx, url); err != nil {
			return nil, fmt.Errorf("honest client %s: %w", user, err)
		}
		select {
		case <-peers[i].synced:
		case <-peers[i].ended:
			return nil, fmt.Errorf("honest client %s: %w", user, peers[i].alive())
		case <-ctx.Done():
			return nil, fmt.Errorf("honest client %s did not sync: %w", user, ctx.Err())
		}
	}
	return &honestPair{a: peers[0], b: peers[1]}, nil
}

// check has a edit and b receive it within honestWithin, both still connected, and records
// the outcome in the result.
func (h *honestPair) check(ctx context.Context, res *Result) {
	res.Honest = h.try(ctx, res)
}

func (h *honestPair) try(ctx context.Context, res *Result) error {
	for _, p := range []*honestPeer{h.a, h.b} {
		if err := p.alive(); err != nil {
			return err
		}
	}
	h.n++
	want := fmt.Sprintf("honest edit %d", h.n)
	ctx, cancel := context.WithTimeoutCause(ctx, honestWithin, fmt.Errorf("not within %v", honestWithin))
	defer cancel()
	start := time.Now()
	if err := h.a.edit(ctx, want); err != nil {
		return err
	}
	if err := h.b.waitText(ctx, want); err != nil {
		if aerr := h.a.alive(); aerr != nil {
			return fmt.Errorf("the editing client was %w", aerr)
		}
		return err
	}
	res.HonestTook = time.Since(start)
	return nil
}

func (h *honestPair) close() {
	h.a.close()
	h.b.close()
}

// stopped reports whether the watchdog stopped the attack (or the server died): the
// server's figures cannot be read (it is dying) or the attack's context ended.
func (t *target) stopped(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	if _, err := t.srv.Stats(); err == nil {
		return false
	}
	select {
	case <-t.srv.Exited():
	case <-time.After(time.Second):
	}
	return true
}

// syncURL is the attacked editor's sync URL with a token for user with role.
func (t *target) syncURL(ctx context.Context, user, role string) (string, error) {
	tok, err := t.srv.SyncToken(ctx, user, t.org, t.doc, role)
	if err != nil {
		return "", err
	}
	return t.srv.SyncURL(t.org, t.doc, t.editor, tok), nil
}

// honestRun connects the honest pair, runs the attack, then checks the pair: the frame of
// every scenario whose honest clients are there before the attack.
func (t *target) honestRun(ctx context.Context, attack func(ctx context.Context) error) error {
	pair, err := t.connectHonest(ctx)
	if err != nil {
		return err
	}
	defer pair.close()
	if err := attack(ctx); err != nil {
		return err
	}
	if t.stopped(ctx) {
		return nil
	}
	pair.check(ctx, t.res)
	return nil
}
