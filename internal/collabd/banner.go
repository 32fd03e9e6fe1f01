package collabd

import (
	"fmt"
	"io"

	"github.com/collab/collab/services/workspace"
)

// publishedDev are the development credentials the README and docs publish. Only these are
// printed in full: a token an operator chose (--dev-auth-token, ...) is a secret like any other,
// and the banner goes wherever the process's output goes.
var publishedDev = workspace.DevCredentials{
	WorkspaceID: "dev-workspace", WorkspaceToken: "dev-workspace-token", APIKey: "dev-api-key", AuthToken: "dev-auth-token",
}

// shownToken is a development token as the banner prints it.
func shownToken(v, published, flag string) string {
	if v == published {
		return v
	}
	return "<the value of --" + flag + ">"
}

// PrintBanner tells a newcomer where the API is and, for a local run, the development
// workspace's credentials with a call that works as printed.
func PrintBanner(w io.Writer, p *Process) {
	fmt.Fprintln(w, "collab is running")
	if p.HTTPAddr != "" {
		fmt.Fprintf(w, "  HTTP API: http://%s\n", p.HTTPAddr)
	}
	if p.GRPCAddr != "" {
		fmt.Fprintf(w, "  gRPC:     %s\n", p.GRPCAddr)
	}
	if p.Dev == nil {
		return
	}
	d := *p.Dev
	d.WorkspaceToken = shownToken(d.WorkspaceToken, publishedDev.WorkspaceToken, "dev-workspace-token")
	d.AuthToken = shownToken(d.AuthToken, publishedDev.AuthToken, "dev-auth-token")
	fmt.Fprintf(w, `
Development workspace (the same on every start):
  workspace id:          %s
  workspace auth token:  %s
  API key:               %s
  auth token:            %s
`, d.WorkspaceID, d.WorkspaceToken, d.APIKey, d.AuthToken)
	if p.HTTPAddr != "" {
		fmt.Fprintf(w, `
Try it:
  curl -s http://%s/v2/workspace/get -H 'content-type: application/json' \
    -H 'x-service-workspace-id: %s' -H 'x-service-workspace-auth-token: %s' -d '{"data":{}}'
  curl -s http://%s/v2/workspace/domains/get -H 'content-type: application/json' \
    -H 'x-service-api-key: %s' -H 'x-service-auth-token: %s' -d '{"data":{}}'
`, p.HTTPAddr, d.WorkspaceID, d.WorkspaceToken, p.HTTPAddr, d.APIKey, d.AuthToken)
	}
}
