package gateway

// Operations returns how many operations g finds by their exact method and path.
func Operations(g *Gateway) int { return len(g.operations) }
