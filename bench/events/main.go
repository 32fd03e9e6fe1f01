// Command events measures the event path under load: concurrent callers publish events over
// HTTP (/v2/events/publish) for a fixed time, each delivered to the activity service and filed
// as a record, on the memory store or the embedded FerretDB (-data-dir). It checks afterwards
// that every published event became exactly one record, and along the way that a record is
// readable as soon as its publish has answered. It prints a markdown row for
// docs/benchmarks.md.
//
//	go run ./bench/events [-duration 10s] [-concurrency 8] [-data-dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long callers publish")
	concurrency := flag.Int("concurrency", 8, "concurrent callers")
	dataDir := flag.String("data-dir", "", "run on the embedded FerretDB in this directory instead of the memory store")
	flag.Parse()
	if err := run(*duration, *concurrency, *dataDir); err != nil {
		log.Fatal(err)
	}
}

func run(duration time.Duration, concurrency int, dataDir string) error {
	args := []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}
	store := "memory"
	if dataDir != "" {
		args = append(args, "--data-dir="+dataDir)
		store = "embedded FerretDB"
	}
	cfg, err := collabd.ParseFlags(services.All(), args, func(string) string { return "" })
	if err != nil {
		return err
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return err
	}
	// The measurement is over by then; a failed stop changes none of it.
	defer func() { _ = p.Shutdown(context.Background()) }()
	base := "http://" + p.HTTPAddr
	hdr := map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}
	org := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := apiclient.Post(base+"/v2/organizations/add", hdr, map[string]any{"organizations": []any{map[string]any{"organizationId": org, "organizationName": "Bench"}}}, nil); err != nil {
		return err
	}
	if err := apiclient.Post(base+"/v2/workspace/activityconfig/update", hdr, map[string]any{"isEnabled": true}, nil); err != nil {
		return err
	}

	var (
		published, checked, unseen atomic.Int64
		mu                         sync.Mutex
		samples                    []time.Duration
		wg                         sync.WaitGroup
		failed                     atomic.Value
	)
	start := time.Now()
	deadline := start.Add(duration)
	for w := range concurrency {
		wg.Go(func() {
			local := make([]time.Duration, 0, 4096)
			for i := 0; time.Now().Before(deadline); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				event := map[string]any{"id": id, "type": "comment.add", "organizationId": org, "documentId": fmt.Sprintf("d%d", i%50),
					"actionUser": map[string]any{"userId": fmt.Sprintf("u%d", w), "name": "Bench"}, "targetEntityId": fmt.Sprintf("t%d", i%200),
					"data": map[string]any{"commentText": "a comment of ordinary length, a sentence or two long"}}
				t := time.Now()
				if err := apiclient.Post(base+"/v2/events/publish", hdr, event, nil); err != nil {
					failed.Store(err)
					return
				}
				local = append(local, time.Since(t))
				published.Add(1)
				// One publish in a hundred: is the record there as soon as the publish answered?
				if i%100 == 0 {
					var got struct {
						Result struct {
							Data []any `json:"data"`
						} `json:"result"`
					}
					if err := apiclient.Post(base+"/v2/activities/get", hdr, map[string]any{"organizationId": org, "activityIds": []string{id}}, &got); err != nil {
						failed.Store(err)
						return
					}
					checked.Add(1)
					if len(got.Result.Data) != 1 {
						unseen.Add(1)
					}
				}
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return err
	}

	// Every published event is one record: page through the log.
	records, token := 0, ""
	for {
		q := map[string]any{"organizationId": org, "pageSize": 10000}
		if token != "" {
			q["pageToken"] = token
		}
		var page struct {
			Result struct {
				Data      []any  `json:"data"`
				PageToken string `json:"pageToken"`
			} `json:"result"`
		}
		if err := apiclient.Post(base+"/v2/activities/get", hdr, q, &page); err != nil {
			return err
		}
		records += len(page.Result.Data)
		if token = page.Result.PageToken; token == "" {
			break
		}
	}
	slices.Sort(samples)
	fmt.Printf("%s store, %d callers, %s, GOMAXPROCS %d, %s\n\n", store, concurrency, duration, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| store | callers | events/s | publish p50 | publish p99 | records / published | record readable when publish answered |")
	fmt.Println("|---|---|---|---|---|---|---|")
	fmt.Printf("| %s | %d | %.0f | %s | %s | %d / %d | %d of %d checked |\n", store, concurrency, float64(published.Load())/elapsed.Seconds(),
		apiclient.Percentile(samples, 0.5).Round(time.Microsecond), apiclient.Percentile(samples, 0.99).Round(time.Microsecond),
		records, published.Load(), checked.Load()-unseen.Load(), checked.Load())
	if int64(records) != published.Load() || unseen.Load() != 0 {
		return fmt.Errorf("%d records for %d published events, %d not readable at once", records, published.Load(), unseen.Load())
	}
	return nil
}
