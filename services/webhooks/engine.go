package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"

	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/lifecycle"
)

// Delivery limits (docs/webhooks.md, "Delivery").
const (
	attemptTimeout  = 15 * time.Second
	leaseFor        = time.Minute // longer than an attempt: a lease runs out only when its worker died
	workers         = 64
	perEndpoint     = 8 // attempts in flight to one endpoint, so a dead one holds few workers
	dispatchBatch   = 256
	enginePoll      = 250 * time.Millisecond
	failingDisables = 5 * 24 * time.Hour
	maxRetryAfter   = 24 * time.Hour
	responsePrefix  = 1024
	drainLimit      = 1 << 20  // what is read of an answer past its prefix, to reuse the connection
	basicPrefix     = "basic_" // the pseudo-endpoint of the basic webhook config's rawNotificationUrl
	exhaustedType   = "message.attempt.exhausted"
	retention       = 30 * 24 * time.Hour
)

// retrySchedule is the wait after each failed attempt (±20%): 5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h, 10 h; the eighth failure exhausts the message.
var retrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// ---- Fan-out ----

// HandleEvent turns a domain event into a message and a delivery per endpoint of its tenant
// that takes it: enabled, its filterTypes (all when unset) naming the type, its channels (all
// when unset) naming the event's channel. Lifecycle events carry nothing for endpoints.
// Idempotent: the message and delivery ids follow from the event.
func (s *Server) HandleEvent(ctx context.Context, ev *lifecyclev1.Event) error {
	d := ev.GetDomain()
	if d == nil {
		return nil
	}
	return s.fanOut(ctx, d.GetApiKey(), d, "")
}

// fanOut stores the message of an event and queues its deliveries; only names one endpoint
// (a test event).
func (s *Server) fanOut(ctx context.Context, apiKey string, d *eventsv1.Event, only string) error {
	if apiKey == "" || d.GetId() == "" || d.GetType() == "" {
		return lifecycle.Invalid(lifecycle.Domain(d), "tenant, id or type")
	}
	cfg, err := s.store.Config(ctx, apiKey)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	basic, err := s.store.BasicConfig(ctx, apiKey)
	if err != nil {
		return fmt.Errorf("read webhook config: %w", err)
	}
	// The basic target takes every event a product reports, not the engine's own announcements.
	useBasic := only == "" && basic.UseWebhookService && basic.RawURL != "" && !strings.HasPrefix(d.GetType(), "message.")
	if !cfg.Enabled && !useBasic {
		return nil
	}
	at := time.UnixMilli(int64(d.GetTimestamp())).UTC()
	msg := &Message{APIKey: apiKey, ID: messageID(apiKey, d.GetId(), at), EventType: d.GetType(), Channel: d.GetChannel(), CreatedAt: s.now()}
	payload, err := buildPayload(d, msg.ID, cfg.DataProtection)
	if err != nil {
		return lifecycle.Invalid(lifecycle.Domain(d), "payload that encodes")
	}
	msg.Payload = string(payload)
	var targets []string
	if cfg.Enabled {
		if targets, err = s.endpointTargets(ctx, apiKey, d, only); err != nil {
			return err
		}
	}
	if useBasic {
		targets = append(targets, basicEndpointID(apiKey))
	}
	if len(targets) == 0 {
		return nil
	}
	if err := s.store.AddMessage(ctx, msg); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("store message: %w", err)
	}
	now := s.now()
	ds := make([]*Delivery, len(targets))
	for i, t := range targets {
		ds[i] = &Delivery{ID: DeliveryID(apiKey, msg.ID, t), APIKey: apiKey, WorkspaceID: d.GetWorkspaceId(), MessageID: msg.ID, EndpointID: t, State: StatePending,
			NextAttempt: now, CreatedAt: now, UpdatedAt: now}
	}
	if err := s.store.QueueDeliveries(ctx, ds); err != nil {
		return fmt.Errorf("queue deliveries: %w", err)
	}
	s.engine.notify()
	return nil
}

// endpointTargets returns the ids of the tenant's endpoints an event goes to: only the one
// named (a test event), or every enabled endpoint that wants its type and channel.
func (s *Server) endpointTargets(ctx context.Context, apiKey string, d *eventsv1.Event, only string) ([]string, error) {
	eps, err := s.store.Endpoints(ctx, apiKey)
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	var targets []string
	for _, e := range eps {
		if only != "" && e.ID != only {
			continue
		}
		if only == "" && (e.Disabled || !wants(e, d.GetType(), d.GetChannel())) {
			continue
		}
		targets = append(targets, e.ID)
	}
	return targets, nil
}

// wants reports whether an endpoint takes an event of the type on the channel. The webhook
// engine's own announcements (message.*) go only to endpoints that name them.
func wants(e *Endpoint, eventType, channel string) bool {
	if e.FilterTypes == nil && strings.HasPrefix(eventType, "message.") {
		return false
	}
	if e.FilterTypes != nil && !slices.Contains(e.FilterTypes, eventType) {
		return false
	}
	return e.Channels == nil || slices.Contains(e.Channels, channel)
}

// ---- Attempts ----

// attempt sends one claimed delivery and records its outcome.
func (s *Server) attempt(ctx context.Context, j *job) {
	d := j.d
	now := s.clock.Now()
	// finish records the outcome (with the attempt's record, when one was made).
	finish := func(a *Attempt, state string, attempts int, next time.Time) {
		_ = s.engine.rec.record(Outcome{Attempt: a, Finish: true, DeliveryID: d.ID, LeaseUntil: j.leaseUntil, State: state, Attempts: attempts, Next: next})
	}
	fail := func(reason string) {
		finish(s.attemptRecord(d, 0, reason, 0, StateFailed), StateFailed, d.Attempts, time.Time{})
	}
	// A store that does not answer is no fault of the delivery: it waits a little, no attempt
	// spent, no mark against the endpoint.
	if j.readErr != nil {
		s.log.ErrorContext(ctx, "webhooks: reading for a delivery", "what", j.readWhat, "delivery_id", d.ID, "error", j.readErr)
		finish(nil, StatePending, d.Attempts, now.Add(5*time.Second))
		return
	}
	req, reason := s.request(ctx, j, now)
	switch {
	case reason == errRateLimited:
		// Over the limit this second: back in the queue for the next one, no attempt spent.
		finish(nil, StatePending, d.Attempts, time.Unix(now.Unix()+1, 0))
		return
	case reason != "":
		fail(reason)
		return
	}
	start := time.Now()
	resp, err := s.send(req)
	duration := time.Since(start)
	if err != nil {
		if timedOut(err) {
			s.engine.timedOut(d.EndpointID)
		}
		s.retry(ctx, j, 0, "no answer: "+errText(err), duration, now)
		return
	}
	text, err := readAnswer(resp.Body)
	resp.Body.Close()
	// An answer whose body is still coming at the deadline held its worker as long as no
	// answer does: it counts toward the circuit as a timeout, not as an answer.
	if timedOut(err) {
		s.engine.timedOut(d.EndpointID)
	} else {
		s.engine.answered(d.EndpointID)
	}
	ep := j.ep
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		finish(s.attemptRecord(d, resp.StatusCode, text, duration, StateSuccess), StateSuccess, d.Attempts+1, time.Time{})
		if ep != nil && !ep.FailingSince.IsZero() {
			_ = s.store.ClearFailing(ctx, d.APIKey, ep.ID)
		}
	case resp.StatusCode == http.StatusGone:
		// The receiver says the target is gone for good: stop sending there.
		finish(s.attemptRecord(d, resp.StatusCode, text, duration, StateFailed), StateFailed, d.Attempts+1, time.Time{})
		if ep == nil {
			return // the basic config's URL: nothing to disable
		}
		if err := s.store.DisableEndpoint(ctx, d.APIKey, ep.ID, "the endpoint answered 410 Gone", now); err != nil {
			s.log.ErrorContext(ctx, "webhooks: disabling an endpoint", "endpoint_id", ep.ID, "error", err)
		}
		s.log.WarnContext(ctx, "webhook endpoint disabled: 410 Gone", "endpoint_id", ep.ID)
	default:
		wait := time.Duration(0)
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			wait = min(time.Duration(secs)*time.Second, maxRetryAfter)
		}
		s.retry(ctx, j, resp.StatusCode, text, duration, now, wait)
	}
}

// answerBufs holds the buffers readAnswer reads into.
var answerBufs = sync.Pool{New: func() any { return new([responsePrefix]byte) }}

// readAnswer returns the first responsePrefix bytes of an answer's body (valid UTF-8) and reads
// up to drainLimit bytes more, so that the connection is reused; err is why reading stopped
// short of the body's end or the limit (nil when it did not). One pooled buffer serves both:
// an answer is read for every attempt.
func readAnswer(body io.Reader) (text string, err error) {
	buf := answerBufs.Get().(*[responsePrefix]byte)
	defer answerBufs.Put(buf)
	n, err := io.ReadFull(body, buf[:])
	if n > 0 {
		text = strings.ToValidUTF8(string(buf[:n]), "")
	}
	for drained := 0; err == nil && drained < drainLimit; {
		n, err = body.Read(buf[:])
		drained += n
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF { //nolint:errorlint // io.ReadFull and Read return them unwrapped
		err = nil
	}
	return text, err
}

// timedOut reports whether an attempt's request or the reading of its answer ended at the
// attempt's deadline (or the transport's wait for the answer's head).
func timedOut(err error) bool {
	if err == nil {
		return false // every answer read whole comes here: errors.As's target would be an allocation
	}
	ne := net.Error(nil)
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// errRateLimited is request's reason when the endpoint's rate limit is spent this second.
const errRateLimited = "\x00rate limited"

// request builds the signed POST of a delivery, or says why it cannot be sent (a reason for
// the attempt log, or errRateLimited).
func (s *Server) request(ctx context.Context, j *job, now time.Time) (*http.Request, string) {
	d := j.d
	if j.msg == nil {
		return nil, "message gone"
	}
	var (
		url, auth string
		secrets   []string
	)
	if j.isBasic() {
		if !j.basic.UseWebhookService || j.basic.RawURL == "" {
			return nil, "basic webhook service off"
		}
		url, auth = j.basic.RawURL, j.basic.AuthToken
	} else {
		switch ep := j.ep; {
		case ep == nil:
			return nil, "endpoint gone"
		case ep.Disabled:
			return nil, "endpoint disabled"
		case ep.RateLimit != nil:
			ok, err := s.store.TakeSlot(ctx, endpointKey(d.APIKey, d.EndpointID), now.Unix(), *ep.RateLimit)
			if err != nil || !ok {
				return nil, errRateLimited
			}
		}
		url, secrets = j.ep.URL, signingSecrets(j.ep, now)
	}
	body, err := transformBody(j.msg.Payload, j.isBasic(), j.cfg)
	if err != nil {
		return nil, err.Error()
	}
	req, err := http.NewRequestWithContext(j.sendCtx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, "bad endpoint url"
	}
	h := headers{h: make(http.Header, 6), vals: make([]string, 0, 6)}
	h.set("Content-Type", "application/json")
	h.set("User-Agent", "collab-webhooks/1")
	h.set("Webhook-Id", j.msg.ID)
	ts := now.Unix()
	h.set("Webhook-Timestamp", strconv.FormatInt(ts, 10))
	if len(secrets) > 0 {
		sig, err := signatures(secrets, j.msg.ID, ts, body)
		if err != nil {
			return nil, "signing: " + err.Error()
		}
		h.set("Webhook-Signature", sig)
	}
	if auth != "" {
		h.set("Authorization", auth)
	}
	req.Header = h.h
	return req, ""
}

// headers builds a request's header with its values in one slice, keys given canonical: what
// Header.Set does with an allocation per key and per value, for every attempt.
type headers struct {
	h    http.Header
	vals []string
}

func (h *headers) set(canonicalKey, v string) {
	h.vals = append(h.vals, v)
	n := len(h.vals)
	h.h[canonicalKey] = h.vals[n-1 : n : n]
}

// send sends an attempt's request with the client's transport itself. The client follows no
// redirect (egress.Client), and what it adds (its own deadline and timer, a copy of the
// headers for redirects, a clone of the URL) costs a dozen allocations per attempt; the
// attempt's deadline is its job's sendCtx. A URL with user info goes through the client,
// which turns it into basic authentication.
func (s *Server) send(req *http.Request) (*http.Response, error) {
	if req.URL.User != nil {
		return s.client.Do(req)
	}
	rt := s.client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return rt.RoundTrip(req)
}

// errText says why an attempt got no answer, in words fit for the tenant's attempt log: no
// resolver address, no internal detail.
func errText(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, egress.ErrBlocked):
		return egress.ErrBlocked.Error()
	case errors.As(err, &dns):
		return "the endpoint's host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out after 15 s" // attemptTimeout
	}
	return "request failed"
}

// transformBody applies encodeData or encryptData to the payload of an endpoint's delivery;
// the basic config's target takes it as it is. The payload stays a string on the common path:
// it is sent and signed without a copy.
func transformBody(payload string, basic bool, cfg *Config) (string, error) {
	var (
		out []byte
		err error
	)
	switch {
	case basic:
		return payload, nil
	case cfg.EncryptData:
		pub, perr := parsePublicKey(cfg.PublicKey)
		if perr != nil {
			return "", fmt.Errorf("encryptData: the public key does not parse")
		}
		out, err = encryptedBody([]byte(payload), pub)
	case cfg.EncodeData:
		out, err = encodedBody([]byte(payload))
	default:
		return payload, nil
	}
	return string(out), err
}

// retry records a failed attempt and schedules the next one, or exhausts the delivery after
// the last; an endpoint failing for 5 days is disabled.
func (s *Server) retry(ctx context.Context, j *job, code int, reason string, duration time.Duration, now time.Time, retryAfter ...time.Duration) {
	d, ep := j.d, j.ep
	attempts := d.Attempts + 1
	if attempts > len(retrySchedule) {
		_ = s.engine.rec.record(Outcome{Attempt: s.attemptRecord(d, code, reason, duration, StateFailed)})
		if err := s.store.FinishLeased(ctx, d.ID, j.leaseUntil, StateFailed, attempts, time.Time{}, now); err != nil {
			s.log.WarnContext(ctx, "webhooks: recording an exhausted delivery", "delivery_id", d.ID, "error", err)
			return // another worker has it now, and will announce it if it ends the same way
		}
		s.announceExhausted(ctx, d, code)
	} else {
		wait := time.Duration(float64(retrySchedule[attempts-1]) * (0.8 + rand.Float64()*0.4)) //nolint:gosec // G404: jitter spreading retries needs no unpredictability
		if len(retryAfter) > 0 && retryAfter[0] > 0 {
			wait = retryAfter[0]
		}
		_ = s.engine.rec.record(Outcome{Attempt: s.attemptRecord(d, code, reason, duration, StatePending), Finish: true,
			DeliveryID: d.ID, LeaseUntil: j.leaseUntil, State: StatePending, Attempts: attempts, Next: now.Add(wait)})
	}
	if ep == nil {
		return
	}
	if ep.FailingSince.IsZero() {
		_ = s.store.SetFailing(ctx, d.APIKey, ep.ID, now)
	} else if now.Sub(ep.FailingSince) >= failingDisables {
		if err := s.store.DisableEndpoint(ctx, d.APIKey, ep.ID, "the endpoint failed every delivery for 5 days", now); err == nil {
			s.log.WarnContext(ctx, "webhook endpoint disabled: failing for 5 days", "endpoint_id", ep.ID)
		}
	}
}

// attemptRecord is the record of an attempt (counted in the metrics).
func (s *Server) attemptRecord(d *Delivery, code int, response string, duration time.Duration, status string) *Attempt {
	s.metrics.observe(status, duration)
	return &Attempt{APIKey: d.APIKey, ID: timeID("atmpt_", s.clock.Now()), MessageID: d.MessageID, EndpointID: d.EndpointID, StatusCode: code,
		Response: trimmed(response, responsePrefix), DurationMs: float64(duration.Microseconds()) / 1000, Status: status, Timestamp: s.now()}
}

// announceExhausted publishes message.attempt.exhausted to the tenant's endpoints that ask for
// it (never about a message of that type, so it cannot feed itself).
func (s *Server) announceExhausted(ctx context.Context, d *Delivery, code int) {
	msg, err := s.store.Message(ctx, d.APIKey, d.MessageID)
	if err != nil || msg.EventType == exhaustedType {
		return
	}
	data, err := structOf(map[string]any{"messageId": d.MessageID, "endpointId": d.EndpointID, "eventType": msg.EventType, "lastResponseStatusCode": code})
	if err != nil {
		return
	}
	ev := &eventsv1.Event{Id: "exhausted-" + d.ID, Type: exhaustedType, ApiKey: d.APIKey, WorkspaceId: d.WorkspaceID, Timestamp: float64(s.clock.Now().UnixMilli()), Data: data}
	if err := s.fanOut(ctx, d.APIKey, ev, ""); err != nil {
		s.log.ErrorContext(ctx, "webhooks: announcing an exhausted message", "message_id", d.MessageID, "error", err)
	}
}
