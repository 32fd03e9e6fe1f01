package yjstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Checker is a running e2e/yjs/check.mjs: real yjs answering requests. Its methods are safe for
// concurrent use (requests take turns) and return the checker's error for a request yjs
// refused ("load: Unexpected end of array"); the checker goes on after that. A request that
// gets no answer within Timeout kills the checker, and every later request fails.
type Checker struct {
	// Timeout bounds each request (default 2 minutes: applying the large fixture's 40,000
	// updates one by one takes seconds, more under the race detector on a busy machine).
	Timeout time.Duration

	mu     sync.Mutex // one request at a time
	p      *proc
	lines  chan []byte
	nextID int64
	dead   error
}

// StartChecker starts a checker for the test; it stops when the test ends. It fails the test
// when Node.js or npm is missing or the dependencies cannot be installed.
func StartChecker(t testing.TB) *Checker {
	t.Helper()
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	c := &Checker{Timeout: 2 * time.Minute, lines: make(chan []byte, 1)}
	c.p, err = startProc(env, func(line []byte) { c.lines <- line }, "check.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.dead = errors.New("yjstest: the checker was stopped (its test ended)")
		go func() { // drain stdout so the process can finish writing and exit
			for {
				select {
				case <-c.lines:
				case <-c.p.exited:
					return
				}
			}
		}()
		c.p.stop(5 * time.Second)
		if t.Failed() && c.p.stderr.Len() > 0 {
			t.Logf("yjstest: check.mjs's stderr:\n%s", c.p.stderr)
		}
	})
	return c
}

// call sends req (op and fields) and decodes the response into out.
func (c *Checker) call(op string, req map[string]any, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return c.dead
	}
	c.nextID++
	id := c.nextID
	req["op"] = op
	req["id"] = id
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("yjstest: %s: %w", op, err)
	}
	if err := c.p.writeLine(b); err != nil {
		c.dead = err
		return err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var line []byte
	select {
	case line = <-c.lines:
	case <-c.p.exited:
		c.dead = fmt.Errorf("yjstest: %s: check.mjs exited without answering%s", op, c.p.exitInfo())
		return c.dead
	case <-timer.C:
		c.p.kill()
		c.dead = fmt.Errorf("yjstest: %s: check.mjs did not answer within %v (killed it); stderr:\n%s",
			op, timeout, c.p.stderr)
		return c.dead
	}
	var head struct {
		ID    *int64  `json:"id"`
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		c.dead = fmt.Errorf("yjstest: %s: check.mjs answered %.200q: %w", op, line, err)
		return c.dead
	}
	if head.ID == nil || *head.ID != id {
		c.dead = fmt.Errorf("yjstest: %s: check.mjs answered request %v, want %d: %.200q", op, head.ID, id, line)
		return c.dead
	}
	if head.Error != nil {
		return fmt.Errorf("yjstest: check.mjs: %s", *head.Error)
	}
	if err := decodeJSON(line, out); err != nil {
		return fmt.Errorf("yjstest: %s: decoding check.mjs's answer: %w", op, err)
	}
	return nil
}

// Load applies update to a fresh Y.Doc and returns its view of roots, Y.encodeStateAsUpdate of
// the doc, and whether yjs holds structs or deletions of the update that it could not apply for
// want of others (store.pendingStructs or pendingDs).
func (c *Checker) Load(update []byte, roots []Root) (view View, full []byte, pending bool, err error) {
	var out struct {
		View    View   `json:"view"`
		Full    []byte `json:"full"`
		Pending bool   `json:"pending"`
	}
	err = c.call("load", map[string]any{"update": nonNil(update), "roots": nonNilRoots(roots)}, &out)
	return out.View, out.Full, out.Pending, err
}

// Apply applies base (none when nil or empty) and then each update, in order, to a fresh Y.Doc
// and returns its view.
func (c *Checker) Apply(base []byte, updates [][]byte, roots []Root) (View, error) {
	var out struct {
		View View `json:"view"`
	}
	err := c.call("apply", map[string]any{"base": base, "updates": nonNilList(updates), "roots": nonNilRoots(roots)}, &out)
	return out.View, err
}

// Edit loads base (none when nil or empty) into a fresh Y.Doc with a client ID drawn from seed, makes count random edits
// of roots (the fixtures' kinds of edit, seeded with seed), each in its own transaction, and
// returns the update of each (count of them) and the view of the result.
func (c *Checker) Edit(base []byte, roots []Root, seed int64, count int) ([][]byte, View, error) {
	return c.edit(base, roots, seed, count, nil)
}

// EditAs is Edit with the given client ID.
func (c *Checker) EditAs(base []byte, roots []Root, seed int64, count int, clientID uint32) ([][]byte, View, error) {
	return c.edit(base, roots, seed, count, &clientID)
}

func (c *Checker) edit(base []byte, roots []Root, seed int64, count int, clientID *uint32) ([][]byte, View, error) {
	var out struct {
		Updates [][]byte `json:"updates"`
		View    View     `json:"view"`
	}
	req := map[string]any{"base": base, "roots": nonNilRoots(roots), "seed": seed, "count": count}
	if clientID != nil {
		req["clientID"] = *clientID
	}
	err := c.call("edit", req, &out)
	return out.Updates, out.View, err
}

// Diff is Y.diffUpdate(update, stateVector).
func (c *Checker) Diff(update, stateVector []byte) ([]byte, error) {
	var out struct {
		Diff []byte `json:"diff"`
	}
	err := c.call("diff", map[string]any{"update": nonNil(update), "stateVector": nonNil(stateVector)}, &out)
	return out.Diff, err
}

// Merge is Y.mergeUpdates(updates). (yjs's merge is slow for many updates: tens of thousands
// take minutes.)
func (c *Checker) Merge(updates [][]byte) ([]byte, error) {
	var out struct {
		Merged []byte `json:"merged"`
	}
	err := c.call("merge", map[string]any{"updates": nonNilList(updates)}, &out)
	return out.Merged, err
}

// StateVectorFromUpdate is Y.encodeStateVectorFromUpdate(update): per client, the clock up to
// which the update's structs run without a gap from clock 0.
func (c *Checker) StateVectorFromUpdate(update []byte) ([]byte, error) {
	return c.stateVector(update, "update")
}

// StateVectorOfDoc is Y.encodeStateVector of a fresh Y.Doc after applying update.
func (c *Checker) StateVectorOfDoc(update []byte) ([]byte, error) {
	return c.stateVector(update, "doc")
}

func (c *Checker) stateVector(update []byte, from string) ([]byte, error) {
	var out struct {
		StateVector []byte `json:"stateVector"`
	}
	err := c.call("encodeSV", map[string]any{"update": nonNil(update), "from": from}, &out)
	return out.StateVector, err
}

// nonNil makes nil bytes "" rather than JSON null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func nonNilList(l [][]byte) [][]byte {
	out := make([][]byte, len(l))
	for i, b := range l {
		out[i] = nonNil(b)
	}
	return out
}

func nonNilRoots(r []Root) []Root {
	if r == nil {
		return []Root{}
	}
	return r
}
