package collabctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

const mListAttempts = "collab.webhooks.v1.WebhooksService.ListAttempts"

// attemptsPage is the most List Attempts returns at once (its limit's maximum).
const attemptsPage = 250

// attempt is one delivery attempt as List Attempts answers it.
type attempt struct {
	ID                 string  `json:"id"`
	MessageID          string  `json:"messageId"`
	EndpointID         string  `json:"endpointId"`
	ResponseStatusCode int     `json:"responseStatusCode"`
	Response           string  `json:"response"`
	DurationMS         float64 `json:"durationMs"`
	Status             string  `json:"status"`
	Timestamp          string  `json:"timestamp"`
	raw                json.RawMessage
}

// webhookAttemptsTail polls List Attempts and prints the attempts it has not printed yet, oldest
// first, until ctx ends (Ctrl-C). List Attempts answers newest first, so each poll reads its
// first page and, while every attempt on a page is new, the next ones.
func webhookAttemptsTail(ctx context.Context, s *session, args []string) error {
	fs := s.flags("webhooks attempts tail")
	endpoint := fs.String("endpoint", "", "attempts to this endpoint (ep_...)")
	message := fs.String("message", "", "attempts of this message (msg_...)")
	status := fs.String("status", "", "only success, pending (failed, to be retried) or failed (given up)")
	interval := fs.Duration("interval", 2*time.Second, "time between polls")
	last := fs.Int("last", 10, "attempts made before the start to print first")
	if _, err := s.parse(fs, args); err != nil {
		return err
	}
	if *endpoint == "" && *message == "" {
		return usagef("webhooks attempts tail needs --endpoint or --message")
	}
	if *interval < 100*time.Millisecond {
		return usagef("--interval must be at least 100ms")
	}
	if *last < 0 {
		return usagef("--last must not be negative")
	}
	filter := map[string]any{}
	for k, v := range map[string]string{"endpointId": *endpoint, "messageId": *message, "status": *status} {
		if v != "" {
			filter[k] = v
		}
	}
	out := newAttemptPrinter(s)
	var seen map[string]bool
	for {
		fresh, window, err := pollAttempts(ctx, s, filter, seen, *last)
		switch {
		case err == nil:
			if seen == nil && len(fresh) > *last {
				fresh = fresh[len(fresh)-*last:] // the first poll shows only the newest --last
			}
			seen = window
			if err := out.print(fresh); err != nil {
				return err
			}
		case ctx.Err() != nil:
			return nil //nolint:nilerr // interrupted (Ctrl-C): the tail ends normally, not with the poll's error
		case seen != nil && transient(err):
			// A restarting gateway should not end a tail that has started: say so and poll
			// again. A first poll that fails (a wrong URL, an untrusted certificate) ends it.
			fmt.Fprintf(s.stderr, "collabctl: polling attempts: %s; trying again\n", sanitize(err.Error()))
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

// pollAttempts returns the attempts not in seen, oldest first, and the ids of the newest page,
// the window the next poll compares against. The first poll (seen nil) reads pages until it has
// the newest last ones.
func pollAttempts(ctx context.Context, s *session, filter map[string]any, seen map[string]bool, last int) ([]attempt, map[string]bool, error) {
	var fresh []attempt
	window := map[string]bool{}
	iterator := ""
	for page := 0; page < maxPages; page++ {
		data := map[string]any{"limit": attemptsPage}
		for k, v := range filter {
			data[k] = v
		}
		if iterator != "" {
			data["iterator"] = iterator
		}
		raw, _, err := s.do(ctx, mListAttempts, data)
		if err != nil {
			return nil, nil, err
		}
		var res struct {
			Data struct {
				Attempts []json.RawMessage `json:"attempts"`
				Iterator *string           `json:"iterator"`
				Done     bool              `json:"done"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, fmt.Errorf("reading List Attempts' answer: %w", err)
		}
		allNew := true
		for _, r := range res.Data.Attempts {
			var a attempt
			if err := json.Unmarshal(r, &a); err != nil {
				return nil, nil, fmt.Errorf("reading an attempt: %w", err)
			}
			a.raw = r
			if page == 0 {
				window[a.ID] = true
			}
			if seen[a.ID] {
				allNew = false
				continue
			}
			fresh = append(fresh, a)
		}
		more := !res.Data.Done && res.Data.Iterator != nil && *res.Data.Iterator != ""
		// The first poll wants the newest --last (which may be more than a page); a later one
		// reads on while a whole page is new, to catch up after a burst.
		if !more || (seen == nil && len(fresh) >= last) || (seen != nil && !allNew) {
			break
		}
		iterator = *res.Data.Iterator
	}
	slices.Reverse(fresh)
	return fresh, window, nil
}

// transient tells failures worth another poll: no connection, or the server's own trouble.
func transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.HTTPStatus >= 500 || ae.HTTPStatus == 429
	}
	var ue *usageError
	return !errors.As(err, &ue)
}

// attemptPrinter writes attempts as table rows (one header first) or as JSON lines.
type attemptPrinter struct {
	s      *session
	header bool
}

func newAttemptPrinter(s *session) *attemptPrinter { return &attemptPrinter{s: s} }

func (p *attemptPrinter) print(attempts []attempt) error {
	if p.s.output == "json" {
		for _, a := range attempts {
			if _, err := fmt.Fprintf(p.s.stdout, "%s\n", compact(a.raw)); err != nil {
				return err
			}
		}
		return nil
	}
	// Rows are flushed as they come, so the columns have fixed widths rather than aligned ones.
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.s.stdout, "%-24s  %-7s  %4s  %8s  %-30s  %-30s  %s\n", "TIME", "STATUS", "CODE", "MS", "MESSAGE", "ENDPOINT", "RESPONSE"); err != nil {
			return err
		}
	}
	for _, a := range attempts {
		resp := sanitize(a.Response)
		// Cut by characters: a cut inside one would print a broken byte.
		if r := []rune(resp); len(r) > 80 {
			resp = string(r[:77]) + "..."
		}
		_, err := fmt.Fprintf(p.s.stdout, "%-24s  %-7s  %4d  %8.0f  %-30s  %-30s  %s\n",
			sanitize(a.Timestamp), sanitize(a.Status), a.ResponseStatusCode, a.DurationMS, sanitize(a.MessageID), sanitize(a.EndpointID), resp)
		if err != nil {
			return err
		}
	}
	return nil
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(terminalSafeJSON(raw))
	}
	return string(terminalSafeJSON(b.Bytes()))
}
