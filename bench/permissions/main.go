// Command permissions measures Get Permissions through the HTTP gateway and directly over gRPC
// on the memory store: 1 user × 30 documents and 100 users × 30 documents, each for a fixed
// time with a fixed number of concurrent callers. It prints a markdown table for
// docs/benchmarks.md.
//
//	go run ./bench/permissions [-duration 10s] [-concurrency 8]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each case runs")
	concurrency := flag.Int("concurrency", 8, "concurrent callers")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write CPU profiles of each case and path to <file>.<users>.<http|grpc>")
	flag.Parse()
	if err := run(*duration, *concurrency); err != nil {
		log.Fatal(err)
	}
}

var cpuProfile string

// rounds is how many alternating rounds each path runs.
const rounds = 5

type result struct {
	requests int64
	elapsed  time.Duration
	samples  []time.Duration
	p50, p99 time.Duration
	// allocs and bytes allocated by the whole process (server and caller) during the run.
	allocs, bytes uint64
}

// add pools two results.
func (r result) add(o result) result {
	out := result{requests: r.requests + o.requests, elapsed: r.elapsed + o.elapsed, samples: append(r.samples, o.samples...),
		allocs: r.allocs + o.allocs, bytes: r.bytes + o.bytes}
	slices.Sort(out.samples)
	out.p50, out.p99 = apiclient.Percentile(out.samples, 0.50), apiclient.Percentile(out.samples, 0.99)
	return out
}

func run(duration time.Duration, concurrency int) error {
	ctx := context.Background()
	cfg, err := collabd.ParseFlags(services.All(), []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}, func(string) string { return "" })
	if err != nil {
		return err
	}
	p, err := collabd.Start(ctx, cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return err
	}
	// The measurement is over by then; a failed stop changes none of it.
	defer func() { _ = p.Shutdown(context.Background()) }()
	base := "http://" + p.HTTPAddr
	hdr := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}

	// Seed: one organization, 30 documents in 3 nested folders, 100 users with organization
	// membership and a mix of document grants.
	docIDs := make([]string, 30)
	var docs []any
	for i := range docIDs {
		docIDs[i] = fmt.Sprintf("doc-%02d", i)
		docs = append(docs, map[string]any{"documentId": docIDs[i], "documentName": docIDs[i], "folderId": fmt.Sprintf("f%d", i%3)})
	}
	steps := []struct {
		path string
		data map[string]any
	}{
		{"/v2/organizations/add", map[string]any{"organizations": []any{map[string]any{"organizationId": "bench", "organizationName": "Bench"}}}},
		{"/v2/organizations/folders/add", map[string]any{"organizationId": "bench", "folders": []any{
			map[string]any{"folderId": "f0", "folderName": "f0", "accessType": "restricted"},
			map[string]any{"folderId": "f1", "folderName": "f1", "parentFolderId": "f0"},
			map[string]any{"folderId": "f2", "folderName": "f2", "parentFolderId": "f1", "accessType": "organizationPrivate"},
		}}},
		{"/v2/organizations/documents/add", map[string]any{"organizationId": "bench", "documents": docs}},
	}
	userIDs := make([]string, 100)
	for i := range userIDs {
		userIDs[i] = fmt.Sprintf("user-%03d", i)
	}
	for start := 0; start < len(userIDs); start += 50 {
		var users []any
		for _, u := range userIDs[start : start+50] {
			users = append(users, map[string]any{"userId": u, "name": u, "email": u + "@example.com"})
		}
		steps = append(steps, struct {
			path string
			data map[string]any
		}{"/v2/users/add", map[string]any{"organizationId": "bench", "users": users}})
	}
	for i, u := range userIDs {
		if i%2 == 0 {
			steps = append(steps, struct {
				path string
				data map[string]any
			}{"/v2/auth/permissions/add", map[string]any{"user": map[string]any{"userId": u}, "permissions": map[string]any{"resources": []any{
				map[string]any{"type": "document", "id": docIDs[i%30], "organizationId": "bench", "accessRole": "viewer"},
				map[string]any{"type": "folder", "id": "f1", "organizationId": "bench", "accessRole": "editor"},
			}}}})
		}
	}
	for _, s := range steps {
		if err := apiclient.Post(base+s.path, hdr, s.data, nil); err != nil {
			return fmt.Errorf("seed %s: %w", s.path, err)
		}
	}

	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := accessv1.NewAccessServiceClient(conn)
	md := metadata.Pairs("x-service-api-key", p.Dev.APIKey, "x-service-auth-token", p.Dev.AuthToken)

	fmt.Printf("Get Permissions, memory store, %d concurrent callers, %s per path per case in %d alternating rounds, GOMAXPROCS %d, %s\n\n", concurrency, duration, rounds, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| case | path | req/s | p50 | p99 | allocs/req | KB/req |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, users := range []int{1, 100} {
		req := &accessv1.GetPermissionsRequest{OrganizationId: "bench", UserIds: userIDs[:users], DocumentIds: docIDs}
		body := map[string]any{"organizationId": "bench", "userIds": userIDs[:users], "documentIds": docIDs}
		// Check once that both paths answer and agree on the number of users.
		var check struct {
			Result struct {
				Data map[string]any `json:"data"`
			} `json:"result"`
		}
		if err := apiclient.Post(base+"/v2/auth/permissions/get", hdr, body, &check); err != nil || len(check.Result.Data) != users {
			return fmt.Errorf("http check: %w (%d users)", err, len(check.Result.Data))
		}
		grpcCall := func() error {
			_, err := client.GetPermissions(metadata.NewOutgoingContext(ctx, md), req)
			return err
		}
		// Both callers send a request built once: the gRPC one reuses its message, this one its
		// bytes, so neither pays for building requests.
		raw, err := json.Marshal(map[string]any{"data": body})
		if err != nil {
			return err
		}
		httpCall := func() error { return apiclient.PostRaw(base+"/v2/auth/permissions/get", hdr, raw, nil) }
		if cpuProfile != "" {
			for path, call := range map[string]func() error{"http": httpCall, "grpc": grpcCall} {
				if err := profile(fmt.Sprintf("%s.%d.%s", cpuProfile, users, path), func() { load(duration, concurrency, call) }); err != nil {
					return err
				}
			}
		}
		// Warm up, then alternate short rounds of the two paths, so a slower moment of the
		// machine weighs on both alike.
		load(time.Second, concurrency, grpcCall)
		load(time.Second, concurrency, httpCall)
		var g, h result
		for range rounds {
			g = g.add(load(duration/rounds, concurrency, grpcCall))
			h = h.add(load(duration/rounds, concurrency, httpCall))
		}
		name := fmt.Sprintf("%d user(s) × 30 documents", users)
		for _, row := range []struct {
			path string
			r    result
		}{{"gRPC", g}, {"HTTP gateway", h}} {
			fmt.Printf("| %s | %s | %.0f | %s | %s | %.0f | %.1f |\n", name, row.path, float64(row.r.requests)/row.r.elapsed.Seconds(),
				row.r.p50.Round(time.Microsecond), row.r.p99.Round(time.Microsecond),
				float64(row.r.allocs)/float64(row.r.requests), float64(row.r.bytes)/float64(row.r.requests)/1024)
		}
		ratio := (float64(h.requests) / h.elapsed.Seconds()) / (float64(g.requests) / g.elapsed.Seconds())
		fmt.Printf("| %s | gateway / gRPC | %.0f%% | | | | |\n", name, ratio*100)
	}
	return nil
}

// profile writes a CPU profile of run to file.
func profile(file string, run func()) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	run()
	pprof.StopCPUProfile()
	// The profile is only complete once the file is closed: its error is the run's.
	return f.Close()
}

// load calls call from concurrency goroutines for d and reports throughput and latency.
func load(d time.Duration, concurrency int, call func() error) result {
	var (
		n       atomic.Int64
		mu      sync.Mutex
		samples []time.Duration
		wg      sync.WaitGroup
		failed  atomic.Value
	)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for time.Now().Before(deadline) {
				t := time.Now()
				if err := call(); err != nil {
					failed.Store(err)
					return
				}
				local = append(local, time.Since(t))
				n.Add(1)
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		fmt.Fprintln(os.Stderr, "call failed:", err)
		os.Exit(1)
	}
	elapsed := time.Since(start)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	slices.Sort(samples)
	return result{requests: n.Load(), elapsed: elapsed, samples: samples, p50: apiclient.Percentile(samples, 0.50), p99: apiclient.Percentile(samples, 0.99),
		allocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc}
}
