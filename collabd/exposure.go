package collabd

import (
	"fmt"
	"net"
	"strings"

	"github.com/collab/collab/internal/service"
)

// checkExposure refuses to start a process that holds the development workspace with its
// published credentials (printed in the README, the same everywhere; either token counts)
// while one of its listeners is reachable beyond loopback: the container image listens on
// every interface, and anyone who reached it would own that workspace and its API key.
// --dev-workspace=false, tokens of the operator's own (--dev-workspace-token,
// --dev-auth-token) or --allow-published-dev-credentials lift it; see docs/deployment.md,
// "The development workspace beyond loopback".
func checkExposure(cfg Config, dev *service.DevCredentials, listens []string) error {
	if dev == nil || !(dev.Published || dev.AnyPublished) || cfg.AllowPublishedDevCredentials {
		return nil
	}
	for _, addr := range listens {
		if !loopbackAddr(addr) {
			return fmt.Errorf("the development workspace has its published credentials and %s is reachable beyond this machine: "+
				"set --dev-workspace=false (%s), give it tokens of your own (--dev-workspace-token, --dev-auth-token), "+
				"listen on 127.0.0.1, or pass --allow-published-dev-credentials (%s) if that is what you want",
				addr, service.EnvName("dev-workspace"), service.EnvName("allow-published-dev-credentials"))
		}
	}
	return nil
}

// loopbackAddr reports whether a listen address (host:port) binds loopback only. An empty
// address or host (net.Listen binds every interface then), a wildcard or a name other than
// localhost counts as reachable (fail closed).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
