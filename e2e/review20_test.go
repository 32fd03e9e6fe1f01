package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/collab/collab/services"
)

// Review of issue 20 (6): the gateway as the shipped deployments run it (Kubernetes'
// gateway.yaml and the compose file give it no internal token: "the gateway ... gets neither
// the MongoDB URI nor the internal token") sent no x-collab-forwarder-token, so the workspace
// process dropped its x-forwarded-for and keyed every HTTP caller by the gateway's own address:
// one caller's Create Workspace calls used up everyone's. The deployments now give the gateway
// and the services the forwarder token, and nothing else of the Secret to the gateway.
func TestReview20GatewayWithoutTokenKeepsCallersApart(t *testing.T) {
	t.Parallel()
	const limit = "--rate-limit=createWorkspace=1"
	const forwarder = "--forwarder-token=7d1f9a3c5e2b8d4f6a0c1e3b5d7f9a2c4e6b8d0f"
	ws := start(t, config(t, "--services=workspace", "--internal-token="+testInternalToken, forwarder, limit))
	gwArgs := []string{"--services=gateway", forwarder} // as deploy/kubernetes/gateway.yaml and docker-compose.yml run it
	for _, m := range services.All() {
		gwArgs = append(gwArgs, "--"+m.Name+"-addr="+ws.proc.GRPCAddr)
	}
	gw := start(t, config(t, gwArgs...))
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		if code := createFrom(t, gw, ip, fmt.Sprintf("r%d@example.com", i), "203.0.113.9"); code != http.StatusOK {
			t.Fatalf("the first workspace from %s through a gateway without --internal-token: status %d, want 200 (its own limit)", ip, code)
		}
	}
}

// Review of issue 20 (6): the gRPC request limit counts the protobuf encoding, which for
// free-form values is several times the JSON (a 0 in a list is 2 bytes of JSON and 11 of
// protobuf). An HTTP request of about 1.3 MB, within the gateway's 4 MiB and within every
// limit of Add Activities (100 items, each field at most 64 KiB), is refused by the gRPC limit
// as "Request body is larger than 4 MiB." (it was accepted before 2cb37e2).
func TestReview20HTTPBodyWithinLimitsIsNotRefusedAsTooLarge(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	k := s.devKey()
	s.addOrganization(t, k, "o")
	zeros := make([]any, 5800) // about 63.8 KiB of protobuf per field, 11.6 KB of JSON
	for i := range zeros {
		zeros[i] = 0
	}
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("a%d", i), "featureType": "custom", "actionType": "x", "entityData": zeros}
	}
	body := map[string]any{"organizationId": "o", "activities": items}
	r := s.call("/v2/activities/add", k, body)
	if r.status != http.StatusOK {
		t.Fatalf("Add Activities of %d bytes of JSON: status %d: %s", len(fmt.Sprint(body)), r.status, truncate(string(r.raw)))
	}
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return strings.TrimSpace(s)
}

// Review of issue 20 (6): the per-address connection cap is applied on every HTTP listener,
// including that of a process serving live sync behind the gateway, whose every connection
// comes from the gateway (it proxies each WebSocket over a connection of its own): there all
// clients share the gateway's one address, so live sync holds at most
// --http-max-conns-per-address WebSockets (2,000 by default, a tenth of live sync's own 20,000)
// per gateway process, and the next client, from any address, is cut off at once. Neither the
// compose file nor the Kubernetes manifests change the flag on the crdt processes. Here the
// crdt process's cap is 2 (for a test that needs no 2,001 sockets), and three clients from
// three addresses connect through the gateway.
func TestReview20PerAddressCapBehindTheGateway(t *testing.T) {
	t.Parallel()
	back := start(t, config(t, "--services="+strings.Join(serviceNames(), ","),
		"--internal-token="+testInternalToken, "--http-max-conns-per-address=2"))
	args := []string{"--services=gateway", "--internal-token=" + testInternalToken, "--crdt-http-addr=" + back.proc.HTTPAddr}
	for _, m := range services.All() {
		args = append(args, "--"+m.Name+"-addr="+back.proc.GRPCAddr)
	}
	gw := start(t, config(t, args...))
	k := gw.devKeyOf(back)
	gw.call("/v2/users/add", k, map[string]any{"organizationId": "o", "createOrganization": true, "documentId": "d", "createDocument": true, "users": users("u1")}).data(t, "")
	token := gw.syncToken(t, k, "u1", "editor")
	for i, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, _, err := websocket.Dial(ctx, gw.syncURL()+"/o/d/e?token="+url.QueryEscape(token), &websocket.DialOptions{
			HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
		cancel()
		if err != nil {
			t.Fatalf("client %d from its own address %s: %v (the crdt process counts every client as the gateway)", i+1, ip, err)
		}
		t.Cleanup(func() { c.CloseNow() })
	}
}

// devKeyOf is the development key of the process that holds the development workspace.
func (s *system) devKeyOf(holder *system) map[string]string {
	return keyHeaders(holder.proc.Dev.APIKey, holder.proc.Dev.AuthToken)
}
