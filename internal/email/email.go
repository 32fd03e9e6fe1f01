// Package email sends the service's mail (the owner-email verification link): a Sender
// interface, a sender that writes files (local runs), one that records (tests), one that speaks
// SMTP, and one that only notes that nothing was sent. Bodies hold secrets (the verification
// link): no sender ever logs one.
package email

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"path/filepath"
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

// Log sends nothing and logs that: recipient and subject, never the body, which holds the
// secret the mail exists to deliver. It is the fallback of a server built without a sender.
type Log struct{ Logger *slog.Logger }

func (l Log) Send(ctx context.Context, m Message) error {
	l.Logger.WarnContext(ctx, "email not sent: no mail sender configured", "to", m.To, "subject", m.Subject)
	return nil
}

// Dir writes each message as a file into a directory instead of sending it, so a local run
// without a mail server still hands over the verification link: in a file only the process's
// user can read, while the log says only that a mail was written, to whom and where.
type Dir struct {
	dir string
	log *slog.Logger
}

// NewDir returns a Dir writing into dir, created (mode 0700) when missing. An empty dir means a
// new private directory under the OS temporary directory.
func NewDir(dir string, log *slog.Logger) (*Dir, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "collab-mail-") // mode 0700
		if err != nil {
			return nil, fmt.Errorf("email: mail directory: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("email: mail directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("email: mail directory: %w", err)
	}
	log.Info("no SMTP server configured: emails are written as files", "mail_dir", abs)
	return &Dir{dir: abs, log: log}, nil
}

// Path is the directory the messages go to.
func (d *Dir) Path() string { return d.dir }

// Send writes m as an RFC 5322 message to a new file of mode 0600, named by time so a listing
// shows the newest last.
func (d *Dir) Send(ctx context.Context, m Message) error {
	if err := checkHeaders(m); err != nil {
		return fmt.Errorf("email: %w", err)
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return fmt.Errorf("email: file name: %w", err)
	}
	now := time.Now().UTC()
	path := filepath.Join(d.dir, now.Format("20060102T150405.000000000Z")+"-"+hex.EncodeToString(suffix)+".eml")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("email: write message: %w", err)
	}
	msg := "To: " + m.To + "\nSubject: " + m.Subject + "\nDate: " + now.Format(time.RFC1123Z) +
		"\nContent-Type: text/plain; charset=utf-8\n\n" + m.Body
	if _, err := f.WriteString(msg); err != nil {
		_ = f.Close()
		return fmt.Errorf("email: write message: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("email: write message: %w", err)
	}
	d.log.InfoContext(ctx, "email written (not sent: no SMTP server configured)", "to", m.To, "subject", m.Subject, "file", path)
	return nil
}

// checkHeaders refuses what would break the header block: a recipient that is not one bare
// address, or a subject with a line break.
func checkHeaders(m Message) error {
	if a, err := mail.ParseAddress(m.To); err != nil || a.Address != m.To {
		return fmt.Errorf("to address %q is not a bare address", m.To)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return errors.New("subject contains a line break")
	}
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
	if err := checkHeaders(m); err != nil {
		return fmt.Errorf("smtp: %w", err)
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
