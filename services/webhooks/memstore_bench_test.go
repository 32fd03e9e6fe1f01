package webhooks

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkQueue measures the delivery engine's loop on the memory store: DueDeliveries (64 at
// a time), then ClaimDelivery and FinishDelivery of each, until 100,000 pending deliveries
// across 100 endpoints are drained. One op is one whole drain; ns/delivery and allocs/delivery
// are per delivery sent (claimed and finished).
//
//   - all: every delivery succeeds.
//   - half-busy: 50 of the endpoints are busy, so every DueDeliveries walks past their 50,000
//     due deliveries; the other 50,000 are sent.
//   - retry: every delivery fails and is retried a minute later (pending again, back into its
//     endpoint's queue).
func BenchmarkQueue(b *testing.B) {
	const (
		total     = 100_000
		endpoints = 100
		batch     = 64
	)
	for _, c := range []struct {
		name  string
		busy  int
		retry bool
	}{{"all", 0, false}, {"half-busy", endpoints / 2, false}, {"retry", 0, true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			now := t0
			busy := map[string]bool{}
			for i := range c.busy {
				busy[fmt.Sprintf("ep%03d", i)] = true
			}
			want := total * (endpoints - c.busy) / endpoints
			var (
				sent    int
				mallocs uint64
				ms      runtime.MemStats
			)
			b.StopTimer()
			for range b.N {
				s := NewMemoryStore()
				ds := make([]*Delivery, 0, 1000)
				for i := range total {
					// Due over the last 100 s, endpoints and times interleaved.
					ds = append(ds, delivery("k1", fmt.Sprintf("m%06d", i), fmt.Sprintf("ep%03d", i%endpoints),
						now.Add(-time.Duration(total-i)*time.Millisecond), created(now)))
					if len(ds) == cap(ds) {
						must(b, s.QueueDeliveries(ctx, ds))
						ds = ds[:0]
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				before := ms.Mallocs
				b.StartTimer()
				n := 0
				for {
					due, err := s.DueDeliveries(ctx, now, batch, busyRoom(busy))
					if err != nil {
						b.Fatal(err)
					}
					if len(due) == 0 {
						break
					}
					for _, d := range due {
						ok, err := s.ClaimDelivery(ctx, d.ID, now, now.Add(30*time.Second))
						if err != nil || !ok {
							b.Fatalf("claim %s: %v %v", d.ID, ok, err)
						}
						if c.retry {
							err = s.FinishDelivery(ctx, d.ID, StatePending, d.Attempts+1, now.Add(time.Minute), now)
						} else {
							err = s.FinishDelivery(ctx, d.ID, StateSuccess, d.Attempts+1, now, now)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					n += len(due)
				}
				b.StopTimer()
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				if n != want {
					b.Fatalf("sent %d, want %d", n, want)
				}
				sent += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(sent), "ns/delivery")
			b.ReportMetric(float64(mallocs)/float64(sent), "allocs/delivery")
		})
	}
}
