package gateway

// Operations returns how many operations g finds by their exact method and path.
func Operations(g *Gateway) int { return len(g.operations) }

// SetBodiesInFlight gives g a budget of request bodies held at once of n bytes in place of
// MaxBodyBytesInFlight, so that a test fills it with a few bodies, not 128 MiB of them.
func SetBodiesInFlight(g *Gateway, n int64) { g.bodies = newBodyBudget(n) }
