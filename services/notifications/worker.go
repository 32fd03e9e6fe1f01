package notifications

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"

	"github.com/collab/collab/internal/egress"
	"github.com/collab/collab/internal/email"
)

// Delivery limits.
const (
	sendTimeout   = 15 * time.Second // one email or Slack post
	leaseFor      = 2 * time.Minute  // a claimed delivery is this worker's for so long
	workerPoll    = time.Second
	workerBatch   = 50
	maxAttempts   = 8
	maxRetryAfter = time.Hour
	// retention is how long sent and failed deliveries are kept (as webhook messages are); the
	// retries of one end within about 11 hours of its creation.
	retention  = 30 * 24 * time.Hour
	pruneEvery = time.Hour
)

// retryAfter is the wait after each failed attempt (then ±20%): 10 s, 1 min, 5 min, 15 min,
// 1 h, 3 h, 6 h; the eighth failure gives up.
var retryAfter = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour}

// permanent marks a failure no retry can mend (a refused address, a revoked Slack webhook).
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retryLater carries a wait the receiver asked for (Slack's Retry-After).
type retryLater struct {
	err   error
	after time.Duration
}

func (r retryLater) Error() string { return r.err.Error() }
func (r retryLater) Unwrap() error { return r.err }

func (s *Server) wakeWorker() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunDeliveries sends queued deliveries until ctx ends: at start (what a previous run left),
// when a fan-out queued some, and every second. Several processes may run it on one store:
// a delivery is claimed (leased) before it is sent.
func (s *Server) RunDeliveries(ctx context.Context) {
	t := time.NewTicker(workerPoll)
	defer t.Stop()
	var pruned time.Time
	for {
		if now := s.clock.Now(); now.Sub(pruned) >= pruneEvery {
			s.Prune(ctx)
			pruned = now
		}
		s.SendDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// Prune removes the sent and failed deliveries older than the retention (30 days); the worker
// runs it hourly, so the queue's collection does not grow for ever (docs/api.md,
// "Notifications").
func (s *Server) Prune(ctx context.Context) {
	n, err := s.store.PruneDeliveries(ctx, s.clock.Now().Add(-retention))
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.ErrorContext(ctx, "notifications: pruning old deliveries", "error", err)
	case n > 0:
		s.log.InfoContext(ctx, "notifications: pruned old deliveries", "deliveries", n)
	}
}

// SendDue sends every delivery that is due now (tests step the worker with it).
func (s *Server) SendDue(ctx context.Context) {
	mails := &mailContent{s: s, of: map[notifRef]*headliner{}}
	for ctx.Err() == nil {
		due, err := s.store.DueDeliveries(ctx, s.clock.Now(), workerBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.ErrorContext(ctx, "notifications: reading due deliveries", "error", err)
			}
			return
		}
		claimed := 0
		for _, d := range due {
			now := s.clock.Now()
			ok, err := s.store.ClaimDelivery(ctx, d.ID, now, now.Add(leaseFor))
			if err != nil {
				s.log.ErrorContext(ctx, "notifications: claiming a delivery", "delivery_id", d.ID, "error", err)
				continue
			}
			if ok {
				claimed++
				s.send(ctx, d, mails)
			}
		}
		// Nothing claimed (a failing store, or others have them): wait for the next poll.
		if len(due) < workerBatch || claimed == 0 {
			return
		}
	}
}

// send makes one attempt and records its outcome. A crash between the send and the record
// sends it again after the lease: at least once, never again once recorded as sent.
func (s *Server) send(ctx context.Context, d *Delivery, mails *mailContent) {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	var err error
	switch d.Channel {
	case ChannelEmail:
		err = s.sendEmail(sctx, d, mails)
	case ChannelSlack:
		err = s.sendSlack(sctx, d)
	default:
		err = permanent{fmt.Errorf("unknown channel %q", d.Channel)}
	}
	cancel()
	if ctx.Err() != nil {
		return // shutting down: the lease runs out and the next run sends it
	}
	now := s.clock.Now()
	attempts := d.Attempts + 1
	state, next, lastErr := StateSent, time.Time{}, ""
	var perm permanent
	var later retryLater
	switch {
	case err == nil:
	case errors.As(err, &perm) || attempts >= maxAttempts:
		state, lastErr = StateFailed, err.Error()
		s.log.WarnContext(ctx, "notifications: delivery failed for good", "delivery_id", d.ID, "channel", d.Channel, "attempts", attempts, "error", err)
	default:
		wait := retryAfter[min(attempts-1, len(retryAfter)-1)]
		if errors.As(err, &later) && later.after > 0 {
			wait = min(later.after, maxRetryAfter)
		} else {
			wait = time.Duration(float64(wait) * (0.8 + rand.Float64()*0.4)) //nolint:gosec // G404: jitter spreading retries needs no unpredictability
		}
		state, next, lastErr = StatePending, now.Add(wait), err.Error()
		s.log.WarnContext(ctx, "notifications: delivery failed, will retry", "delivery_id", d.ID, "channel", d.Channel, "attempt", attempts, "retry_at", next, "error", err)
	}
	s.metrics.observe(d.Channel, state)
	if err := s.store.FinishDelivery(ctx, d.ID, state, attempts, next, lastErr, now); err != nil {
		s.log.ErrorContext(ctx, "notifications: recording a delivery", "delivery_id", d.ID, "error", err)
	}
}

// notifRef names a notification of an organization incarnation.
type notifRef struct{ apiKey, orgID, orgGen, id string }

// mailContent renders the mails of one SendDue run: each notification is read from the store
// once however many of its mails the run sends (at most mailContentNotifications kept).
type mailContent struct {
	s  *Server
	of map[notifRef]*headliner
}

const mailContentNotifications = 64

// message is the mail of an email delivery, rendered from its notification for its recipient
// (issue 20: the content is stored once); a delivery queued before that carries its mail.
func (c *mailContent) message(ctx context.Context, d *Delivery) (email.Message, error) {
	if d.Text != "" || d.HTML != "" {
		return email.Message{To: d.To, Subject: d.Subject, Body: d.Text, HTML: d.HTML}, nil
	}
	ref := notifRef{d.APIKey, d.OrganizationID, d.OrgGen, d.NotificationID}
	h := c.of[ref]
	if h == nil {
		n, err := c.s.store.Notification(ctx, Scope{APIKey: d.APIKey, OrganizationID: d.OrganizationID, OrgGen: d.OrgGen}, d.NotificationID)
		if errors.Is(err, ErrNotFound) {
			return email.Message{}, permanent{errors.New("the notification was deleted")}
		}
		if err != nil {
			return email.Message{}, fmt.Errorf("read the notification: %w", err)
		}
		if len(c.of) >= mailContentNotifications {
			clear(c.of)
		}
		n.Recipients = nil // not needed to render, and a notification to everyone lists every member
		h = newHeadliner(n)
		c.of[ref] = h
	}
	headline := h.For(User{UserID: d.UserID, Name: d.Name, Email: d.To})
	text, html := emailBodies(headline, h.n.Body, h.n.DocumentID)
	return email.Message{To: d.To, Subject: subject(headline), Body: text, HTML: html}, nil
}

func (s *Server) sendEmail(ctx context.Context, d *Delivery, mails *mailContent) error {
	msg, err := mails.message(ctx, d)
	if err != nil {
		return err
	}
	err = s.mail.Send(ctx, msg)
	if err != nil && !email.Transient(err) {
		return permanent{err} // refused (5xx) or a message no server takes
	}
	return err
}

func (s *Server) sendSlack(ctx context.Context, d *Delivery) error {
	hook, err := s.peers.Workspace.GetSlackWebhook(ctx, &workspacev1.GetSlackWebhookRequest{WorkspaceId: d.WorkspaceID})
	if err != nil {
		return fmt.Errorf("slack webhook: %w", err)
	}
	if hook.GetUrl() == "" {
		return permanent{errors.New("the workspace has no Slack webhook any more")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.GetUrl(), bytes.NewReader([]byte(d.Text)))
	if err != nil {
		return permanent{fmt.Errorf("slack request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if errors.Is(err, egress.ErrBlocked) {
		return permanent{egress.ErrBlocked}
	}
	if err != nil {
		// The URL is a secret: say where, not what.
		return fmt.Errorf("slack post to %s failed", req.URL.Host)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return retryLater{err: fmt.Errorf("slack answered %d", resp.StatusCode), after: time.Duration(wait) * time.Second}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return permanent{fmt.Errorf("slack answered %d", resp.StatusCode)}
	default:
		return fmt.Errorf("slack answered %d", resp.StatusCode)
	}
}
