package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// limitSenders is how many senders the signed-POST limit uses: as many as the engine may have
// in flight to one endpoint.
const limitSenders = 8

// limit is what signedPostLimit measured: POSTs per second, and this process's CPU time per
// POST (client and receiver).
type limit struct {
	perSec float64
	cpu    time.Duration
	allocs float64 // heap objects allocated per POST
}

// signedPostLimit measures what a plain Go client does on this machine now: limitSenders
// goroutines POST body to url for d, each POST signed the Standard Webhooks way (HMAC-SHA256 of
// id.timestamp.body, base64, in webhook-signature), and it returns the POSTs answered 2xx per
// second and the CPU time each took. It is the ceiling the engine's deliveries are compared
// with, measured beside them.
func signedPostLimit(ctx context.Context, url string, body []byte, d time.Duration) (limit, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: limitSenders}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	key := []byte("a 24-byte signing secret")
	var (
		done   atomic.Int64
		failed atomic.Value
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start, cpu0, allocs0 := time.Now(), cpuTime(), mallocs()
	for s := range limitSenders {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if err := signedPost(ctx, client, url, key, fmt.Sprintf("msg_limit_%d_%d", s, i), body); err != nil {
					if ctx.Err() == nil {
						failed.Store(err)
					}
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return limit{}, err
	}
	n := max(done.Load(), 1)
	return limit{perSec: float64(n) / time.Since(start).Seconds(), cpu: (cpuTime() - cpu0) / time.Duration(n),
		allocs: float64(mallocs()-allocs0) / float64(n)}, nil
}

// mallocs is how many heap objects this process has allocated.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// cpuTime is the CPU time this process has used (user and system), 0 where getrusage fails.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// signedPost sends one POST as a webhook sender does: the body, its id, timestamp and
// signature headers.
func signedPost(ctx context.Context, client *http.Client, url string, key []byte, id string, body []byte) error {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("limit: the receiver answered %d", resp.StatusCode)
	}
	return nil
}
