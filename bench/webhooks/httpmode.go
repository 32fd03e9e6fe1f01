package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/collab/collab/bench/apiclient"
	"github.com/collab/collab/collabd"
	"github.com/collab/collab/services"
)

// overHTTP is a whole collabd process (memory store) in this process: events are published
// over HTTP (/v2/events/publish) by 16 callers, so the publish path is in the measurement.
type overHTTP struct {
	p    *collabd.Process
	base string
	hdr  map[string]string
}

func newOverHTTP() (*overHTTP, error) {
	cfg, err := collabd.ParseFlags(services.All(), []string{"--http-addr=127.0.0.1:0", "--grpc-addr=127.0.0.1:0", "--rate-limit=off", "--log-level=error"}, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	p, err := collabd.Start(context.Background(), cfg, collabd.Deps{LogOutput: io.Discard})
	if err != nil {
		return nil, err
	}
	h := &overHTTP{p: p, base: "http://" + p.HTTPAddr, hdr: map[string]string{"x-service-api-key": p.Dev.APIKey, "x-service-auth-token": p.Dev.AuthToken}}
	if err := h.call("/v2/organizations/add", map[string]any{"organizations": []any{map[string]any{"organizationId": "bench", "organizationName": "B"}}}, nil); err != nil {
		h.close()
		return nil, err
	}
	if err := h.call("/v2/workspace/advancedwebhookconfig/update", map[string]any{"isEnabled": true}, nil); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// close stops the process. The measurement is over by then; a failed stop changes none of it.
func (h *overHTTP) close() { _ = h.p.Shutdown(context.Background()) }

func (h *overHTTP) call(path string, data map[string]any, out any) error {
	return apiclient.Post(h.base+path, h.hdr, data, out)
}

func (h *overHTTP) createEndpoint(url string, filterTypes []string, rateLimit int) (string, error) {
	data := map[string]any{"url": url}
	if filterTypes != nil {
		data["filterTypes"] = filterTypes
	}
	if rateLimit > 0 {
		data["rateLimit"] = rateLimit
	}
	var got struct {
		Result struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		} `json:"result"`
	}
	err := h.call("/v2/workspace/advancedwebhook/endpoints/create", data, &got)
	return got.Result.Data.ID, err
}

func (h *overHTTP) deleteEndpoint(id string) error {
	return h.call("/v2/workspace/advancedwebhook/endpoints/delete", map[string]any{"endpointId": id}, nil)
}

// publish sends n events of the type from 16 callers.
func (h *overHTTP) publish(prefix, typ string, n int) error {
	var (
		wg     sync.WaitGroup
		failed atomic.Value
		next   atomic.Int64
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := h.call("/v2/events/publish", map[string]any{"id": fmt.Sprintf("%s%d", prefix, i), "type": typ, "organizationId": "bench",
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
