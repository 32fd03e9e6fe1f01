package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/gateway/jsoncodec"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/logging"
	"github.com/collab/collab/internal/tracing"
)

// Upstream is one service the gateway routes to; the process builds the list from the service
// modules (service.Module), so the gateway knows no service by heart.
type Upstream struct {
	// Name is the service's short name ("workspace").
	Name string
	// GRPCService is its full gRPC name, used for readiness.
	GRPCService string
	// Register adds its HTTP routes (grpc-gateway's generated Register...HandlerClient).
	Register func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error
	// Conn reaches the service, in process or at a peer.
	Conn grpc.ClientConnInterface
}

// Gateway is the HTTP handler of the whole API.
type Gateway struct {
	mux *runtime.ServeMux
	// operations maps each operation of http_rules.yaml to its handler (routes.go).
	operations map[operation]runtime.HandlerFunc
	log        *slog.Logger
	upstreams  []Upstream
	getRoutes  map[string]bool
	metrics    Observer
	// traced is the gateway wrapped in the HTTP server spans (SetTracing), nil without.
	traced http.Handler
	// bodies is what is left of MaxBodyBytesInFlight (body.go).
	bodies *bodyBudget
}

// Observer records each answered request (internal/metrics.HTTP): route is the operation's
// path template ("/v2/documents/get"), a fixed path the gateway serves itself, or "other" for
// what no route matched, so its values stay bounded whatever callers send.
type Observer interface {
	Observe(route, method string, status int, d time.Duration)
}

// SetMetrics makes the gateway report every request to o; call it before serving.
func (g *Gateway) SetMetrics(o Observer) { g.metrics = o }

// SetTracing makes the gateway start a server span for every request on tp (otelhttp), named
// by its method and route template ("POST /v2/documents/get"), never the raw path; the calls
// it makes to the services are its children. A caller's W3C traceparent header does not become
// the parent: the API is public, so each request starts a trace of our own, sampled by our
// ratio alone, and the caller's trace is only linked. Call it before serving.
func (g *Gateway) SetTracing(tp trace.TracerProvider) {
	g.traced = otelhttp.NewHandler(http.HandlerFunc(g.serve), "http",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(noopmetric.NewMeterProvider()), // the metrics are internal/metrics'
		otelhttp.WithPropagators(tracing.Propagator),
		otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }),
		// Probes come every few seconds and would bury real requests' traces.
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" && r.URL.Path != "/readyz" }),
		// Called at the start, and again at the end when a ServeMux in front of the gateway
		// set r.Pattern ("/"): then the name serve found, with the route, must win.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if name, ok := r.Context().Value(spanNameKey{}).(*string); ok && *name != "" {
				return *name
			}
			return spanMethod(r.Method)
		}),
	)
}

// spanMethod is the method as a span name holds it: the caller chooses the method's text, so
// any but HTTP's own is _OTHER (OpenTelemetry's convention), or span names would be unbounded.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// spanNameKey carries a *string that serve fills with the request's span name.
type spanNameKey struct{}

// exchange is what serve keeps of one request, in one allocation: the response writer that
// records the status, the response's buffers, and the route's template.
type exchange struct {
	statusRecorder
	buffers responseBuffers
	route   string
	body    budgetedBody
}

// exchangeKey carries the request's *exchange.
type exchangeKey struct{}

// routeTemplate is a metadata annotator of the mux of all routes: grpc-gateway calls it with
// the matched operation's path pattern in the context, which it hands back to ServeHTTP for the
// metrics. An operation found by its exact path (routes.go) has that path as template.
func routeTemplate(ctx context.Context, r *http.Request) metadata.MD {
	if x, ok := r.Context().Value(exchangeKey{}).(*exchange); ok {
		if p, ok := runtime.HTTPPathPattern(ctx); ok {
			x.route = p
		}
	}
	return nil
}

// New returns a Gateway routing each upstream's operations to its connection, in the order
// given.
func New(ctx context.Context, upstreams []Upstream, log *slog.Logger) (*Gateway, error) {
	g := &Gateway{log: log, bodies: newBodyBudget(MaxBodyBytesInFlight), upstreams: upstreams, getRoutes: map[string]bool{"/v2/workspace/email/verify": true}, operations: map[operation]runtime.HandlerFunc{}}
	options := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newEnvelopeCodec()),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithErrorHandler(errorHandler(log)),
		runtime.WithRoutingErrorHandler(g.routingErrorHandler),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithForwardResponseRewriter(pooledAnswers),
		// The answer's length is known before it is written: clients read a Content-Length
		// body more cheaply than a chunked one.
		runtime.WithWriteContentLength(),
	}
	rules, err := rulesByService()
	if err != nil {
		return nil, err
	}
	// An annotator costs every request a copy of its metadata, so only the mux of all routes,
	// which serves no operation found by its exact path, has the one finding the template.
	g.mux = runtime.NewServeMux(append(slices.Clip(options), runtime.WithMetadata(routeTemplate))...)
	for _, u := range upstreams {
		if u.Conn == nil || u.Register == nil {
			return nil, fmt.Errorf("gateway: no connection or routes for service %s", u.Name)
		}
		conn := newDeferredConn(u.Conn)
		if err := u.Register(ctx, g.mux, conn); err != nil {
			return nil, fmt.Errorf("gateway: register %s: %w", u.Name, err)
		}
		ops, err := serviceOperations(ctx, u, conn, options, rules[u.GRPCService])
		if err != nil {
			return nil, err
		}
		maps.Copy(g.operations, ops)
	}
	return g, nil
}

// incomingHeader forwards the API's own headers (credentials, request id) to gRPC metadata
// under their own names; grpc-gateway adds x-forwarded-for and x-forwarded-host itself.
func incomingHeader(key string) (string, bool) {
	// Every header of every request passes here: decide before allocating a lower-case copy,
	// and allocate none for the credentials and the request id.
	const prefix = "x-service-"
	if len(key) > len(prefix) && strings.EqualFold(key[:len(prefix)], prefix) || strings.EqualFold(key, logging.RequestIDHeader) {
		for _, known := range forwardedHeaders {
			if strings.EqualFold(key, known) {
				return known, true
			}
		}
		return strings.ToLower(key), true
	}
	return "", false
}

// forwardedHeaders are the headers incomingHeader forwards on most requests, in lower case.
var forwardedHeaders = []string{
	authn.HeaderAPIKey, authn.HeaderAuthToken, authn.HeaderWorkspaceID, authn.HeaderWorkspaceToken, logging.RequestIDHeader,
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

// Write writes an answer in pieces of at most answerPiece, each within answerWriteTimeout:
// the HTTP server has no write timeout (it also serves long streams), so a client that asked
// for a large answer and never read it held the answer, the request's buffers and its
// goroutine for ever (review of attack pass 26; docs/operations.md, "HTTP listener"). The
// deadline runs only while a piece is being written and is cleared after, so a slow client
// that keeps reading is not cut, and a keep-alive connection's next request starts without
// it. What the server still buffers when the handler returns (a few KiB) goes to the kernel's
// socket buffer, or fails at once on a connection whose write timed out.
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	d := writeDeadliner(r.ResponseWriter)
	if d == nil {
		n, err := r.ResponseWriter.Write(b)
		r.bytes += n
		return n, err
	}
	defer func() { _ = d.SetWriteDeadline(time.Time{}) }()
	written := 0
	for len(b) > 0 {
		piece := b[:min(len(b), answerPiece)]
		_ = d.SetWriteDeadline(time.Now().Add(answerWriteTimeout))
		n, err := r.ResponseWriter.Write(piece)
		written += n
		r.bytes += n
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// answerWriteTimeout is how long a piece of an answer (answerPiece) may take to be written;
// a variable for tests.
var answerWriteTimeout = 30 * time.Second

// answerPiece is the most of an answer written under one deadline: 64 KiB in 30 s is about
// 17 kbit/s, below any client that reads.
const answerPiece = 64 << 10

// writeDeadliner is the server's writer under w that takes write deadlines (as
// http.ResponseController finds it, without its allocation), or nil.
func writeDeadliner(w http.ResponseWriter) interface{ SetWriteDeadline(time.Time) error } {
	for {
		switch t := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.traced != nil {
		g.traced.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), spanNameKey{}, new(string))))
		return
	}
	g.serve(w, r)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(logging.RequestIDHeader)
	if !logging.ValidRequestID(id) {
		id = logging.NewRequestID()
	}
	// The request's header goes to the services' metadata, the response's to the caller; one
	// slice serves both, under the canonical key that Set would compute each time.
	ids := []string{id}
	r.Header[requestIDKey] = ids
	// An end user's JWT in Authorization: Bearer travels as x-service-user-token, which only
	// the operations that take end users read (docs/api.md, "Authentication").
	if v := authn.BearerToken(r.Header.Get("Authorization")); v != "" && r.Header.Get(authn.HeaderUserToken) == "" {
		r.Header.Set(authn.HeaderUserToken, v)
	}
	// grpc-gateway forwards these whatever the header matcher says; the API's credentials are
	// the x-service-* headers, and deadlines and forwarding hosts are not the caller's to set.
	for _, h := range []string{"Authorization", "Grpc-Timeout", "X-Forwarded-Host"} {
		r.Header.Del(h)
	}
	w.Header()[requestIDKey] = ids
	x := &exchange{statusRecorder: statusRecorder{ResponseWriter: w}, route: "other"}
	defer x.buffers.release() // runs after the access log below: the response is written by then
	ctx := context.WithValue(logging.WithRequestID(r.Context(), id), exchangeKey{}, x)
	switch r.URL.Path {
	case "/healthz", "/readyz", "/openapi.json", "/.well-known/jwks.json":
		x.route = r.URL.Path
	}
	r = r.WithContext(ctx)
	rec := &x.statusRecorder
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			g.log.ErrorContext(ctx, "panic in gateway", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rec.status == 0 {
				writeError(rec, http.StatusInternalServerError, codes.Internal, "Internal error.", nil)
			}
		}
		if g.metrics != nil {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			g.metrics.Observe(x.route, r.Method, status, time.Since(start))
		}
		if g.traced != nil {
			span := trace.SpanFromContext(ctx)
			name := spanMethod(r.Method) + " " + x.route
			span.SetName(name)
			if dst, ok := ctx.Value(spanNameKey{}).(*string); ok {
				*dst = name
			}
			span.SetAttributes(semconv.HTTPRoute(x.route), attribute.String("collab.request_id", id))
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
	g.call(x, r)
}

// call runs an operation: its body is read within the bodies' budget (body.go), up to
// MaxBodyBytes, and what it took is given back once decoded (codec.go), or else once answered.
func (g *Gateway) call(x *exchange, r *http.Request) {
	rec := &x.statusRecorder
	x.body = budgetedBody{ReadCloser: http.MaxBytesReader(rec, r.Body, MaxBodyBytes), size: r.ContentLength, budget: g.bodies}
	defer x.body.release()
	r.Body = &x.body
	if h, ok := g.operation(r); ok {
		x.route = r.URL.Path
		h(rec, r, nil) // what the mux would do once matched: literal paths have no parameters
		return
	}
	g.mux.ServeHTTP(rec, r)
}

// requestIDKey is logging.RequestIDHeader as a canonical header key.
var requestIDKey = http.CanonicalHeaderKey(logging.RequestIDHeader)

// ready answers 200 when every service behind the gateway reports that it can reach its store.
func (g *Gateway) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	result := map[string]string{}
	ok := true
	for _, u := range g.upstreams {
		resp, err := healthpb.NewHealthClient(u.Conn).Check(ctx, &healthpb.HealthCheckRequest{Service: u.GRPCService})
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
	conn := g.conn("access")
	if conn == nil {
		writeError(w, http.StatusNotFound, codes.NotFound, "No key set here: the access service is not behind this gateway.", nil)
		return
	}
	set, err := accessv1.NewAccessServiceClient(conn).GetJwks(r.Context(), &accessv1.GetJwksRequest{})
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

// conn returns the connection of the named upstream, or nil.
func (g *Gateway) conn(name string) grpc.ClientConnInterface {
	for _, u := range g.upstreams {
		if u.Name == name {
			return u.Conn
		}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
