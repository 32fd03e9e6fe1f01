package collabctl

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/collab/collab/internal/authn"
	optionsv1 "github.com/collab/collab/proto/collab/options/v1"
)

// grpcTarget is where and how collabctl calls the gRPC services: internal operations have no
// HTTP route, and services call them with the deployment's internal token.
type grpcTarget struct {
	addr      string
	useTLS    bool
	tlsConfig *tls.Config
	// clientCert: tlsConfig holds a client certificate (mutual TLS), which collab takes as the
	// internal credential of a call that also carries authn.HeaderInternalPeer.
	clientCert    bool
	internalToken string
}

// callGRPC calls op over gRPC with data (the request message's JSON) and answers the response
// message's JSON, written as the API writes it (every field, lowerCamelCase names).
func (s *session) callGRPC(ctx context.Context, op operation, auth Auth, data json.RawMessage) (json.RawMessage, error) {
	g := s.grpc
	if g.addr == "" {
		return nil, usagef("%s is called over gRPC: give the address of a process that runs its service with --grpc-addr (%s)", op.Method, EnvName("grpc-addr"))
	}
	md, ok := methods()[op.Method]
	if !ok {
		return nil, usagef("no method %s in the API this collabctl was built with", op.Method)
	}
	in := dynamicpb.NewMessage(md.Input())
	if err := protojson.Unmarshal(data, in); err != nil {
		return nil, usagef("the data does not fit %s: %v", md.Input().FullName(), err)
	}
	headers, err := s.client.headers(auth)
	if err != nil {
		return nil, err
	}
	var pairs []string
	for k, v := range headers {
		pairs = append(pairs, k, v)
	}
	if op.Class == optionsv1.Auth_AUTH_INTERNAL {
		if g.internalToken == "" && !g.clientCert {
			return nil, usagef("%s is internal: it needs the deployment's internal token in %s (or --internal-token), or, under mutual TLS, a client certificate of the deployment's CA (--grpc-cert-file, --grpc-key-file)", op.Method, EnvName("internal-token"))
		}
		if g.internalToken != "" {
			pairs = append(pairs, authn.HeaderInternalToken, g.internalToken)
		}
		if g.clientCert {
			pairs = append(pairs, authn.HeaderInternalPeer, "1")
		}
	}
	creds := insecure.NewCredentials()
	if g.useTLS {
		creds = credentials.NewTLS(g.tlsConfig)
	}
	conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxResponse)))
	if err != nil {
		return nil, usagef("--grpc-addr %q: %v", g.addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, pairs...), s.timeout)
	defer cancel()
	out := dynamicpb.NewMessage(md.Output())
	method := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	if err := conn.Invoke(ctx, method, in, out); err != nil {
		return nil, grpcError(g.addr, err)
	}
	raw, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("writing the answer of %s: %w", op.Method, err)
	}
	return raw, nil
}

// grpcError turns a gRPC status into the API's error (its code's name and message, and the
// HTTP status the gateway would give it), and a failed connection into words for the operator.
func grpcError(addr string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("calling %s over gRPC: %w", addr, err)
	}
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Errorf("cannot reach the gRPC listener at %s, or it is not serving (--grpc-addr; --grpc-tls when it takes TLS): %s", addr, st.Message())
	case codes.DeadlineExceeded:
		if strings.Contains(st.Message(), "context deadline exceeded") {
			return fmt.Errorf("no answer from %s in time (--timeout)", addr)
		}
	case codes.Canceled:
		return errors.New("interrupted")
	}
	return &APIError{GRPC: true, HTTPStatus: runtime.HTTPStatusFromCode(st.Code()), Status: code.Code(st.Code()).String(), Message: st.Message()} //nolint:gosec // G115: gRPC codes are 0..16
}
