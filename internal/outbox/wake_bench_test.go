package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/testkit/mongotest"
	"github.com/collab/collab/internal/testkit/natstest"
	"github.com/collab/collab/internal/wakeup"
)

// signalDeliverer tells when each event reaches the lane.
type signalDeliverer struct{ got chan string }

func (s signalDeliverer) Deliver(_ context.Context, _ string, e *lifecyclev1.Event) error {
	s.got <- e.GetId()
	return nil
}

// BenchmarkCrossProcessDelivery measures how long an event published by one process takes to
// reach a consumer lane of another (docs/benchmarks.md, "Replicas that push"): two outboxes of
// one producer over one store, the first only publishing, the second running the lanes; each
// "process" has its own store handle and, with NATS, its own connection to a node of a 3-node
// cluster. Events go out at random moments of the lanes' one-second poll. Reports p50 and p99.
func BenchmarkCrossProcessDelivery(b *testing.B) {
	stores := map[string]func(b *testing.B) (Store, Store){
		"memory": func(*testing.B) (Store, Store) { s := NewMemoryStore(); return s, s },
		"ferretdb": func(b *testing.B) (Store, Store) {
			db := mongotest.Connect(b).Database("producer")
			var two []Store
			for range 2 {
				s, err := NewMongoStore(context.Background(), db)
				if err != nil {
					b.Fatal(err)
				}
				two = append(two, s)
			}
			return two[0], two[1]
		},
	}
	for _, store := range []string{"memory", "ferretdb"} {
		for _, wake := range []string{"poll", "nats"} {
			b.Run(store+"/"+wake, func(b *testing.B) {
				sa, sb := stores[store](b)
				var ba, bb wakeup.Bus
				if wake == "nats" {
					nodes := natstest.Cluster(b, 3)
					ba, bb = dialBus(b, nodes[0].ClientURL()), dialBus(b, nodes[1].ClientURL())
				}
				crossProcessLags(b, sa, sb, ba, bb)
			})
		}
	}
}

func dialBus(b *testing.B, url string) wakeup.Bus {
	bus, err := wakeup.DialNATS(wakeup.NATSConfig{URL: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bus.Close)
	return bus
}

// crossProcessLags publishes b.N events through a (store sa, bus ba) and times each one's
// arrival at the lane of b (store sb, bus bb); a nil bus means no wake-ups.
func crossProcessLags(b *testing.B, sa, sb Store, ba, bb wakeup.Bus) {
	quiet := WithLogger(slog.New(slog.DiscardHandler))
	optsA, optsB := []Option{quiet}, []Option{quiet}
	if ba != nil {
		optsA, optsB = append(optsA, WithWakeups(ba)), append(optsB, WithWakeups(bb))
	}
	a := New("events", sa, signalDeliverer{got: make(chan string, 1)}, To("activity"), optsA...)
	d := signalDeliverer{got: make(chan string, 16)}
	consumer := New("events", sb, d, To("activity"), optsB...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { consumer.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the lane's first round and its subscription
	lags := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second)))) // a moment in the poll's period
		id := fmt.Sprint("x", i)
		start := time.Now()
		if _, err := a.PublishAsync(ctx, &lifecyclev1.Event{Id: id, Type: "comment.add"}); err != nil {
			b.Fatal(err)
		}
		for got := range d.got {
			if got == id {
				break
			}
		}
		lags = append(lags, float64(time.Since(start).Microseconds())/1000)
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)/2], "p50-ms")
	b.ReportMetric(lags[min(len(lags)-1, len(lags)*99/100)], "p99-ms")
}
