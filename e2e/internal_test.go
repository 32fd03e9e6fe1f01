package e2e

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	optionsv1 "github.com/collab/collab/proto/collab/options/v1"

	"github.com/collab/collab/collabd"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/protoset"
	"github.com/collab/collab/services"
)

// testInternalToken is the shared secret of the split-process tests: long and random-looking,
// as the configuration check demands.
const testInternalToken = "9c1e4f7a2b8d05e3f6a9c2d1b4e7f0a38d5c2b9e6f1a4d7c0b3e8f5a2d9c6b1e"

// internalMethods lists every RPC of every collab service (internal/protoset) that is for
// internal callers only.
func internalMethods(t *testing.T) []protoreflect.MethodDescriptor {
	t.Helper()
	var out []protoreflect.MethodDescriptor
	for _, md := range protoset.Methods() {
		if authn.ClassOf("/"+string(md.Parent().FullName())+"/"+string(md.Name())) == optionsv1.Auth_AUTH_INTERNAL {
			out = append(out, md)
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d internal methods found: %v", len(out), out)
	}
	return out
}

// callInternal invokes md over the process's TCP gRPC port with an empty request and the given
// metadata, and returns the status code.
func callInternal(t *testing.T, addr string, md protoreflect.MethodDescriptor, kv ...string) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), kv...)
	method := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	err = conn.Invoke(ctx, method, dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
	return status.Code(err)
}

// Every internal RPC, called over TCP by someone holding only a valid API key (or a guessed
// internal token), is refused; in all-in-one mode, where no token was configured, as well as
// in split mode.
func TestInternalRPCsRefuseOutsiders(t *testing.T) {
	t.Parallel()
	methods := internalMethods(t)
	check := func(t *testing.T, addr, apiKey, authToken, realToken string, runs func(protoreflect.MethodDescriptor) bool) {
		t.Helper()
		outsiders := map[string][]string{
			"api key":        {authn.HeaderAPIKey, apiKey, authn.HeaderAuthToken, authToken},
			"empty token":    {authn.HeaderAPIKey, apiKey, authn.HeaderAuthToken, authToken, authn.HeaderInternalToken, ""},
			"guessed token":  {authn.HeaderInternalToken, "change-me-internal-token"},
			"the dev tokens": {authn.HeaderInternalToken, "dev-auth-token"},
		}
		for _, md := range methods {
			if !runs(md) {
				continue
			}
			for who, kv := range outsiders {
				if code := callInternal(t, addr, md, kv...); code != codes.PermissionDenied {
					t.Errorf("%s with %s: %v, want PermissionDenied", md.FullName(), who, code)
				}
			}
			if realToken == "" {
				continue
			}
			// The refusal is the token's doing: with it, the call gets past authentication (an
			// empty request is then refused for what it lacks, or answered).
			if code := callInternal(t, addr, md, authn.HeaderInternalToken, realToken); code == codes.PermissionDenied || code == codes.Unimplemented {
				t.Errorf("%s with the internal token: %v", md.FullName(), code)
			}
		}
	}

	t.Run("all-in-one", func(t *testing.T) {
		s := newSystem(t)
		check(t, s.proc.GRPCAddr, s.proc.Dev.APIKey, s.proc.Dev.AuthToken, "", func(protoreflect.MethodDescriptor) bool { return true })
	})

	t.Run("split", func(t *testing.T) {
		ws := start(t, config(t, "--services=workspace", "--internal-token="+testInternalToken))
		rest := serviceNames("workspace")
		data := start(t, config(t, "--services="+strings.Join(rest, ","), "--workspace-addr="+ws.proc.GRPCAddr, "--internal-token="+testInternalToken))
		gw := start(t, config(t, append([]string{"--services=gateway", "--workspace-addr=" + ws.proc.GRPCAddr}, peerFlags(data.proc.GRPCAddr, rest...)...)...))
		id, token := gw.newWorkspace("internal@example.com")
		key, auth := gw.newKey(id, token)
		isWorkspace := func(md protoreflect.MethodDescriptor) bool {
			return md.Parent().FullName() == "collab.workspace.v1.WorkspaceService"
		}
		check(t, ws.proc.GRPCAddr, key, auth, testInternalToken, isWorkspace)
		check(t, data.proc.GRPCAddr, key, auth, testInternalToken, func(md protoreflect.MethodDescriptor) bool { return !isWorkspace(md) })
	})
}

// A process that runs only some services cannot start without a strong internal token.
func TestSplitModeRefusesWeakInternalTokens(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--services=workspace"},
		{"--services=workspace", "--internal-token=t0k"},
		{"--services=workspace", "--internal-token=change-me-internal-token"},
		{"--services=documents,users,access", "--workspace-addr=127.0.0.1:1", "--internal-token=CHANGE-ME-openssl-rand-hex-32"},
		{"--internal-token=s3cret"}, // all-in-one: a token given must still be a real one
	} {
		if _, err := collabd.ParseFlags(services.All(), args, func(string) string { return "" }); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	for _, args := range [][]string{
		{},                     // all-in-one: a random token of its own
		{"--services=gateway"}, // serves no internal operation
		{"--services=workspace", "--internal-token=" + testInternalToken},
	} {
		if _, err := collabd.ParseFlags(services.All(), append(args, "--workspace-addr="), func(string) string { return "" }); err != nil && !strings.Contains(err.Error(), "needs the") {
			t.Errorf("%v refused: %v", args, err)
		}
	}
}
