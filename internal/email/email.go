// Package email sends the service's mail (the owner-email verification link, notifications): a
// Sender interface, a sender that writes files (local runs), one that records (tests), one that
// speaks SMTP, and one that only notes that nothing was sent. A message is plain text, or plain
// text with an HTML rendering sent as multipart/alternative. Bodies hold secrets (the
// verification link): no sender ever logs one.
package email

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Message is one mail to one recipient.
type Message struct {
	To      string
	Subject string
	// Body is the plain text; with HTML set it is the text/plain alternative, which clients
	// without HTML and spam filters read, so it should say what the HTML says.
	Body string
	// HTML, when set, makes the message multipart/alternative: Body first, then this as
	// text/html, both UTF-8 and quoted-printable. Empty: a plain-text message, as before HTML
	// existed.
	HTML string
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
	msg, err := fileMessage(m, now)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	path := filepath.Join(d.dir, now.Format("20060102T150405.000000000Z")+"-"+hex.EncodeToString(suffix)+".eml")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: the operator's --mail-dir and a name made here
	if err != nil {
		return fmt.Errorf("email: write message: %w", err)
	}
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

// fileMessage is m as Dir writes it: no From (there is no sender) and LF line ends, which the
// file always had: it is read on the machine that wrote it.
func fileMessage(m Message, now time.Time) (string, error) {
	msg := "To: " + m.To + "\nSubject: " + encodeSubject(m.Subject, "\n") + "\nDate: " + now.Format(time.RFC1123Z) +
		"\nMessage-ID: " + messageID("localhost") + "\n"
	if m.HTML == "" {
		return msg + "Content-Type: text/plain; charset=utf-8\n\n" + m.Body, nil
	}
	contentType, body, err := alternative(m)
	if err != nil {
		return "", err
	}
	// Quoted-printable leaves no bare CR or LF in a part, so every CRLF is a line end.
	return msg + "MIME-Version: 1.0\nContent-Type: " + contentType + "\n\n" + strings.ReplaceAll(string(body), "\r\n", "\n"), nil
}

// smtpMessage is m as SMTP sends it, from the header value from whose address is at domain,
// with the CRLF line ends of RFC 5322.
func smtpMessage(m Message, from, domain string, now time.Time) (string, error) {
	msg := "From: " + from + "\r\nTo: " + m.To + "\r\nSubject: " + encodeSubject(m.Subject, "\r\n") +
		"\r\nDate: " + now.Format(time.RFC1123Z) + "\r\nMessage-ID: " + messageID(domain) +
		"\r\nMIME-Version: 1.0\r\n"
	if m.HTML == "" {
		return msg + "Content-Type: text/plain; charset=utf-8\r\n\r\n" + strings.ReplaceAll(m.Body, "\n", "\r\n") + "\r\n", nil
	}
	contentType, body, err := alternative(m)
	if err != nil {
		return "", err
	}
	return msg + "Content-Type: " + contentType + "\r\n\r\n" + string(body), nil
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

// encodeSubject makes a subject with characters outside printable ASCII RFC 2047 encoded words,
// since raw 8-bit header bytes need SMTPUTF8, which the sender does not ask for; one word a line
// (eol and a space between them), so that no subject makes a header line too long. A printable
// ASCII subject comes back unchanged.
func encodeSubject(s, eol string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	if enc == s {
		return s
	}
	// Spaces in the text are encoded ('_'), so every space left separates two encoded words.
	return strings.ReplaceAll(enc, " ", eol+" ")
}

// messageID returns a new Message-ID: 128 random bits at domain, unique without coordination.
func messageID(domain string) string { return "<" + rand.Text() + "@" + domain + ">" }

// alternative renders m's bodies as a multipart/alternative body, lines ending in CRLF: the
// text/plain part first (clients show the last part they can), then the text/html one, both
// UTF-8 in quoted-printable, which keeps every line within 76 characters whatever the body holds.
// The boundary starts with "=_": quoted-printable writes '=' only before two hex digits or a
// line end, so the boundary can never occur inside an encoded part.
func alternative(m Message) (contentType string, body []byte, err error) {
	boundary := "=_" + rand.Text()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		return "", nil, fmt.Errorf("multipart boundary: %w", err)
	}
	for _, part := range []struct{ contentType, body string }{{"text/plain", m.Body}, {"text/html", m.HTML}} {
		pw, err := w.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.contentType + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		if err != nil {
			return "", nil, fmt.Errorf("%s part: %w", part.contentType, err)
		}
		qp := quotedprintable.NewWriter(pw)
		if _, err := io.WriteString(qp, part.body); err != nil {
			return "", nil, fmt.Errorf("%s part: %w", part.contentType, err)
		}
		if err := qp.Close(); err != nil {
			return "", nil, fmt.Errorf("%s part: %w", part.contentType, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", nil, fmt.Errorf("multipart end: %w", err)
	}
	return mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": boundary}), b.Bytes(), nil
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
// is set. net/smtp sends the password only over TLS, or in the clear to localhost, 127.0.0.1 or
// ::1. A failed Send may be worth repeating: Transient says.
type SMTP struct {
	Addr     string // host:port
	Username string
	Password string
	From     string
	Timeout  time.Duration // per message; 30s when zero
	// TLSConfig is for STARTTLS; nil verifies the server's certificate against the system's
	// roots for the host of Addr. A config without ServerName gets that host. Set it to trust
	// a private CA (tests: smtptest.Server.RootCAs).
	TLSConfig *tls.Config
}

func (s SMTP) Send(ctx context.Context, m Message) error {
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return fmt.Errorf("smtp: from address %q: %w", s.From, err)
	}
	if err := checkHeaders(m); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	// Rendered before connecting, so a message that cannot be rendered never opens a
	// transaction it would have to abandon.
	msg, err := smtpMessage(m, s.From, from.Address[strings.LastIndexByte(from.Address, '@')+1:], time.Now().UTC())
	if err != nil {
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
	// After Quit the connection is closed already; after a failure, that failure is the error.
	defer func() { _ = c.Close() }()
	if ok, _ := c.Extension("STARTTLS"); ok {
		// A config naming the host: with none, crypto/tls refuses to start (it cannot verify
		// a certificate for no name), so STARTTLS never worked.
		cfg := &tls.Config{ServerName: host}
		if s.TLSConfig != nil {
			cfg = s.TLSConfig.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = host
			}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("smtp: starttls: %w", err)
		}
	}
	if s.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
			return fmt.Errorf("smtp: auth: %w", err)
		}
	}
	// The envelope takes the bare address: From may carry a display name ("Collab <a@b.c>").
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp: MAIL FROM: %w", err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return fmt.Errorf("smtp: RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return fmt.Errorf("smtp: write body: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp: end of data: %w", err)
	}
	// The server took the message with its reply to the end of DATA. A failing QUIT after that
	// is no failure to send: reporting it would have the caller send the message twice.
	_ = c.Quit()
	return nil
}

// Transient reports whether a failed Send may succeed when repeated: the server answered with a
// 4xx reply (greylisting, a full queue, a rate limit), or the connection failed or timed out.
// A 5xx reply (the server refuses this message, recipient or login) and a message refused
// before sending (a bad address) are permanent: repeating them only repeats the failure.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return reply.Code >= 400 && reply.Code < 500
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}
