package webhooks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/lifecycle"
)

// answerAll is an HTTP transport that answers every request 204 at once, counting them: the
// engine's own work per delivery, without the network's.
type answerAll struct{ n atomic.Int64 }

func (a *answerAll) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	a.n.Add(1)
	return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: req}, nil
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEngine measures the engine's own work per delivery on the memory store (fan-out,
// claims, reads, signing, records; the HTTP transport answers at once): one op is one delivery.
// Events are handed to the service while the engine runs, as in bench/webhooks. cpu-ns/delivery
// is the process's CPU time per delivery, which depends less on what else the machine runs
// than the time does.
func BenchmarkEngine(b *testing.B) {
	for _, endpoints := range []int{1, 100} {
		b.Run(fmt.Sprintf("%d endpoints", endpoints), func(b *testing.B) {
			srv, err := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true))
			if err != nil {
				b.Fatal(err)
			}
			tr := &answerAll{}
			srv.client = &http.Client{Transport: tr}
			caller := tenantCaller("k", "w")
			if _, err := srv.UpdateAdvancedWebhookConfig(caller, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
				b.Fatal(err)
			}
			for i := range endpoints {
				if _, err := srv.CreateEndpoint(caller, &webhooksv1.CreateEndpointRequest{Url: fmt.Sprintf("http://127.0.0.1:9/e%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
			data, _ := structpb.NewStruct(map[string]any{"text": "a comment of ordinary length, a sentence or two long"})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.RunDeliveries(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			events := max(b.N/endpoints, 1)
			want := int64(events * endpoints)
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range events {
				ev := &eventsv1.Event{Id: fmt.Sprintf("e%d", i), Type: "comment.add", ApiKey: "k", WorkspaceId: "w", OrganizationId: "o",
					Timestamp: float64(time.Now().UnixMilli()), Data: data}
				if err := srv.HandleEvent(context.Background(), lifecycle.Domain(ev)); err != nil {
					b.Fatal(err)
				}
			}
			for tr.n.Load() < want {
				time.Sleep(100 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(want), "ns/delivery")
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(want), "cpu-ns/delivery")
		})
	}
}
