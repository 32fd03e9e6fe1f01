// Command webhooks measures the webhook engine on the memory store: signed deliveries per
// second to a loopback receiver with 1 endpoint and with 100, the same 100 while one more
// endpoint never answers, and how closely a rateLimit is kept. Events are published over HTTP
// by concurrent callers; a delivery counts when the receiver has it. It prints markdown for
// docs/benchmarks.md.
//
//	go run ./bench/webhooks [-events 20000] [-rate 50]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

func main() {
	events := flag.Int("events", 20000, "deliveries of each case: the 1-endpoint case publishes this many events, the 100-endpoint cases a hundredth of it")
	rate := flag.Int("rate", 50, "rateLimit of the rate case")
	flag.Parse()
	if err := run(*events, *rate); err != nil {
		log.Fatal(err)
	}
}

// receiver counts deliveries per path and keeps their arrival times for one path.
type receiver struct {
	addr  string
	total atomic.Int64
	mu    sync.Mutex
	times map[string][]time.Time
	hang  chan struct{}
}

func startReceiver() (*receiver, error) {
	r := &receiver{times: map[string][]time.Time{}, hang: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = "http://" + ln.Addr().String()
	// Served until the benchmark exits (Serve returns only then, with nothing left to report).
	// The "/dead" target hangs on purpose, so the server has no timeouts.
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/dead" {
			<-r.hang
			return
		}
		if req.Header.Get("webhook-signature") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.total.Add(1)
		if req.URL.Path == "/rate" {
			r.mu.Lock()
			r.times["/rate"] = append(r.times["/rate"], time.Now())
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	return r, nil
}

type api struct {
	base string
	hdr  map[string]string
}

func (a api) call(path string, data map[string]any, out any) error {
	return apiclient.Post(a.base+path, a.hdr, data, out)
}

func (a api) endpoint(url string, extra map[string]any) (string, error) {
	data := map[string]any{"url": url}
	for k, v := range extra {
		data[k] = v
	}
	var got struct {
		Result struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		} `json:"result"`
	}
	err := a.call("/v2/workspace/advancedwebhook/endpoints/create", data, &got)
	return got.Result.Data.ID, err
}

// publish sends n events of the type from 16 callers.
func (a api) publish(prefix, typ string, n int) error {
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := a.call("/v2/events/publish", map[string]any{"id": fmt.Sprintf("%s%d", prefix, i), "type": typ, "organizationId": "bench",
					"data": map[string]any{"text": "a comment of ordinary length, a sentence or two long"}}, nil); err != nil {
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

// measure publishes n events and reports deliveries per second until want more have arrived.
func measure(a api, r *receiver, prefix, typ string, n int, want int64) (float64, time.Duration, error) {
	start := time.Now()
	base := r.total.Load()
	if err := a.publish(prefix, typ, n); err != nil {
		return 0, 0, err
	}
	for r.total.Load()-base < want {
		if time.Since(start) > 5*time.Minute {
			return 0, 0, fmt.Errorf("%d of %d deliveries in 5 minutes", r.total.Load()-base, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	return float64(want) / elapsed.Seconds(), elapsed, nil
}

func run(events, rate int) error {
	cfg, err := collabd.ParseFlags(services.All(), []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}, func(string) string { return "" })
	if err != nil {
		return err
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return err
	}
	// The measurement is over by then; a failed stop changes none of it.
	defer func() { _ = p.Shutdown(context.Background()) }()
	a := api{base: "http://" + p.HTTPAddr, hdr: map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}}
	r, err := startReceiver()
	if err != nil {
		return err
	}
	defer close(r.hang)
	if err := a.call("/v2/organizations/add", map[string]any{"organizations": []any{map[string]any{"organizationId": "bench", "organizationName": "B"}}}, nil); err != nil {
		return err
	}
	if err := a.call("/v2/workspace/advancedwebhookconfig/update", map[string]any{"isEnabled": true}, nil); err != nil {
		return err
	}

	fmt.Printf("Webhook deliveries, memory store, loopback receiver in the same process, 16 publishing callers, GOMAXPROCS %d, %s\n\n", runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| case | events | deliveries | time | deliveries/s |")
	fmt.Println("|---|---|---|---|---|")
	if _, err := a.endpoint(r.addr+"/one", map[string]any{"filterTypes": []string{"one.event"}}); err != nil {
		return err
	}
	perSec, took, err := measure(a, r, "one", "one.event", events, int64(events))
	if err != nil {
		return err
	}
	fmt.Printf("| 1 endpoint | %d | %d | %s | %.0f |\n", events, events, took.Round(time.Millisecond), perSec)

	for i := range 100 {
		if _, err := a.endpoint(fmt.Sprintf("%s/many%d", r.addr, i), map[string]any{"filterTypes": []string{"many.event"}}); err != nil {
			return err
		}
	}
	n := events / 100
	base, took, err := measure(a, r, "many", "many.event", n, int64(n*100))
	if err != nil {
		return err
	}
	fmt.Printf("| 100 endpoints | %d | %d | %s | %.0f |\n", n, n*100, took.Round(time.Millisecond), base)

	if _, err := a.endpoint(r.addr+"/dead", map[string]any{"filterTypes": []string{"many.event"}}); err != nil {
		return err
	}
	withDead, took, err := measure(a, r, "dead", "many.event", n, int64(n*100))
	if err != nil {
		return err
	}
	fmt.Printf("| 100 endpoints + 1 that never answers | %d | %d to the 100 | %s | %.0f (%.0f%% of the case above) |\n", n, n*100, took.Round(time.Millisecond), withDead, 100*withDead/base)

	if _, err := a.endpoint(r.addr+"/rate", map[string]any{"filterTypes": []string{"rate.event"}, "rateLimit": rate}); err != nil {
		return err
	}
	total := rate * 12
	if err := a.publish("rate", "rate.event", total); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r.mu.Lock()
		got := len(r.times["/rate"])
		r.mu.Unlock()
		if got >= total {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rate case: %d of %d in 2 minutes", got, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	times := r.times["/rate"]
	r.mu.Unlock()
	// The rate over whole seconds, leaving out the first and last (partly filled) ones.
	first, last := times[0].Truncate(time.Second).Add(time.Second), times[len(times)-1].Truncate(time.Second)
	inside := 0
	for _, t := range times {
		if !t.Before(first) && t.Before(last) {
			inside++
		}
	}
	measured := float64(inside) / last.Sub(first).Seconds()
	fmt.Printf("\n| rateLimit | deliveries | measured over %s | within |\n|---|---|---|---|\n| %d/s | %d | %.1f/s | %.1f%% |\n",
		last.Sub(first), rate, total, measured, 100*(measured-float64(rate))/float64(rate))
	return nil
}
