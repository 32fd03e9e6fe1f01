package webhooks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	lifecyclev1 "github.com/collab/collab/proto/collab/lifecycle/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/clock"
	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/lifecycle"
	"github.com/collab/collab/internal/racetest"
)

// receiver is a local endpoint that answers with the statuses it is given, in order (the last
// repeating), and records what it got.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []int
	header  http.Header // added to every answer
	got     []*http.Request
	bodies  []string
}

func newReceiver(t *testing.T, answers ...int) *receiver {
	r := &receiver{answers: answers, header: http.Header{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req)
		r.bodies = append(r.bodies, string(body))
		code := http.StatusOK
		if len(r.answers) > 0 {
			code = r.answers[0]
			if len(r.answers) > 1 {
				r.answers = r.answers[1:]
			}
		}
		for k, v := range r.header {
			w.Header()[k] = v
		}
		r.mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte("answer"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) last() (*http.Request, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[len(r.got)-1], r.bodies[len(r.bodies)-1]
}

var tw = time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)

type harness struct {
	srv   *Server
	store *MemoryStore
	clock *clock.Fake
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{store: NewMemoryStore(), clock: clock.NewFake(tw)}
	srv, err := New(h.store, WithClock(h.clock), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	if _, err := srv.UpdateAdvancedWebhookConfig(k1, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	return h
}

var k1 = authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w", Settings: authn.Settings{AdvancedWebhooks: true}})

func strList(v ...string) *structpb.ListValue {
	l := &structpb.ListValue{}
	for _, s := range v {
		l.Values = append(l.Values, structpb.NewStringValue(s))
	}
	return l
}

func (h *harness) endpoint(t *testing.T, req *webhooksv1.CreateEndpointRequest) *webhooksv1.Endpoint {
	t.Helper()
	resp, err := h.srv.CreateEndpoint(k1, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetData()
}

func (h *harness) publish(t *testing.T, id, typ, channel string) {
	t.Helper()
	data, _ := structpb.NewStruct(map[string]any{"text": "hello", "author": map[string]any{"userId": "u1", "name": "Ada", "email": "ada@example.com"}})
	e := &eventsv1.Event{Id: id, Type: typ, ApiKey: "k1", WorkspaceId: "w", OrganizationId: "o", Channel: channel, Timestamp: float64(h.clock.Now().UnixMilli()),
		ActionUser: &eventsv1.ActionUser{UserId: "u1", Name: "Ada", Email: "ada@example.com"}, Data: data}
	if err := h.srv.HandleEvent(context.Background(), lifecycle.Domain(e)); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) secret(t *testing.T, id string) string {
	resp, err := h.srv.GetEndpointSecret(k1, &webhooksv1.GetEndpointSecretRequest{EndpointId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetData().GetSecret()
}

func verify(t *testing.T, r *http.Request, body string, secrets ...string) {
	t.Helper()
	ts := r.Header.Get("webhook-timestamp")
	header := r.Header.Get("webhook-signature")
	for _, sec := range secrets {
		want, _ := signature(sec, r.Header.Get("webhook-id"), mustInt(t, ts), []byte(body))
		if !strings.Contains(" "+header+" ", " "+want+" ") {
			t.Fatalf("signature header %q lacks the one of %s", header, sec)
		}
	}
}

func mustInt(t *testing.T, s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func TestFanOutFiltersAndSigns(t *testing.T) {
	h := newHarness(t)
	all := newReceiver(t)
	comments := newReceiver(t)
	general := newReceiver(t)
	off := newReceiver(t)
	eAll := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: all.srv.URL})
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: comments.srv.URL, FilterTypes: strList("comment.add")})
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: general.srv.URL, Channels: strList("general")})
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: off.srv.URL, Disabled: true})
	h.publish(t, "e1", "comment.add", "random")
	h.publish(t, "e2", "huddle.join", "general")
	h.publish(t, "e1", "comment.add", "random") // a redelivery: no second message
	h.srv.SendDue(context.Background())
	if all.count() != 2 || comments.count() != 1 || general.count() != 1 || off.count() != 0 {
		t.Fatalf("deliveries all %d comments %d general %d disabled %d", all.count(), comments.count(), general.count(), off.count())
	}
	r, body := comments.last()
	verify(t, r, body, h.secretOf(t, comments.srv.URL))
	if h.secret(t, eAll.GetId()) == h.secretOf(t, comments.srv.URL) {
		t.Fatal("two endpoints share a secret")
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(body), &payload); err != nil {
		t.Fatal(err)
	}
	if payload["event"] != "comment.add" || payload["actionType"] != "add" || payload["source"] != "comment" || payload["platform"] != "collab" ||
		payload["webhookId"] != r.Header.Get("webhook-id") || payload["data"].(map[string]any)["text"] != "hello" {
		t.Fatalf("payload %s", body)
	}
}

// secretOf finds the secret of the endpoint with the URL.
func (h *harness) secretOf(t *testing.T, url string) string {
	t.Helper()
	es, _ := h.store.Endpoints(context.Background(), "k1")
	for _, e := range es {
		if e.URL == url {
			return currentSecret(e)
		}
	}
	t.Fatalf("no endpoint at %s", url)
	return ""
}

func TestRetriesRetryAfterGoneAndExhaustion(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	flaky := newReceiver(t, 500, 429, 200)
	flaky.header.Set("Retry-After", "") // set per answer below
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: flaky.srv.URL})
	h.publish(t, "e1", "comment.add", "")
	h.srv.SendDue(ctx)
	ds, _ := h.store.DueDeliveries(ctx, tw.Add(time.Hour), 10, Room{})
	if flaky.count() != 1 || len(ds) != 1 || ds[0].Attempts != 1 {
		t.Fatalf("after a 500: %d posts, %+v", flaky.count(), ds)
	}
	wait := ds[0].NextAttempt.Sub(tw)
	if wait < 4*time.Second || wait > 6*time.Second {
		t.Fatalf("first retry after %v, want 5 s ±20%%", wait)
	}
	flaky.mu.Lock()
	flaky.header.Set("Retry-After", "120")
	flaky.mu.Unlock()
	h.clock.Advance(6 * time.Second)
	h.srv.SendDue(ctx)
	ds, _ = h.store.DueDeliveries(ctx, tw.Add(time.Hour), 10, Room{})
	if flaky.count() != 2 || !ds[0].NextAttempt.Equal(h.clock.Now().Add(120*time.Second)) {
		t.Fatalf("after a 429 with Retry-After 120: %+v", ds)
	}
	h.clock.Advance(121 * time.Second)
	h.srv.SendDue(ctx)
	r, body := flaky.last()
	verify(t, r, body, h.secret(t, e.GetId()))
	attempts, _ := h.srv.ListAttempts(k1, &webhooksv1.ListAttemptsRequest{EndpointId: e.GetId()})
	got := attempts.GetData().GetAttempts()
	if len(got) != 3 || got[0].GetStatus() != "success" || got[1].GetResponseStatusCode() != 429 || got[2].GetStatus() != "pending" {
		t.Fatalf("attempts %v", got)
	}

	// 410 disables the endpoint; it then receives nothing.
	gone := newReceiver(t, 410)
	eg := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: gone.srv.URL})
	h.publish(t, "e2", "comment.add", "")
	h.srv.SendDue(ctx)
	if ep, _ := h.store.Endpoint(ctx, "k1", eg.GetId()); !ep.Disabled || ep.DisabledReason == "" {
		t.Fatalf("after 410: %+v", ep)
	}
	h.publish(t, "e3", "comment.add", "")
	h.srv.SendDue(ctx)
	if gone.count() != 1 {
		t.Fatalf("a disabled endpoint got %d", gone.count())
	}

	// Always failing: exhausted after 8 attempts, announced to an endpoint that asked.
	dead := newReceiver(t, 503)
	watcher := newReceiver(t)
	ed := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: dead.srv.URL, FilterTypes: strList("huddle.join")})
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: watcher.srv.URL, FilterTypes: strList(exhaustedType)})
	h.publish(t, "e4", "huddle.join", "")
	for range 10 {
		h.srv.SendDue(ctx)
		h.clock.Advance(13 * time.Hour)
	}
	h.srv.SendDue(ctx)
	if dead.count() != 8 {
		t.Fatalf("%d attempts to a dead endpoint, want 8", dead.count())
	}
	if watcher.count() != 1 {
		t.Fatalf("exhaustion announced %d times", watcher.count())
	}
	_, body = watcher.last()
	if !strings.Contains(body, `"event":"message.attempt.exhausted"`) || !strings.Contains(body, ed.GetId()) {
		t.Fatalf("announcement %s", body)
	}
	// Still failing more than 5 days after its first failure, the endpoint is disabled.
	if ep, _ := h.store.Endpoint(ctx, "k1", ed.GetId()); ep.Disabled {
		t.Fatalf("disabled before 5 days: %+v", ep)
	}
	h.clock.Advance(3 * 24 * time.Hour)
	h.publish(t, "e5", "huddle.join", "")
	h.srv.SendDue(ctx)
	if ep, _ := h.store.Endpoint(ctx, "k1", ed.GetId()); !ep.Disabled {
		t.Fatalf("an endpoint failing for days is enabled: %+v", ep)
	}
}

// Two rotations at once both land: the secret each caller is given is stored, the later one
// current and the earlier one signing beside it (before, one overwrote the other in about 1 of
// 100 rounds, and its caller held a secret that never signed).
func TestConcurrentRotationsBothLand(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: "https://example.com/hook"})
	for round := range 300 {
		var got [2]string
		racetest.N(2, func(i int) {
			rot, err := h.srv.RotateEndpointSecret(k1, &webhooksv1.RotateEndpointSecretRequest{EndpointId: e.GetId()})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = rot.GetData().GetSecret()
		})
		ep, err := h.store.Endpoint(ctx, "k1", e.GetId())
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		for _, sec := range ep.Secrets {
			held[sec.Value] = true
		}
		if len(ep.Secrets) != 2 || !held[got[0]] || !held[got[1]] {
			t.Fatalf("round %d: rotations answered %q and %q, the endpoint holds %+v", round, got[0], got[1], ep.Secrets)
		}
	}
}

func TestRotationEncodingEncryptionAndProtection(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r := newReceiver(t)
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: r.srv.URL})
	old := h.secret(t, e.GetId())
	rot, err := h.srv.RotateEndpointSecret(k1, &webhooksv1.RotateEndpointSecretRequest{EndpointId: e.GetId()})
	if err != nil || rot.GetData().GetSecret() == old || h.secret(t, e.GetId()) != rot.GetData().GetSecret() {
		t.Fatalf("rotate %v %v", rot, err)
	}
	if _, err := h.srv.UpdateAdvancedWebhookConfig(k1, &webhooksv1.UpdateAdvancedWebhookConfigRequest{EncodeData: new(true), EnableDataProtection: new(true)}); err != nil {
		t.Fatal(err)
	}
	h.publish(t, "e1", "comment.add", "")
	h.srv.SendDue(ctx)
	req, body := r.last()
	verify(t, req, body, old, rot.GetData().GetSecret())
	var enc map[string]string
	_ = json.Unmarshal([]byte(body), &enc)
	raw, err := base64.StdEncoding.DecodeString(enc["encodedPayload"])
	if err != nil || strings.Contains(string(raw), "ada@example.com") || strings.Contains(string(raw), "Ada") || !strings.Contains(string(raw), `"userId":"u1"`) {
		t.Fatalf("encoded, protected payload %s (%v)", raw, err)
	}
	// A day later the old secret no longer signs.
	h.clock.Advance(25 * time.Hour)
	h.publish(t, "e2", "comment.add", "")
	h.srv.SendDue(ctx)
	req, _ = r.last()
	if n := len(strings.Fields(req.Header.Get("webhook-signature"))); n != 1 {
		t.Fatalf("%d signatures after the overlap", n)
	}
}

// A dead endpoint (never answers) holds only its own few workers: another endpoint's
// deliveries all go through meanwhile.
func TestADeadEndpointDoesNotHoldOthers(t *testing.T) {
	h := newHarness(t)
	hang := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer dead.Close()
	defer close(hang)
	live := newReceiver(t)
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: dead.URL, FilterTypes: strList("huddle.join")})
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: live.srv.URL, FilterTypes: strList("comment.add")})
	for i := range 20 {
		h.publish(t, "dead"+string(rune('a'+i)), "huddle.join", "")
		h.publish(t, "live"+string(rune('a'+i)), "comment.add", "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.srv.RunDeliveries(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for live.count() < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the live endpoint got %d of 20 while the other hung", live.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEndpointRulesAndFeatureSwitches(t *testing.T) {
	h := newHarness(t)
	bad := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		st := status.Convert(apierr.ToStatus(context.Background(), slog.New(slog.DiscardHandler), err))
		if st.Code() != code || (msg != "" && st.Message() != msg) {
			t.Errorf("%s: %v %q, want %v %q", what, st.Code(), st.Message(), code, msg)
		}
	}
	_, err := h.srv.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "ftp://x"})
	bad("ftp url", err, codes.InvalidArgument, "url must be a valid http(s) URL.")
	_, err = h.srv.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "https://x.example", FilterTypes: strList()})
	bad("empty filterTypes", err, codes.InvalidArgument, "filterTypes must be a non-empty array of strings when given.")
	_, err = h.srv.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "https://x.example", RateLimit: new(int32(0))})
	bad("rateLimit 0", err, codes.InvalidArgument, "rateLimit must be a positive integer (at most 10000).")
	meta, _ := structpb.NewStruct(map[string]any{"n": 1})
	_, err = h.srv.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "https://x.example", Metadata: meta})
	bad("metadata number", err, codes.InvalidArgument, "metadata values must be strings (metadata.n is not).")
	_, err = h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: "ep_x"})
	bad("nothing to update", err, codes.InvalidArgument, "At least one endpoint field besides endpointId must be provided.")
	_, err = h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: "ep_x", Disabled: new(true)})
	bad("unknown endpoint", err, codes.NotFound, "Endpoint not found.")

	// Private targets refused when not allowed.
	strict, _ := New(NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)))
	_, _ = strict.UpdateAdvancedWebhookConfig(k1, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)})
	_, err = strict.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "http://127.0.0.1:9/x"})
	bad("loopback", err, codes.InvalidArgument, msgPrivateTarget)
	_, err = strict.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "http://[::1]/x"})
	bad("loopback v6", err, codes.InvalidArgument, msgPrivateTarget)

	// The record echoes unset optionals as null, and the secret is not in it.
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: "https://x.example/hook"})
	if e.GetDescription() != nil || e.GetFilterTypes() != nil || e.GetRateLimit() != nil || e.GetUid() != nil || e.GetMetadata() != nil ||
		!strings.HasPrefix(e.GetId(), "ep_") || e.GetCreatedAt() != "2026-11-04T12:00:00.000Z" {
		t.Fatalf("created %v", e)
	}
	up, err := h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: e.GetId(), Description: new("d"), RateLimit: new(int32(5))})
	if err != nil || up.GetData().GetDescription().GetValue() != "d" || up.GetData().GetRateLimit().GetValue() != 5 || up.GetData().GetUrl() != "https://x.example/hook" {
		t.Fatalf("update %v %v", up, err)
	}
	// gRPC callers clear by clear_fields (over HTTP, the gateway fills it from nulls); alone it
	// counts as a field to update.
	up, err = h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: e.GetId(), ClearFields: []string{"rate_limit"}})
	if err != nil || up.GetData().GetRateLimit() != nil || up.GetData().GetDescription().GetValue() != "d" {
		t.Fatalf("clear rate_limit %v %v", up, err)
	}
	for _, c := range []struct {
		clear []string
		set   *webhooksv1.UpdateEndpointRequest
		msg   string
	}{
		{[]string{"url"}, nil, "url cannot be null (only description, filterTypes, channels, rateLimit, uid and metadata can be cleared)."},
		{[]string{"uid", "disabled"}, nil, "disabled cannot be null (only description, filterTypes, channels, rateLimit, uid and metadata can be cleared)."},
		{[]string{"filterTypes"}, nil, "clearFields[0] names no field of this request: give the proto names of the fields to clear " +
			"(description, filter_types, channels, rate_limit, uid, metadata)."},
		{[]string{"description", ""}, nil, "clearFields[1] names no field of this request: give the proto names of the fields to clear " +
			"(description, filter_types, channels, rate_limit, uid, metadata)."},
		{[]string{"description"}, &webhooksv1.UpdateEndpointRequest{Description: new("x")}, "description cannot be both set and cleared."},
		{[]string{"channels"}, &webhooksv1.UpdateEndpointRequest{Channels: strList("c")}, "channels cannot be both set and cleared."},
	} {
		req := &webhooksv1.UpdateEndpointRequest{}
		if c.set != nil {
			req = c.set
		}
		req.EndpointId, req.ClearFields = e.GetId(), c.clear
		_, err := h.srv.UpdateEndpoint(k1, req)
		bad("clear "+strings.Join(c.clear, ","), err, codes.InvalidArgument, c.msg)
	}
	if got, _ := h.srv.ListEndpoints(k1, &webhooksv1.ListEndpointsRequest{}); got.GetData().GetEndpoints()[0].GetDescription().GetValue() != "d" {
		t.Fatalf("a refused clear changed the endpoint: %v", got)
	}

	// Disabled config: endpoint writes refused; withheld feature: everything refused.
	_, _ = h.srv.UpdateAdvancedWebhookConfig(k1, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(false)})
	_, err = h.srv.CreateEndpoint(k1, &webhooksv1.CreateEndpointRequest{Url: "https://x.example"})
	bad("disabled", err, codes.FailedPrecondition, "Advanced webhooks are not enabled for this workspace.")
	withheld := authn.WithCaller(context.Background(), authn.Caller{APIKey: "k1", WorkspaceID: "w"})
	_, err = h.srv.GetAdvancedWebhookConfig(withheld, &webhooksv1.GetAdvancedWebhookConfigRequest{})
	bad("withheld", err, codes.FailedPrecondition, "Advanced webhooks are not available for this workspace.")
}

// Lifecycle events carry nothing for endpoints.
func TestLifecycleEventsAreNotDelivered(t *testing.T) {
	h := newHarness(t)
	r := newReceiver(t)
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: r.srv.URL})
	if err := h.srv.HandleEvent(context.Background(), &lifecyclev1.Event{Id: "x", Type: "document.deleted", ApiKey: "k1", OrganizationId: "o"}); err != nil {
		t.Fatal(err)
	}
	h.srv.SendDue(context.Background())
	if r.count() != 0 {
		t.Fatal("a lifecycle event was delivered")
	}
}

// A worker that dies holding a delivery loses nothing: once its lease runs out, another sends
// it; while the lease holds, nobody does.
func TestAKilledWorkersDeliveryIsTakenOver(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r := newReceiver(t)
	h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: r.srv.URL})
	h.publish(t, "e1", "comment.add", "")
	due, _ := h.store.DueDeliveries(ctx, h.clock.Now(), 10, Room{})
	if len(due) != 1 {
		t.Fatalf("due %v", due)
	}
	// The other worker claims it and dies.
	if ok, err := h.store.ClaimDelivery(ctx, due[0].ID, h.clock.Now(), h.clock.Now().Add(leaseFor)); !ok || err != nil {
		t.Fatalf("claim %v %v", ok, err)
	}
	h.srv.SendDue(ctx)
	if r.count() != 0 {
		t.Fatal("sent while another worker held the lease")
	}
	h.clock.Advance(leaseFor + time.Second)
	h.srv.SendDue(ctx)
	if r.count() != 1 {
		t.Fatalf("%d deliveries after the lease ran out, want 1", r.count())
	}
}

// The basic config sends every event to rawNotificationUrl with its auth token, unsigned.
func TestBasicWebhookService(t *testing.T) {
	h := newHarness(t)
	r := newReceiver(t)
	resp, err := h.srv.UpdateWebhookConfig(k1, &webhooksv1.UpdateWebhookConfigRequest{UseWebhookService: new(true),
		WebhookServiceConfig: &webhooksv1.WebhookServiceConfigPatch{AuthToken: new("secret-token-1234"), RawNotificationUrl: new(r.srv.URL + "/raw")}})
	if err != nil || resp.GetData().GetWebhookServiceConfig().GetAuthToken() != "****1234" {
		t.Fatalf("%v %v", resp, err)
	}
	h.publish(t, "e1", "comment.add", "")
	h.srv.SendDue(context.Background())
	if r.count() != 1 {
		t.Fatalf("%d posts", r.count())
	}
	req, body := r.last()
	if req.URL.Path != "/raw" || req.Header.Get("Authorization") != "secret-token-1234" || req.Header.Get("webhook-signature") != "" || !strings.Contains(body, `"event":"comment.add"`) {
		t.Fatalf("raw post %v %s", req.Header, body)
	}
}

// Resend queues a message again; recover queues every failed one of a window.
func TestResendAndRecover(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r := newReceiver(t, 400) // refuses until told otherwise
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: r.srv.URL})
	h.publish(t, "e1", "comment.add", "")
	h.publish(t, "e2", "comment.add", "")
	for range 9 { // exhaust both
		h.srv.SendDue(ctx)
		h.clock.Advance(13 * time.Hour)
	}
	failed := r.count()
	if failed != 16 {
		t.Fatalf("%d attempts before exhaustion, want 16", failed)
	}
	r.mu.Lock()
	r.answers = []int{200}
	r.mu.Unlock()
	msgs, err := h.srv.ListMessages(k1, &webhooksv1.ListMessagesRequest{EndpointId: e.GetId()})
	if err != nil || len(msgs.GetData().GetMessages()) != 2 {
		t.Fatalf("%v %v", msgs, err)
	}
	// A disabled endpoint: a resend is refused, not promised and never sent; enabled again, it
	// is sent.
	if _, err := h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: e.GetId(), Disabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = h.srv.ResendMessage(k1, &webhooksv1.ResendMessageRequest{MessageId: msgs.GetData().GetMessages()[0].GetId(), EndpointId: e.GetId()})
	if st := status.Convert(apierr.ToStatus(ctx, slog.New(slog.DiscardHandler), err)); st.Code() != codes.FailedPrecondition ||
		st.Message() != "The endpoint is disabled: enable it to resend messages to it." {
		t.Fatalf("resend to a disabled endpoint: %v", st)
	}
	if _, err := h.srv.UpdateEndpoint(k1, &webhooksv1.UpdateEndpointRequest{EndpointId: e.GetId(), Disabled: new(false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.ResendMessage(k1, &webhooksv1.ResendMessageRequest{MessageId: msgs.GetData().GetMessages()[0].GetId(), EndpointId: e.GetId()}); err != nil {
		t.Fatal(err)
	}
	h.srv.SendDue(ctx)
	if r.count() != failed+1 {
		t.Fatalf("resend: %d", r.count()-failed)
	}
	rec, err := h.srv.RecoverEndpoint(k1, &webhooksv1.RecoverEndpointRequest{EndpointId: e.GetId(), Since: tw.Add(-time.Hour).Format(time.RFC3339)})
	if err != nil || rec.GetData().GetCount() != 1 {
		t.Fatalf("recover %v %v", rec, err)
	}
	h.srv.SendDue(ctx)
	if r.count() != failed+2 {
		t.Fatalf("recover sent %d", r.count()-failed-1)
	}
	_, err = h.srv.ResendMessage(k1, &webhooksv1.ResendMessageRequest{MessageId: "msg_nope", EndpointId: e.GetId()})
	if status.Code(apierr.ToStatus(ctx, slog.New(slog.DiscardHandler), err)) != codes.NotFound {
		t.Fatalf("resend of an unknown message: %v", err)
	}
}

// Without private targets allowed, a name that resolves to loopback is refused when dialled,
// and no redirect is followed.
func TestTargetsAndRedirects(t *testing.T) {
	r := newReceiver(t)
	port := r.srv.URL[strings.LastIndex(r.srv.URL, ":"):]
	strict := newClient(targets{}, workers, attemptTimeout)
	resp, err := strict.Post("http://localhost"+port+"/x", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("a loopback name was dialled")
	}
	if !strings.Contains(err.Error(), egress.ErrBlocked.Error()) {
		t.Fatalf("refusal %v", err)
	}
	if r.count() != 0 {
		t.Fatal("the receiver was reached")
	}
	redirect := httptest.NewServer(http.RedirectHandler(r.srv.URL+"/elsewhere", http.StatusFound))
	defer redirect.Close()
	resp, err = newClient(targets{allowPrivate: true}, workers, attemptTimeout).Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || r.count() != 0 {
		t.Fatalf("redirect followed: %d, %d at the target", resp.StatusCode, r.count())
	}
}

// A resend while the delivery is in flight is not lost to the in-flight attempt's outcome: the
// message goes again once the lease is over.
func TestResendWhileInFlight(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var hits atomic.Int32
	entered, release := make(chan struct{}, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: srv.URL})
	h.publish(t, "e1", "comment.add", "")
	done := make(chan struct{})
	go func() { h.srv.SendDue(ctx); close(done) }()
	<-entered
	msgs, _ := h.srv.ListMessages(k1, &webhooksv1.ListMessagesRequest{})
	if _, err := h.srv.ResendMessage(k1, &webhooksv1.ResendMessageRequest{MessageId: msgs.GetData().GetMessages()[0].GetId(), EndpointId: e.GetId()}); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	h.clock.Advance(leaseFor + time.Second)
	h.srv.SendDue(ctx)
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d sends, want 2 (the resend after the attempt in flight)", n)
	}
}

// flakyStore fails one read of messages, as a dropped connection would.
type flakyStore struct {
	*MemoryStore
	fail atomic.Bool
}

func (f *flakyStore) Messages(ctx context.Context, refs []Ref) (map[Ref]*Message, error) {
	if f.fail.CompareAndSwap(true, false) {
		return nil, errors.New("connection reset")
	}
	return f.MemoryStore.Messages(ctx, refs)
}

// A store that fails for a moment delays a delivery, never fails it.
func TestATransientStoreErrorDelaysOnly(t *testing.T) {
	fs := &flakyStore{MemoryStore: NewMemoryStore()}
	c := clock.NewFake(tw)
	srv, _ := New(fs, WithClock(c), WithLogger(slog.New(slog.DiscardHandler)), WithPrivateTargets(true))
	h := &harness{srv: srv, store: fs.MemoryStore, clock: c}
	if _, err := srv.UpdateAdvancedWebhookConfig(k1, &webhooksv1.UpdateAdvancedWebhookConfigRequest{IsEnabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t)
	e := h.endpoint(t, &webhooksv1.CreateEndpointRequest{Url: r.srv.URL})
	h.publish(t, "e1", "comment.add", "")
	fs.fail.Store(true)
	srv.SendDue(context.Background())
	c.Advance(10 * time.Second)
	srv.SendDue(context.Background())
	if r.count() != 1 {
		t.Fatalf("%d sends after one store error, want 1", r.count())
	}
	ep, _ := h.store.Endpoint(context.Background(), "k1", e.GetId())
	if !ep.FailingSince.IsZero() {
		t.Fatal("a store error counted against the endpoint")
	}
}
