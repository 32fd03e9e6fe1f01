// Package metrics holds a process's Prometheus registry and the series every request passes:
// per-RPC counts and latency (the maintained go-grpc-middleware provider, in the interceptor
// chain, so TCP and in-process calls alike) and per-route HTTP counts and latency at the
// gateway. Each process has its own registry, never the global default, so several processes
// in one test binary do not collide; it is served on a listener of its own (--metrics-addr),
// never on the public HTTP port.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Registry is one process's metrics.
type Registry struct {
	reg    *prometheus.Registry
	rpc    *grpcprom.ServerMetrics
	client *grpcprom.ClientMetrics
	http   *HTTP
	store  *storeCommands
}

// New returns a registry with the Go runtime and process collectors, the gRPC server metrics
// and the gateway's HTTP metrics registered.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rpc := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
	))
	reg.MustRegister(rpc)
	client := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
	))
	reg.MustRegister(client)
	h := newHTTP()
	reg.MustRegister(h.requests, h.duration)
	st := newStoreCommands()
	reg.MustRegister(st.seconds)
	return &Registry{reg: reg, rpc: rpc, client: client, http: h, store: st}
}

// Registerer is where services register their own series (service.Env.Metrics).
func (r *Registry) Registerer() prometheus.Registerer { return r.reg }

// UnaryServerInterceptor counts and times every unary call: grpc_server_started_total,
// grpc_server_handled_total{grpc_code}, grpc_server_handling_seconds, by grpc_service and
// grpc_method.
func (r *Registry) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return r.rpc.UnaryServerInterceptor()
}

// UnaryClientInterceptor counts and times calls to services in other processes, as the caller
// sees them (the network included): grpc_client_started_total, grpc_client_handled_total
// {grpc_code}, grpc_client_handling_seconds.
func (r *Registry) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return r.client.UnaryClientInterceptor()
}

// HTTP returns the gateway's HTTP request metrics.
func (r *Registry) HTTP() *HTTP { return r.http }

// Handler serves the registry in the Prometheus exposition format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Serve listens on addr and serves /metrics there until the returned stop function is called.
// It returns the bound address.
func (r *Registry) Serve(addr string, log *slog.Logger, errs chan<- error, extra ...Route) (string, func(context.Context) error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.Handler())
	for _, rt := range extra {
		mux.Handle(rt.Pattern, rt.Handler)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			select {
			case errs <- fmt.Errorf("metrics server: %w", err):
			default:
			}
		}
	}()
	return ln.Addr().String(), hs.Shutdown, nil
}

// Route is another handler of the metrics listener (the process's probes: /healthz, /readyz).
type Route struct {
	Pattern string // http.ServeMux's, e.g. "GET /readyz"
	Handler http.Handler
}

// HTTP counts and times the gateway's requests by route template (the operation's path
// pattern, never the raw path), method and status class, so the label sets stay bounded.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTP() *HTTP {
	return &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "collab_http_requests_total",
			Help: "HTTP requests the gateway answered, by route template, method and status class (2xx, 4xx, 5xx).",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "collab_http_request_duration_seconds",
			Help:    "Time the gateway took to answer, by route template and method.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
}

// Observe records one answered request. route must come from a bounded set (a route template,
// a fixed path, or "other"); unknown methods are counted as OTHER.
func (h *HTTP) Observe(route, method string, status int, d time.Duration) {
	if h == nil {
		return
	}
	method = knownMethod(method)
	h.requests.WithLabelValues(route, method, statusClass(status)).Inc()
	h.duration.WithLabelValues(route, method).Observe(d.Seconds())
}

func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
		return m
	}
	return "OTHER"
}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}
