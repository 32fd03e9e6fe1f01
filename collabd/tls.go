package collabd

import (
	"fmt"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/tlsfiles"
)

// processTLS is the process's TLS material, loaded at start and re-read when the files change:
// the HTTP listener's pair (--tls-*) and the mutual TLS of gRPC (--grpc-tls-*). Nil fields: off.
type processTLS struct {
	http     *tlsfiles.Pair
	grpcPair *tlsfiles.Pair
	grpcCA   *tlsfiles.Pool
	// tokenOnly keeps the internal token the one internal credential under mutual TLS: set
	// when the operator gave --internal-token.
	tokenOnly bool
}

// loadTLS reads the files the flags name; a process does not start on files that do not load.
func loadTLS(cfg Config, log *slog.Logger) (processTLS, error) {
	var t processTLS
	var err error
	if cfg.HTTPS() {
		if t.http, err = tlsfiles.LoadPair(cfg.TLSCertFile, cfg.TLSKeyFile, log); err != nil {
			return t, fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err)
		}
	}
	if cfg.MutualTLS() {
		if t.grpcPair, err = tlsfiles.LoadPair(cfg.GRPCTLSCertFile, cfg.GRPCTLSKeyFile, log); err != nil {
			return t, fmt.Errorf("--grpc-tls-cert-file and --grpc-tls-key-file: %w", err)
		}
		if t.grpcCA, err = tlsfiles.LoadPool(cfg.GRPCTLSCAFile, log); err != nil {
			return t, fmt.Errorf("--grpc-tls-ca-file: %w", err)
		}
	}
	return t, nil
}

func (t processTLS) mutual() bool { return t.grpcCA != nil }

// serverOptions make the gRPC listener require client certificates of the CA.
func (t processTLS) serverOptions() []grpc.ServerOption {
	if !t.mutual() {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(tlsfiles.GRPC(t.grpcPair, t.grpcCA))}
}

// authnOptions make a verified peer with the marker internal under mutual TLS without an
// operator's token.
func (t processTLS) authnOptions() []authn.InterceptorOption {
	if !t.mutual() || t.tokenOnly {
		return nil
	}
	return []authn.InterceptorOption{authn.WithVerifiedPeers()}
}

// dialCredentials are the transport of connections to peers.
func (t processTLS) dialCredentials() credentials.TransportCredentials {
	if !t.mutual() {
		return insecure.NewCredentials()
	}
	return tlsfiles.GRPC(t.grpcPair, t.grpcCA)
}

// internalPeerOptions go on the internal connections to peers only: the marker that, with the
// certificate, is their internal credential. The gateway's connections never get it.
func (t processTLS) internalPeerOptions() []grpc.DialOption {
	if !t.mutual() {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(authn.InternalPeerClientInterceptor())}
}

// authClient adds the marker to the auth client's calls under mutual TLS.
func (t processTLS) authClient(c *authn.Client) *authn.Client {
	if !t.mutual() {
		return c
	}
	return c.WithPeerMarker()
}

// httpsPeers makes the proxy of services' routes verify https peers against the CA of mutual
// TLS (and present the certificate), when it is set; otherwise the system's roots verify them.
func (t processTLS) httpsPeers(tr *http.Transport) {
	if t.mutual() {
		tlsfiles.HTTPTransport(tr, t.grpcPair, t.grpcCA)
	}
}

// scheme is the HTTP listener's.
func (t processTLS) scheme() string {
	if t.http != nil {
		return "https"
	}
	return "http"
}
