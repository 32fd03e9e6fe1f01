package collabd

import (
	"fmt"
	"io"

	"github.com/collab/collab/console"
)

// PrintBanner tells a newcomer where the API is and, for a local run, the development
// workspace's credentials with a call that works as printed.
func PrintBanner(w io.Writer, p *Process) {
	fmt.Fprintln(w, "collab is running")
	api := p.HTTPAddr != "" && !p.routesOnly
	switch {
	case api:
		fmt.Fprintf(w, "  HTTP API: %s\n", p.HTTPURL())
		fmt.Fprintf(w, "  Console:  %s%s\n", p.HTTPURL(), console.Prefix)
	case p.HTTPAddr != "":
		// No gateway here: the listener serves the services' own routes (live sync) only.
		fmt.Fprintf(w, "  HTTP:     %s (live sync only; the API is on the gateway)\n", p.HTTPURL())
	}
	if p.GRPCAddr != "" {
		mtls := ""
		if p.tls.mutual() {
			mtls = " (mutual TLS)"
		}
		fmt.Fprintf(w, "  gRPC:     %s%s\n", p.GRPCAddr, mtls)
	}
	if p.Dev == nil {
		return
	}
	d := *p.Dev
	// Only the published tokens are printed: tokens an operator chose are secrets like any
	// other, and the banner goes wherever the process's output goes.
	if !d.Published {
		d.WorkspaceToken, d.AuthToken = "<the value of --dev-workspace-token>", "<the value of --dev-auth-token>"
	}
	fmt.Fprintf(w, `
Development workspace (the same on every start):
  workspace id:          %s
  workspace auth token:  %s
  API key:               %s
  auth token:            %s
`, d.WorkspaceID, d.WorkspaceToken, d.APIKey, d.AuthToken)
	if api {
		fmt.Fprintf(w, `
Try it:
  curl -s %s/v2/workspace/get -H 'content-type: application/json' \
    -H 'x-service-workspace-id: %s' -H 'x-service-workspace-auth-token: %s' -d '{"data":{}}'
  curl -s %s/v2/workspace/domains/get -H 'content-type: application/json' \
    -H 'x-service-api-key: %s' -H 'x-service-auth-token: %s' -d '{"data":{}}'
`, p.HTTPURL(), d.WorkspaceID, d.WorkspaceToken, p.HTTPURL(), d.APIKey, d.AuthToken)
	}
}
