package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	eventsv1 "github.com/collab/collab/proto/collab/events/v1"
	webhooksv1 "github.com/collab/collab/proto/collab/webhooks/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/ids"
	"github.com/collab/collab/internal/validate"
)

func structOf(m map[string]any) (*structpb.Struct, error) { return structpb.NewStruct(m) }

func messageProto(m *Message) *webhooksv1.WebhookMessage {
	payload := &structpb.Struct{}
	_ = protojson.Unmarshal([]byte(m.Payload), payload) // written by us as a JSON object
	return &webhooksv1.WebhookMessage{Id: m.ID, EventType: m.EventType, Payload: payload, Timestamp: iso(m.CreatedAt)}
}

func (s *Server) ListMessages(ctx context.Context, req *webhooksv1.ListMessagesRequest) (*webhooksv1.ListMessagesResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := listLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	if req.GetEndpointId() != "" {
		if _, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId()); err != nil {
			return nil, err
		}
	}
	types, err := validate.IDs("eventTypes", req.GetEventTypes(), false, maxFilterTypes)
	if err != nil {
		return nil, err
	}
	if len(types) == 0 {
		types = nil
	}
	if err := validate.OptionalID("iterator", req.GetIterator()); err != nil {
		return nil, err
	}
	ms, err := s.store.ListMessages(ctx, c.APIKey, req.GetEndpointId(), types, req.GetIterator(), limit+1)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	page := &webhooksv1.MessagesPage{Messages: []*webhooksv1.WebhookMessage{}, Done: len(ms) <= limit}
	if !page.Done {
		ms = ms[:limit]
		page.Iterator = wrapperspb.String(ms[len(ms)-1].ID)
	}
	for _, m := range ms {
		page.Messages = append(page.Messages, messageProto(m))
	}
	return &webhooksv1.ListMessagesResponse{Status: statusSuccess, Message: msgMessages, Data: page}, nil
}

func (s *Server) ListAttempts(ctx context.Context, req *webhooksv1.ListAttemptsRequest) (*webhooksv1.ListAttemptsResponse, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetMessageId() == "" && req.GetEndpointId() == "" {
		return nil, apierr.InvalidArgument("Provide messageId or endpointId.")
	}
	for field, v := range map[string]string{"messageId": req.GetMessageId(), "endpointId": req.GetEndpointId(), "iterator": req.GetIterator()} {
		if err := validate.OptionalID(field, v); err != nil {
			return nil, err
		}
	}
	switch req.GetStatus() {
	case "", StateSuccess, StatePending, StateFailed:
	default:
		return nil, apierr.InvalidArgument("status must be one of success, pending, failed.")
	}
	limit, err := listLimit(req.Limit)
	if err != nil {
		return nil, err
	}
	as, err := s.store.ListAttempts(ctx, c.APIKey, AttemptFilter{MessageID: req.GetMessageId(), EndpointID: req.GetEndpointId(), Status: req.GetStatus()}, req.GetIterator(), limit+1)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	page := &webhooksv1.AttemptsPage{Attempts: []*webhooksv1.Attempt{}, Done: len(as) <= limit}
	if !page.Done {
		as = as[:limit]
		page.Iterator = wrapperspb.String(as[len(as)-1].ID)
	}
	for _, a := range as {
		page.Attempts = append(page.Attempts, &webhooksv1.Attempt{Id: a.ID, MessageId: a.MessageID, EndpointId: a.EndpointID, ResponseStatusCode: int32(a.StatusCode), //nolint:gosec // G115: an HTTP status code (100..999)
			Response: a.Response, DurationMs: a.DurationMs, Status: a.Status, Timestamp: iso(a.Timestamp)})
	}
	return &webhooksv1.ListAttemptsResponse{Status: statusSuccess, Message: msgAttempts, Data: page}, nil
}

func (s *Server) ResendMessage(ctx context.Context, req *webhooksv1.ResendMessageRequest) (*webhooksv1.StatusResponse, error) {
	c, _, err := s.enabled(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.ID("messageId", req.GetMessageId()); err != nil {
		return nil, err
	}
	ep, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	if _, err := s.store.Message(ctx, c.APIKey, req.GetMessageId()); errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound(msgMessageMissing)
	} else if err != nil {
		return nil, fmt.Errorf("read message: %w", err)
	}
	if ep.Disabled {
		// A disabled endpoint is sent nothing: "resent" would be a promise never kept.
		return nil, apierr.FailedPrecondition(msgResendDisabled)
	}
	now := s.now()
	id := DeliveryID(c.APIKey, req.GetMessageId(), req.GetEndpointId())
	// A message never queued to the endpoint (filtered out, or sent before it existed) is
	// queued now; one that was is made due again.
	if err := s.store.QueueDeliveries(ctx, []*Delivery{{ID: id, APIKey: c.APIKey, WorkspaceID: c.WorkspaceID, MessageID: req.GetMessageId(), EndpointID: req.GetEndpointId(),
		State: StatePending, NextAttempt: now, CreatedAt: now, UpdatedAt: now}}); err != nil {
		return nil, fmt.Errorf("resend: %w", err)
	}
	if _, err := s.store.Requeue(ctx, []string{id}, now); err != nil {
		return nil, fmt.Errorf("resend: %w", err)
	}
	s.engine.notify()
	return &webhooksv1.StatusResponse{Status: statusSuccess, Message: msgResent}, nil
}

func parseTime(field, v string, required bool) (time.Time, error) {
	if v == "" {
		if required {
			return time.Time{}, apierr.InvalidArgument("%s is required.", field)
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, apierr.InvalidArgument("%s must be an ISO-8601 time (e.g. 2026-01-02T15:04:05Z).", field)
	}
	return t.UTC(), nil
}

func (s *Server) RecoverEndpoint(ctx context.Context, req *webhooksv1.RecoverEndpointRequest) (*webhooksv1.RecoverEndpointResponse, error) {
	c, _, err := s.enabled(ctx)
	if err != nil {
		return nil, err
	}
	ep, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	since, err := parseTime("since", req.GetSince(), true)
	if err != nil {
		return nil, err
	}
	until, err := parseTime("until", req.GetUntil(), false)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if until.IsZero() {
		until = now.Add(time.Millisecond)
	}
	if !since.Before(until) {
		return nil, apierr.InvalidArgument("since must be before until.")
	}
	if ep.Disabled {
		// As for a resend: each delivery queued again would fail at once, "recovered" a promise
		// never kept.
		return nil, apierr.FailedPrecondition(msgRecoverDisabled)
	}
	failed, err := s.store.FailedDeliveries(ctx, c.APIKey, req.GetEndpointId(), since, until)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	n, err := s.store.Requeue(ctx, failed, now)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	s.engine.notify()
	count := int32(math.MaxInt32) // the API's field is an int32: more than that says "at least"
	if n >= 0 && n < math.MaxInt32 {
		count = int32(n)
	}
	return &webhooksv1.RecoverEndpointResponse{Status: statusSuccess, Message: msgRecovered, Data: &webhooksv1.Recovered{Count: count}}, nil
}

func (s *Server) SendTestEvent(ctx context.Context, req *webhooksv1.SendTestEventRequest) (*webhooksv1.SendTestEventResponse, error) {
	c, _, err := s.enabled(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.endpoint(ctx, c.APIKey, req.GetEndpointId())
	if err != nil {
		return nil, err
	}
	typ := req.GetEventType()
	if typ == "" {
		typ = "test.event"
	}
	if err := validate.EventType("eventType", typ); err != nil {
		return nil, err
	}
	if e.Disabled {
		// The test's delivery would fail at once, and its messageId promise a sending.
		return nil, apierr.FailedPrecondition(msgTestDisabled)
	}
	data, _ := structOf(map[string]any{"test": true})
	ev := &eventsv1.Event{Id: "test_" + ids.Random(20), Type: typ, ApiKey: c.APIKey, WorkspaceId: c.WorkspaceID, Timestamp: float64(s.clock.Now().UnixMilli()), Data: data}
	if err := s.fanOut(ctx, c.APIKey, ev, e.ID); err != nil {
		return nil, err
	}
	at := time.UnixMilli(int64(ev.GetTimestamp())).UTC()
	return &webhooksv1.SendTestEventResponse{Status: statusSuccess, Message: msgTestSent, Data: &webhooksv1.SentMessage{MessageId: messageID(c.APIKey, ev.GetId(), at)}}, nil
}
