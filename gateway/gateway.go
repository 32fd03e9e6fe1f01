package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"
	usersv1 "github.com/collab/collab/proto/collab/users/v1"
	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/gateway/jsoncodec"
	"github.com/collab/collab/internal/logging"
)

// Upstream is one service the gateway routes to.
type Upstream struct {
	// Name is the service's short name ("workspace").
	Name string
	// GRPCService is its full gRPC name, used for readiness.
	GRPCService string
	register    func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error
}

// Upstreams lists every service behind the gateway, in the order their routes register.
var Upstreams = []Upstream{
	{Name: "workspace", GRPCService: workspacev1.WorkspaceService_ServiceDesc.ServiceName,
		register: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return workspacev1.RegisterWorkspaceServiceHandlerClient(ctx, mux, workspacev1.NewWorkspaceServiceClient(conn))
		}},
	{Name: "documents", GRPCService: documentsv1.DocumentsService_ServiceDesc.ServiceName,
		register: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return documentsv1.RegisterDocumentsServiceHandlerClient(ctx, mux, documentsv1.NewDocumentsServiceClient(conn))
		}},
	{Name: "users", GRPCService: usersv1.UsersService_ServiceDesc.ServiceName,
		register: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return usersv1.RegisterUsersServiceHandlerClient(ctx, mux, usersv1.NewUsersServiceClient(conn))
		}},
	{Name: "access", GRPCService: accessv1.AccessService_ServiceDesc.ServiceName,
		register: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return accessv1.RegisterAccessServiceHandlerClient(ctx, mux, accessv1.NewAccessServiceClient(conn))
		}},
}

// Gateway is the HTTP handler of the whole API.
type Gateway struct {
	mux       *runtime.ServeMux
	log       *slog.Logger
	conns     map[string]grpc.ClientConnInterface
	getRoutes map[string]bool
}

// New returns a Gateway routing each service's operations to its connection. conns must hold a
// connection for every entry of Upstreams, keyed by Name.
func New(ctx context.Context, conns map[string]grpc.ClientConnInterface, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{log: log, conns: conns, getRoutes: map[string]bool{"/v2/workspace/email/verify": true}}
	g.mux = runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newEnvelopeCodec()),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithErrorHandler(errorHandler(log)),
		runtime.WithRoutingErrorHandler(g.routingErrorHandler),
		runtime.WithDisablePathLengthFallback(),
	)
	for _, u := range Upstreams {
		conn, ok := conns[u.Name]
		if !ok {
			return nil, fmt.Errorf("gateway: no connection for service %s", u.Name)
		}
		if err := u.register(ctx, g.mux, newDeferredConn(conn)); err != nil {
			return nil, fmt.Errorf("gateway: register %s: %w", u.Name, err)
		}
	}
	return g, nil
}

// incomingHeader forwards the API's own headers (credentials, request id) to gRPC metadata
// under their own names; grpc-gateway adds x-forwarded-for and x-forwarded-host itself.
func incomingHeader(key string) (string, bool) {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, "x-service-") || k == logging.RequestIDHeader {
		return k, true
	}
	return "", false
}

// statusRecorder remembers the status code for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(logging.RequestIDHeader)
	if !logging.ValidRequestID(id) {
		id = logging.NewRequestID()
	}
	r.Header.Set(logging.RequestIDHeader, id)
	// grpc-gateway forwards these whatever the header matcher says; the API's credentials are
	// the x-service-* headers, and deadlines and forwarding hosts are not the caller's to set.
	for _, h := range []string{"Authorization", "Grpc-Timeout", "X-Forwarded-Host"} {
		r.Header.Del(h)
	}
	w.Header().Set("X-Request-Id", id)
	ctx := logging.WithRequestID(r.Context(), id)
	r = r.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			g.log.ErrorContext(ctx, "panic in gateway", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rec.status == 0 {
				writeError(rec, http.StatusInternalServerError, codes.Internal, "Internal error.", nil)
			}
		}
		level := slog.LevelInfo
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			level = slog.LevelDebug
		}
		if !g.log.Enabled(ctx, level) {
			return
		}
		g.log.Log(ctx, level, "http", "method", r.Method, "path", r.URL.Path, "status", rec.status,
			"bytes", rec.bytes, "duration_ms", float64(time.Since(start).Microseconds())/1000)
	}()

	switch r.URL.Path {
	case "/healthz":
		writeJSON(rec, http.StatusOK, map[string]string{"status": "ok"})
		return
	case "/readyz":
		g.ready(rec, r)
		return
	case "/openapi.json":
		serveOpenAPI(rec, r)
		return
	case "/.well-known/jwks.json":
		g.jwks(rec, r)
		return
	}
	if r.Method != http.MethodPost && !(r.Method == http.MethodGet && g.getRoutes[r.URL.Path]) {
		// Let the mux tell an unknown path (404) from a wrong method on a known one (405).
		g.mux.ServeHTTP(rec, r)
		return
	}
	r.Body = http.MaxBytesReader(rec, r.Body, MaxBodyBytes)
	g.mux.ServeHTTP(rec, r)
}

// ready answers 200 when every service behind the gateway reports that it can reach its store.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	result := map[string]string{}
	ok := true
	for _, u := range Upstreams {
		resp, err := healthpb.NewHealthClient(g.conns[u.Name]).Check(ctx, &healthpb.HealthCheckRequest{Service: u.GRPCService})
		switch {
		case err != nil:
			result[u.Name] = "unreachable"
			ok = false
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			result[u.Name] = "not ready"
			ok = false
		default:
			result[u.Name] = "ready"
		}
	}
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
		g.log.WarnContext(ctx, "not ready", "services", result)
	}
	writeJSON(w, code, map[string]any{"status": map[bool]string{true: "ready", false: "not ready"}[ok], "services": result})
}

// jwks serves the access service's public keys as a bare JSON Web Key Set (RFC 7517), the
// form JOSE libraries fetch, without the API's result envelope.
func (g *Gateway) jwks(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, codes.Unimplemented, fmt.Sprintf("Method %s is not allowed here: use GET.", r.Method), nil)
		return
	}
	set, err := accessv1.NewAccessServiceClient(g.conns["access"]).GetJwks(r.Context(), &accessv1.GetJwksRequest{})
	if err != nil {
		errorHandler(g.log)(r.Context(), nil, nil, w, r, err)
		return
	}
	b, err := jsoncodec.Marshal(set, "", "")
	if err != nil {
		writeError(w, http.StatusInternalServerError, codes.Internal, "Internal error.", nil)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	// Keys rotate daily and stay listed for days after; a few minutes of caching is safe.
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
