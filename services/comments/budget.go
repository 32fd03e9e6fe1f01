package comments

import (
	"sync"

	"golang.org/x/time/rate"

	"github.com/collab/collab/internal/apierr"
)

// End users' write budget (docs/comments.md, "Limits"): each user (API key and user id) may
// make WriteRate writes a second on this process, WriteBurst at once, so that one user's
// client cannot fill a document's threads or keep its feed and streams busy. Backends (K) are
// not limited here: their key's own limits apply.
const (
	WriteRate  = 10
	WriteBurst = 50
	// maxBudgets bounds the users whose budgets are kept; past it, the full ones are dropped.
	maxBudgets = 10_000
)

const msgTooFast = "You are writing comments too fast; try again in a moment."

// writeBudgets are the end users' budgets on this process.
type writeBudgets struct {
	mu    sync.Mutex
	users map[string]*rate.Limiter
}

// spend takes one write from the actor's budget: RESOURCE_EXHAUSTED when it is spent.
func (b *writeBudgets) spend(a actor) error {
	if a.user == nil {
		return nil
	}
	key := a.APIKey + "\x00" + a.user.UserID
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.users == nil {
		b.users = map[string]*rate.Limiter{}
	}
	l := b.users[key]
	if l == nil {
		if len(b.users) >= maxBudgets {
			for k, o := range b.users {
				if o.Tokens() >= WriteBurst {
					delete(b.users, k) // full again: nothing owed
				}
			}
		}
		l = rate.NewLimiter(WriteRate, WriteBurst)
		b.users[key] = l
	}
	if !l.Allow() {
		return apierr.ResourceExhausted(msgTooFast)
	}
	return nil
}
