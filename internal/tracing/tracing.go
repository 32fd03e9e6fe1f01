// Package tracing holds a process's OpenTelemetry tracing: the TracerProvider built from the
// flags (OTLP export, sampling), and the gRPC interceptors that start a span for every RPC and
// carry the W3C trace context in gRPC metadata, for TCP and in-process calls alike. Tracing is
// off unless an OTLP endpoint (or, in tests, an exporter) is given; off, the process installs
// none of this and services get no-op tracers (service.Env.Tracer).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// ServiceName is the resource's service.name: one product, whatever subset of services a
// process runs (those are in the collab.services attribute).
const ServiceName = "collab"

// ServicesKey is the resource attribute listing the services a process runs.
const ServicesKey = attribute.Key("collab.services")

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector: host:port (TLS), https://host:port (TLS) or
	// http://host:port (plain text, for a collector on the same host or network). Empty with no
	// Exporter: tracing is off.
	Endpoint string
	// SampleRatio is the share of new traces recorded (0 to 1); a span whose parent was
	// sampled, or not, follows its parent, so a trace is whole or absent.
	SampleRatio float64
	// Services are the services the process runs, for the resource.
	Services []string
	// Exporter replaces the OTLP exporter (tests: tracetest.InMemoryExporter); spans are then
	// exported synchronously as each ends, so a test reads them as soon as a call returns.
	Exporter sdktrace.SpanExporter
	// Log receives the OTLP exporter's failures (a collector down); nil: slog.Default().
	Log *slog.Logger
}

// MaxAttributeLength bounds each span attribute's value, in bytes: enough for any route, id or
// ordinary user agent, and a span stays small whatever a caller sends.
const MaxAttributeLength = 1024

// On reports whether the configuration turns tracing on.
func (c Config) On() bool { return c.Endpoint != "" || c.Exporter != nil }

// NewProvider builds the process's TracerProvider, or returns nil when tracing is off. Its
// Shutdown flushes the spans not yet exported; the process calls it after its servers stop.
// Connecting to the collector is lazy: a collector that is down loses spans (the exporter
// retries, then drops them), never requests.
func NewProvider(ctx context.Context, cfg Config) (*sdktrace.TracerProvider, error) {
	if !cfg.On() {
		return nil, nil
	}
	// Written so that NaN, which every comparison refuses, is refused too.
	if !(cfg.SampleRatio >= 0 && cfg.SampleRatio <= 1) {
		return nil, fmt.Errorf("tracing: sample ratio %v is not between 0 and 1", cfg.SampleRatio)
	}
	res := resource.NewSchemaless(semconv.ServiceName(ServiceName), ServicesKey.StringSlice(cfg.Services))
	// The SDK keeps attribute values whole by default; ours hold callers' text (paths, user
	// agents), so they are cut, lower if OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT asks.
	// A 0 (or negative) length from the environment would mean "unlimited" to the SDK: it gets
	// our cap as well. The limits are given raw, so the SDK does not turn a 0 back into its
	// unlimited default.
	limits := sdktrace.NewSpanLimits()
	if limits.AttributeValueLengthLimit <= 0 || limits.AttributeValueLengthLimit > MaxAttributeLength {
		limits.AttributeValueLengthLimit = MaxAttributeLength
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	}
	if cfg.Exporter != nil {
		opts = append(opts, sdktrace.WithSyncer(cfg.Exporter))
	} else {
		endpoint, err := ParseEndpoint(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
		}
		log := cfg.Log
		if log == nil {
			log = slog.Default()
		}
		opts = append(opts, sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, log: log}))
	}
	return sdktrace.NewTracerProvider(opts...), nil
}

// ParseEndpoint reads an OTLP endpoint as a URL with scheme, host and port: host:port means
// TLS (https), so plain text is only ever asked for by name (http://).
func ParseEndpoint(v string) (string, error) {
	const want = "want host:port, https://host:port or http://host:port"
	if !strings.Contains(v, "://") {
		v = "https://" + v
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		// Not wrapped: url.Parse's error repeats the text, credentials and all, into the log.
		return "", fmt.Errorf("tracing: OTLP endpoint: %s, got something that is not a URL", want)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("tracing: OTLP endpoint: %s, got the scheme %q", want, u.Scheme)
	case u.Hostname() == "":
		return "", fmt.Errorf("tracing: OTLP endpoint: %s, got no host", want)
	case u.User != nil:
		return "", errors.New("tracing: OTLP endpoint: credentials do not belong in the URL (set OTEL_EXPORTER_OTLP_HEADERS)")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return "", fmt.Errorf("tracing: OTLP endpoint: %s, got a path, query or fragment", want)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 || port > 65535 {
		return "", fmt.Errorf("tracing: OTLP endpoint: %s, got no valid port (OTLP/gRPC listens on 4317)", want)
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), u.Port()), nil
}

// Propagator is the one format trace context travels in, in gRPC metadata and stored events:
// W3C Trace Context (traceparent, tracestate).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}
