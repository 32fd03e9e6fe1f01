// Package email sends the service's mail (the owner-email verification link): a Sender
// interface, a sender that logs (local runs), one that records (tests) and one that speaks SMTP.
package email

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"strings"
	"sync"
	"time"
)

// Message is one plain-text mail.
type Message struct {
	To      string
	Subject string
	Body    string
}

// Sender delivers messages.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Log writes each message to the log instead of sending it, so a local run shows the
// verification link in its output.
type Log struct{ Logger *slog.Logger }

func (l Log) Send(ctx context.Context, m Message) error {
	l.Logger.InfoContext(ctx, "email (not sent: no SMTP server configured)", "to", m.To, "subject", m.Subject, "body", m.Body)
	return nil
}

// Memory keeps every message, for tests. Safe for concurrent use.
type Memory struct {
	mu   sync.Mutex
	sent []Message
}

func (r *Memory) Send(_ context.Context, m Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, m)
	return nil
}

// Sent returns the messages sent so far.
func (r *Memory) Sent() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.sent...)
}

// SMTP sends through an SMTP server with STARTTLS when offered and PLAIN auth when a username
// is set.
type SMTP struct {
	Addr     string // host:port
	Username string
	Password string
	From     string
	Timeout  time.Duration // per message; 30s when zero
}

func (s SMTP) Send(ctx context.Context, m Message) error {
	if _, err := mail.ParseAddress(s.From); err != nil {
		return fmt.Errorf("smtp: from address %q: %w", s.From, err)
	}
	if _, err := mail.ParseAddress(m.To); err != nil {
		return fmt.Errorf("smtp: to address %q: %w", m.To, err)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("smtp: subject contains a line break")
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("smtp: address %q: %w", s.Addr, err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("smtp: dial: %w", err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("smtp: greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(nil); err != nil {
			return fmt.Errorf("smtp: starttls: %w", err)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return fmt.Errorf("smtp: auth: %w", err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return fmt.Errorf("smtp: MAIL FROM: %w", err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return fmt.Errorf("smtp: RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	msg := "From: " + s.From + "\r\nTo: " + m.To + "\r\nSubject: " + m.Subject +
		"\r\nDate: " + time.Now().UTC().Format(time.RFC1123Z) +
		"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.ReplaceAll(m.Body, "\n", "\r\n") + "\r\n"
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("smtp: write body: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp: end of data: %w", err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("smtp: quit: %w", err)
	}
	return nil
}
