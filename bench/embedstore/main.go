// Command embedstore measures the write throughput of the embedded store (internal/embedmongo:
// FerretDB on SQLite, the store of a --data-dir run) through the services' real MongoDB stores,
// with concurrent writers (issue 20, finding 1):
//
//   - one record: every writer updates the same workspace (Update Workspace Settings, a
//     findAndModify of one document);
//   - own records: each writer updates a workspace of its own, in the same database;
//   - inserts: each writer inserts activity records (Insert, one record per call);
//   - two databases: half the writers update workspaces of their own, the other half users
//     (Update Users: an upsert), each service in its database as in a real run.
//
// Each case runs -rounds times for -duration; the table gives the median round's writes per
// second, the mean latency of a write, and that round's process CPU time (user and system) and
// Go allocations per write: the driver's, the proxy's and FerretDB's, all in this process. The
// CPU time a write costs depends far less on what else runs on the machine than its rate does.
// It prints a markdown table for docs/benchmarks.md.
//
//	go run ./bench/embedstore [-duration 3s] [-writers 8] [-rounds 3]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/collab/collab/internal/embedmongo"
	"github.com/collab/collab/internal/mongodb"
	"github.com/collab/collab/services/activity"
	"github.com/collab/collab/services/users"
	"github.com/collab/collab/services/workspace"
)

func main() {
	duration := flag.Duration("duration", 3*time.Second, "how long each round of a case runs")
	writers := flag.Int("writers", 8, "concurrent writers")
	rounds := flag.Int("rounds", 3, "rounds of each case (the median is reported)")
	flag.Parse()
	if err := run(os.Stdout, *duration, *writers, *rounds); err != nil {
		log.Fatal(err)
	}
}

// result is one round of a case.
type result struct {
	writes  int64
	elapsed time.Duration
	cpu     time.Duration
	allocs  uint64
}

func (r result) perSecond() float64 { return float64(r.writes) / r.elapsed.Seconds() }

// writeFunc is one writer's call number n.
type writeFunc func(ctx context.Context, writer, n int) error

type benchCase struct {
	name  string
	write writeFunc
}

func run(out io.Writer, duration time.Duration, writers, rounds int) error {
	dir, err := os.MkdirTemp("", "collab-embedstore-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	srv, err := embedmongo.Start(dir, embedmongo.QuietLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx := context.Background()
	conn, err := mongodb.Connect(ctx, srv.URI())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	cases, err := setup(ctx, conn, writers)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "%d writers, %d rounds of %v, GOMAXPROCS %d\n\n", writers, rounds, duration, runtime.GOMAXPROCS(0))
	_, _ = fmt.Fprintln(out, "| case | writes/s (median) | mean latency | CPU/write | allocs/write | rounds (writes/s) |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, c := range cases {
		var rs []result
		for range rounds {
			r, err := measure(ctx, c.write, writers, duration)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			rs = append(rs, r)
		}
		slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.perSecond(), b.perSecond()) })
		med := rs[len(rs)/2]
		all := ""
		for _, r := range rs {
			all += fmt.Sprintf(" %.0f", r.perSecond())
		}
		n := max(med.writes, 1)
		_, _ = fmt.Fprintf(out, "| %s | %.0f | %v | %v | %d |%s |\n", c.name, med.perSecond(),
			(med.elapsed * time.Duration(writers) / time.Duration(n)).Round(10*time.Microsecond),
			(med.cpu / time.Duration(n)).Round(time.Microsecond), med.allocs/uint64(n), all)
	}
	return nil
}

// setup makes the stores and the records the cases write to.
func setup(ctx context.Context, conn *mongodb.Conn, writers int) ([]benchCase, error) {
	ws, err := workspace.NewMongoStore(ctx, conn.Database("workspace"))
	if err != nil {
		return nil, err
	}
	act, err := activity.NewMongoStore(ctx, conn.Database("activity"))
	if err != nil {
		return nil, err
	}
	us, err := users.NewMongoStore(ctx, conn.Database("users"))
	if err != nil {
		return nil, err
	}
	created := time.Now().UTC().Truncate(time.Millisecond)
	for i := range writers {
		id := fmt.Sprintf("ws%d", i)
		w := &workspace.Workspace{ID: id, Name: "W", OwnerEmail: id + "@example.com", CreatedAt: created}
		k := &workspace.APIKey{Key: "key" + id, WorkspaceID: id, CreatedAt: created}
		if err := ws.CreateWorkspace(ctx, w, k); err != nil {
			return nil, err
		}
	}
	var inserted atomic.Int64
	return []benchCase{
		{"one record", func(ctx context.Context, _, n int) error {
			url := fmt.Sprintf("https://hooks.slack.com/services/T/B/%d", n)
			_, err := ws.UpdateSettings(ctx, "ws0", workspace.SettingsPatch{SlackWebhookURL: &url})
			return err
		}},
		{"own records", func(ctx context.Context, w, n int) error {
			url := fmt.Sprintf("https://hooks.slack.com/services/T/B/%d", n)
			_, err := ws.UpdateSettings(ctx, fmt.Sprintf("ws%d", w), workspace.SettingsPatch{SlackWebhookURL: &url})
			return err
		}},
		{"inserts", func(ctx context.Context, _, _ int) error {
			id := fmt.Sprintf("a%d", inserted.Add(1))
			_, err := act.Insert(ctx, []*activity.Record{{APIKey: "k", OrganizationID: "o", ID: id, DocumentID: "d",
				FeatureType: "comment", ActionType: "add", ActionUser: activity.User{UserID: "u"}, Timestamp: time.Now().UnixMilli()}})
			return err
		}},
		{"two databases", func(ctx context.Context, w, n int) error {
			name := fmt.Sprint("name ", n)
			if w%2 == 1 {
				return us.UpsertUser(ctx, "k", users.UserPatch{UserID: fmt.Sprint("u", w), Name: &name})
			}
			_, err := ws.UpdateSettings(ctx, fmt.Sprintf("ws%d", w), workspace.SettingsPatch{SlackWebhookURL: &name})
			return err
		}},
	}, nil
}

// measure runs write from writers goroutines for d.
func measure(ctx context.Context, write writeFunc, writers int, d time.Duration) (result, error) {
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	cpu0 := cpuTime()
	var (
		total    atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				if err := write(ctx, w, n); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	return result{writes: total.Load(), elapsed: elapsed, cpu: cpu, allocs: ms1.Mallocs - ms0.Mallocs}, firstErr
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
