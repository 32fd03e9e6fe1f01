package crdt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
	crdtv1 "github.com/collab/collab/proto/collab/crdt/v1"
	documentsv1 "github.com/collab/collab/proto/collab/documents/v1"

	"github.com/collab/collab/internal/service"
	"github.com/collab/collab/services/crdt/live"
)

// Module describes the CRDT service to the process that runs it. It asks documents for
// generations (and, for live sync, access for permissions), follows the lifecycle events of
// organizations and documents, and publishes crdt.update_data for every change.
func Module() service.Module {
	return service.Module{
		Name:        "crdt",
		GRPCService: crdtv1.CrdtService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return crdtv1.RegisterCrdtServiceHandlerClient(ctx, mux, crdtv1.NewCrdtServiceClient(conn))
		},
		Calls:     []string{"documents", "access"},
		Publishes: []string{eventUpdateData},
		Consumes:  consumes,
		// Live sync, a WebSocket per editor (build's Instance.Routes serves it).
		Routes:     []string{SyncPrefix},
		RoutesName: "Live sync",
		Setup: func(f *service.Flags) service.BuildFunc {
			recheck := live.DefaultRecheck
			f.Func("crdt-sync-recheck", live.DefaultRecheck.String(), "how often live sync asks again whether each open connection's token and role still hold (a revoked access, a reset token, a role change), from 10s; 0s: only when it connects",
				func(v string) error {
					d, err := time.ParseDuration(v)
					if err != nil || (d != 0 && d < 10*time.Second) || d > 24*time.Hour {
						return errors.New("must be 0s or a duration from 10s to 24h, e.g. 1m")
					}
					recheck = d
					return nil
				})
			return func(ctx context.Context, env service.Env) (*service.Instance, error) {
				if recheck == 0 {
					recheck = -1 // live.Config: negative is never
				}
				return build(ctx, env, recheck)
			}
		},
	}
}

func build(ctx context.Context, env service.Env, recheck time.Duration) (*service.Instance, error) {
	if env.Outbox == nil {
		return nil, errors.New("crdt: the process gave no outbox")
	}
	var store Store = NewMemoryStore()
	if env.Mongo != nil {
		s, err := NewMongoStore(ctx, env.Mongo.Database("crdt"))
		if err != nil {
			return nil, err
		}
		store = s
	}
	o, err := env.ObserveStore(Module().Name)
	if err != nil {
		return nil, err
	}
	store = observeStore(store, o) // after choosing it, so both kinds are observed
	sync := &liveSync{access: accessv1.NewAccessServiceClient(env.Conn("access")), log: env.Log}
	s, err := New(store, documentsv1.NewDocumentsServiceClient(env.Conn("documents")), env.Outbox,
		WithClock(env.Clock), WithLogger(env.Log), WithBroadcast(sync.broadcast), WithReload(sync.reload))
	if err != nil {
		return nil, err
	}
	sync.s = s
	sync.hub = live.New(live.Config{
		Log: sync, Authorize: sync.authorize, Changed: sync.changed, Logger: env.Log, Prefix: SyncPrefix,
		// The limits of Apply CRDT Update: one size for the data on every path.
		Limits:  untrusted,
		Recheck: recheck,
		// Wake-ups between replicas; with an engine, the store is read at the safety poll
		// only (docs/operations.md, "Wake-ups between replicas").
		Wakeup:     env.Wakeup,
		SafetyPoll: env.WakeupSafetyPoll,
	})
	hub := sync.hub
	stopGone := func() {}
	if env.Wakeup != nil {
		if stopGone, err = sync.followGone(env.Wakeup); err != nil {
			return nil, fmt.Errorf("crdt: follow lifecycle closings: %w", err)
		}
	}
	if err := registerGauges(env.Metrics,
		gauge{"collab_crdt_rooms", "Documents loaded for live sync on this process (rooms with connected clients, or idle ones not yet unloaded).", func() float64 { return float64(hub.Rooms()) }},
		gauge{"collab_crdt_connections", "Live-sync clients (WebSockets) connected to this process.", func() float64 { return float64(hub.Conns()) }},
	); err != nil {
		return nil, err
	}
	return &service.Instance{
		Register: func(r grpc.ServiceRegistrar) { crdtv1.RegisterCrdtServiceServer(r, s) },
		Ping:     s.Ping,
		Events:   s,
		Routes:   []service.Route{{Prefix: SyncPrefix, Handler: sync.hub}},
		Run: func(ctx context.Context) {
			<-ctx.Done()
			stopGone()
			sync.hub.Close()
		},
	}, nil
}

type gauge struct {
	name, help string
	value      func() float64
}

// registerGauges registers gauges read at scrape time.
func registerGauges(reg prometheus.Registerer, gs ...gauge) error {
	if reg == nil {
		return nil
	}
	for _, g := range gs {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, g.value)); err != nil {
			return fmt.Errorf("crdt: metric %s: %w", g.name, err)
		}
	}
	return nil
}
