package gateway

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// MaxBodyBytesInFlight bounds the request bodies the gateway holds at once, all requests of the
// process together (docs/operations.md, "HTTP listener").
const MaxBodyBytesInFlight = 128 << 20

// busyMessage answers a request whose body found the budget spent.
const busyMessage = "The server is busy reading other requests; try again in a moment."

// errBodiesBusy is readBody's error when the budget cannot take more of a body.
var errBodiesBusy = errors.New(busyMessage)

// bodyBudget is what is left of the bytes of request bodies the gateway may hold at once. A
// body is read before any credentials are checked, so without it many connections each
// sending a large body made the gateway hold 4 MiB each for as long as the server's read
// timeout (issue 20, attack pass 26). A body takes from it the buffer it is read into, as
// that buffer grows with what arrived, and gives it back once its request message is decoded
// (the buffer is not used past that): a client that declares a large body and sends little
// holds little, and a call that takes long, or an answer a client is slow to take, holds none.
type bodyBudget struct{ left atomic.Int64 }

func newBodyBudget(n int64) *bodyBudget {
	b := &bodyBudget{}
	b.left.Store(n)
	return b
}

// take reserves n bytes, or reports false when fewer are left.
func (b *bodyBudget) take(n int64) bool {
	for {
		left := b.left.Load()
		if left < n {
			return false
		}
		if b.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) {
	if n != 0 {
		b.left.Add(n)
	}
}

// budgetedBody is a request's body (already bounded to MaxBodyBytes) with its declared length
// (-1: none), read by readBody against the budget. It lives in the request's exchange, so it
// costs no allocation of its own.
type budgetedBody struct {
	io.ReadCloser
	size    int64
	budget  *bodyBudget
	charged int64 // taken from budget; given back by release
	busy    bool  // the budget refused the body
	// first takes the body's first bytes, so that nothing is taken from the budget before the
	// body starts to arrive: a client that declares a body and sends none holds none of it.
	first [512]byte
}

// releaseBody gives back what a request's body took from the budget, if it is a budgetedBody.
func releaseBody(r io.Reader) {
	if b, ok := r.(*budgetedBody); ok {
		b.release()
	}
}

// release gives back what the body took; the codec calls it once the body is decoded, the
// gateway once the request is answered (whichever comes first gives it back).
func (b *budgetedBody) release() {
	b.budget.give(b.charged)
	b.charged = 0
}

// grow makes room for more of the body in buf, taking the new room from the budget: twice the
// room so far, at first 4 KiB (most bodies: one buffer; the first read's 512 bytes fit), never
// past the declared length, or past MaxBodyBytes and a byte (the byte that tells
// MaxBytesReader's refusal) without one. So a body holds at most twice what it sent, or 4 KiB.
func (b *budgetedBody) grow(buf []byte) ([]byte, error) {
	limit := int64(MaxBodyBytes + 1)
	if b.size >= 0 && b.size < limit {
		limit = b.size
	}
	n := min(max(int64(cap(buf))*2, 4<<10), limit)
	if !b.budget.take(n - int64(cap(buf))) {
		b.busy = true
		return buf, errBodiesBusy
	}
	b.charged += n - int64(cap(buf))
	grown := make([]byte, len(buf), n)
	copy(grown, buf)
	return grown, nil
}

// readBody reads a request's body: a budgetedBody within its budget, into a buffer of at most
// its declared length (io.ReadAll's, grown as the body came, reached 5.5 MiB for a body of 4),
// anything else whole.
func readBody(r io.Reader) ([]byte, error) {
	b, ok := r.(*budgetedBody)
	if !ok {
		return io.ReadAll(r)
	}
	var buf []byte
	for {
		if int64(len(buf)) == b.size {
			// All it declared: the end must follow (net/http holds a body to its length).
			var probe [1]byte
			n, err := b.Read(probe[:])
			switch {
			case n > 0:
				return nil, fmt.Errorf("read body: longer than its declared %d bytes", b.size)
			case errors.Is(err, io.EOF):
				return buf, nil
			case err != nil:
				return nil, err
			}
			continue
		}
		dst := b.first[:]
		if buf != nil {
			if len(buf) == cap(buf) {
				var err error
				if buf, err = b.grow(buf); err != nil {
					return nil, err
				}
			}
			dst = buf[len(buf):cap(buf)]
		}
		n, err := b.Read(dst)
		if buf != nil {
			buf = buf[:len(buf)+n]
		} else if n > 0 {
			// The body has started: its buffer takes its first share from the budget.
			var gerr error
			if buf, gerr = b.grow([]byte{}); gerr != nil {
				return nil, gerr
			}
			buf = append(buf, b.first[:n]...)
		}
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}
