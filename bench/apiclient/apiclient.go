// Package apiclient is what the load programs under bench/ share: posting {"data": ...} to the
// HTTP API with credentials, and reading percentiles of latencies.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// Post sends {"data": data} to url and decodes the answer into out (when not nil); a status
// other than 200 is an error holding the answer.
func Post(url string, headers map[string]string, data any, out any) error {
	return PostContext(context.Background(), url, headers, data, out)
}

// PostContext is Post within ctx: the request is abandoned when ctx ends.
func PostContext(ctx context.Context, url string, headers map[string]string, data any, out any) error {
	b, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	return PostRawContext(ctx, url, headers, b, out)
}

// PostRaw sends a body already encoded.
func PostRaw(url string, headers map[string]string, body []byte, out any) error {
	return PostRawContext(context.Background(), url, headers, body, out)
}

// PostRawContext is PostRaw within ctx.
func PostRawContext(ctx context.Context, url string, headers map[string]string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{URL: url, Status: resp.StatusCode, Body: raw}
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// StatusError is an answer other than 200.
type StatusError struct {
	URL    string
	Status int
	Body   []byte
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: %d %s", e.URL, e.Status, e.Body) }

// Message is the error envelope's message ({"error": {"message": ...}}), or the body.
func (e *StatusError) Message() string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(e.Body, &env) == nil && env.Error.Message != "" {
		return env.Error.Message
	}
	return string(e.Body)
}

// Percentile reads the p-th percentile (0 to 1) of sorted latencies; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}
