package grpcserver

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health is the standard gRPC health service, answering from live checks (a store ping) at the
// time of the question rather than from a status set in the background.
type Health struct {
	healthpb.UnimplementedHealthServer

	mu     sync.RWMutex
	checks map[string]func(context.Context) error
}

// NewHealth returns a Health with no checks; the overall service "" is always known.
func NewHealth() *Health { return &Health{checks: map[string]func(context.Context) error{}} }

// Add registers the readiness check of a service (its full gRPC name).
func (h *Health) Add(service string, check func(context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[service] = check
}

// Check runs the service's check, or every check for the service "".
func (h *Health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.mu.RLock()
	var checks []func(context.Context) error
	if req.GetService() == "" {
		for _, c := range h.checks {
			checks = append(checks, c)
		}
	} else if c, ok := h.checks[req.GetService()]; ok {
		checks = append(checks, c)
	}
	h.mu.RUnlock()
	if req.GetService() != "" && len(checks) == 0 {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, c := range checks {
		if err := c(ctx); err != nil {
			return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}
