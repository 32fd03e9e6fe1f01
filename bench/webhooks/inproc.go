package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/services/webhooks"
)

// inproc is the webhooks service in this process on a store, its engine running: events are
// handed to it as the events relay hands them (HandleEvent), so no HTTP publish path is in the
// measurement.
type inproc struct {
	srv    *webhooks.Server
	cancel context.CancelFunc
	done   chan struct{}
	stop   func() // the store's server, if any
	apiKey string
	caller context.Context
	data   *structpb.Struct
}

const publishers = 4

// errNotArrived says tenant A's test event did not arrive within a minute.
var errNotArrived = errors.New("fairness: A's test event did not arrive within a minute")

func newInproc(store webhooks.Store, stop func()) (*inproc, error) {
	srv, err := webhooks.New(store, webhooks.WithLogger(slog.New(slog.DiscardHandler)), webhooks.WithPrivateTargets(true))
	if err != nil {
		return nil, err
	}
	data, err := structpb.NewStruct(map[string]any{"text": "a comment of ordinary length, a sentence or two long"})
	if err != nil {
		return nil, err
	}
	p := &inproc{srv: srv, done: make(chan struct{}), stop: stop, apiKey: "benchkey", data: data}
	p.caller = tenantCaller(p.apiKey, "benchws")
	if _, err := srv.UpdateAdvancedWebhookConfig(p.caller, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { srv.RunDeliveries(ctx); close(p.done) }()
	return p, nil
}

func tenantCaller(apiKey, workspaceID string) context.Context {
	return authn.WithCaller(context.Background(), authn.Caller{APIKey: apiKey, WorkspaceID: workspaceID, Settings: authn.Settings{AdvancedWebhooks: true}})
}

// newMongoInproc is inproc on the MongoDB store of an embedded FerretDB in a fresh directory.
func newMongoInproc() (*inproc, error) {
	dir, err := os.MkdirTemp("", "bench-webhooks-ferretdb-")
	if err != nil {
		return nil, err
	}
	srv, err := embedmongo.Start(dir, embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	conn, err := mongodb.Connect(context.Background(), srv.URI())
	stop := func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
		srv.Stop()
		_ = os.RemoveAll(dir)
	}
	if err != nil {
		stop()
		return nil, err
	}
	store, err := webhooks.NewMongoStore(context.Background(), conn.Database("webhooks"))
	if err != nil {
		stop()
		return nil, err
	}
	return newInproc(store, stop)
}

func (p *inproc) close() {
	p.cancel()
	<-p.done
	if p.stop != nil {
		p.stop()
	}
}

func (p *inproc) createEndpoint(url string, filterTypes []string, rateLimit int) (string, error) {
	return p.createEndpointFor(p.caller, url, filterTypes, rateLimit)
}

func (p *inproc) createEndpointFor(caller context.Context, url string, filterTypes []string, rateLimit int) (string, error) {
	req := &webhooksv1.CreateEndpointRequest{Url: url}
	if filterTypes != nil {
		req.FilterTypes = strList(filterTypes)
	}
	if rateLimit > 0 {
		req.RateLimit = new(int32(rateLimit)) //nolint:gosec // G115: a flag of a few hundred at most
	}
	resp, err := p.srv.CreateEndpoint(caller, req)
	if err != nil {
		return "", err
	}
	return resp.GetData().GetId(), nil
}

func (p *inproc) deleteEndpoint(id string) error {
	_, err := p.srv.DeleteEndpoint(p.caller, &webhooksv1.DeleteEndpointRequest{EndpointId: id})
	return err
}

// publish hands n events of the type to the service from a few goroutines at once.
func (p *inproc) publish(prefix, typ string, n int) error {
	return p.publishFor(p.apiKey, "benchws", prefix, typ, n)
}

func (p *inproc) publishFor(apiKey, workspaceID, prefix, typ string, n int) error {
	var (
		wg     sync.WaitGroup
		failed atomic.Value
		next   atomic.Int64
	)
	for range publishers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ev := &eventsv1.Event{Id: fmt.Sprintf("%s%d", prefix, i), Type: typ, ApiKey: apiKey, WorkspaceId: workspaceID, OrganizationId: "bench",
					Timestamp: float64(time.Now().UnixMilli()), Data: p.data}
				if err := p.srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// testEventLatency is the fairness case: tenant B has 20 endpoints that never answer and
// publishes 30 events; once B's attempts hang, tenant A sends a test event to a healthy
// endpoint, and this returns how long it took to arrive.
func (p *inproc) testEventLatency(r *receiver) (time.Duration, error) {
	b := tenantCaller("benchB", "benchwsB")
	a := tenantCaller("benchA", "benchwsA")
	for _, c := range []context.Context{a, b} {
		if _, err := p.srv.UpdateAdvancedWebhookConfig(c, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
			return 0, err
		}
	}
	for range 20 {
		if _, err := p.createEndpointFor(b, r.addr+"/dead/fair", nil, 0); err != nil {
			return 0, err
		}
	}
	id, err := p.createEndpointFor(a, r.addr+"/fair", nil, 0)
	if err != nil {
		return 0, err
	}
	if err := p.publishFor("benchB", "benchwsB", "fairB", "comment.add", 30); err != nil {
		return 0, err
	}
	time.Sleep(200 * time.Millisecond) // B's attempts are hanging by then
	base := r.total.Load()
	start := time.Now()
	if _, err := p.srv.SendTestEvent(a, &webhooksv1.SendTestEventRequest{EndpointId: id}); err != nil {
		return 0, err
	}
	at, ok := r.waitFor(base, 1, time.Minute)
	if !ok {
		return 0, errNotArrived
	}
	return at.Sub(start), nil
}

func strList(v []string) *structpb.ListValue {
	l := &structpb.ListValue{}
	for _, s := range v {
		l.Values = append(l.Values, structpb.NewStringValue(s))
	}
	return l
}
