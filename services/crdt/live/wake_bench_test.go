package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/natstest"
)

// BenchmarkReplicaLag measures how long an edit made through a client of replica A takes to
// reach the clients of replicas B and C (three hubs over one log): "poll", each room reading
// the log every 250 ms (DefaultPoll, no bus); "nats", wake-ups over an embedded 3-node NATS
// cluster (each replica on its own node) and a 5 s safety poll. Reported: p50 and p99 of the
// lags (ms), over every arrival of the run. docs/benchmarks.md, "Replicas that push".
func BenchmarkReplicaLag(b *testing.B) {
	for _, mode := range []string{"poll", "nats"} {
		b.Run(mode, func(b *testing.B) {
			log := &countingLog{}
			var rs []replica
			var wait func()
			if mode == "poll" {
				for range 3 {
					rs = append(rs, newReplica(b, log, nil, nil, DefaultPoll, 0))
				}
			} else {
				ss := natstest.Cluster(b, 3)
				base := subsOf(ss)
				for _, s := range ss {
					rs = append(rs, natsReplica(b, log, s.ClientURL(), DefaultPoll, 5*time.Second))
				}
				wait = func() { waitInterest(b, ss, base, 3) }
			}
			cs := make([]*client, 3)
			for i, r := range rs {
				cs[i] = dial(b, r.url+"o/d/e", "edit")
				waitSynced(b, cs[i])
			}
			if wait != nil {
				wait() // every room's subscription known to every node
			}
			lags := replicaLags(b, cs)
			b.ReportMetric(percentile(lags, 50), "p50-ms")
			b.ReportMetric(percentile(lags, 99), "p99-ms")
		})
	}
}

// replicaLags makes b.N edits through cs[0] and returns the lag of each arrival at the others.
func replicaLags(b *testing.B, cs []*client) []float64 {
	var lags []float64
	b.ResetTimer()
	for i := range b.N {
		want := "edit " + strconv.Itoa(i)
		// At a random moment of the poll's period, as edits come: not just after a tick.
		b.StopTimer()
		time.Sleep(rand.N(DefaultPoll))
		b.StartTimer()
		start := time.Now()
		cs[0].edit(want)
		var wg sync.WaitGroup
		got := make([]float64, len(cs)-1)
		for j, c := range cs[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(10 * time.Second)
				for c.text() != want {
					if time.Now().After(deadline) {
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
				got[j] = float64(time.Since(start).Microseconds()) / 1000
			}()
		}
		wg.Wait()
		for _, g := range got {
			if g == 0 {
				b.Fatalf("edit %d did not arrive", i)
			}
		}
		lags = append(lags, got...)
	}
	b.StopTimer()
	return lags
}

func percentile(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkIdleRoomReads measures the log reads per second of loaded idle rooms (nobody
// edits): "poll" reads every 250 ms, "nats" only at the 5 s safety poll. Each b.N is one
// second of watching; COLLAB_BENCH_ROOMS sets the rooms (2000).
func BenchmarkIdleRoomReads(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("COLLAB_BENCH_ROOMS")); err == nil && v > 0 {
		n = v
	}
	for _, mode := range []string{"poll", "nats"} {
		b.Run(fmt.Sprintf("%s/rooms=%d", mode, n), func(b *testing.B) {
			log := &countingLog{}
			var r replica
			if mode == "poll" {
				r = newReplica(b, log, nil, nil, DefaultPoll, 0)
			} else {
				r = natsReplica(b, log, natstest.Server(b, natstest.Options{}).ClientURL(), 0, 5*time.Second) // the default tick
			}
			for i := range n {
				if _, err := r.hub.join(context.Background(), "o/d/"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			// Past the first safety poll, so that its reads are counted in their share.
			time.Sleep(time.Second)
			before, start, cpu := log.reads.Load(), time.Now(), cpuTime(b)
			for range b.N {
				time.Sleep(time.Second)
			}
			elapsed := time.Since(start)
			perSec := float64(log.reads.Load()-before) / elapsed.Seconds()
			b.ReportMetric(perSec, "reads/s")
			// The process's CPU while the rooms idle: their timers' work and the reads.
			b.ReportMetric(100*(cpuTime(b)-cpu).Seconds()/elapsed.Seconds(), "cpu-%")
			b.ReportMetric(perSec/float64(n), "reads/s/room")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
