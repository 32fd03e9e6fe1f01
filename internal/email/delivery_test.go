package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"mime"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collab/collab/internal/testkit/smtptest"
)

// rich is a message with everything that must survive the trip: non-ASCII in the subject and
// both bodies, a 2,000-character line, trailing spaces, lines starting with "." and "From ",
// '=' signs, and what looks like a multipart boundary.
var rich = Message{
	To:      "reader@example.com",
	Subject: "Grüße: 3 new comments on “Roadmap” ✓",
	Body: "Hi Zoë,\n\nAnn commented: naïve café ✓ 日本語\n" + strings.Repeat("0123456789", 200) + "\n" +
		".a line starting with a dot\nFrom here on\ntrailing spaces   \n=3D is not an escape\n--=_boundary?\n",
	HTML: "<!doctype html><html><body><p>Hi Zoë,</p><p>Ann commented: <b>naïve café ✓ 日本語</b></p><p>" +
		strings.Repeat("<i>é</i>0123456789", 150) + "</p>\n<p style=\"color:#333\">.dot</p>\n--=_boundary?</body></html>",
}

func TestSMTPSendsHTMLAsMultipartAlternative(t *testing.T) {
	srv := smtptest.Start(t)
	before := time.Now().Add(-time.Second)
	if err := (SMTP{Addr: srv.Addr(), From: "collab@example.com"}).Send(context.Background(), rich); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)
	if len(got) != 1 || got[0].From != "collab@example.com" || len(got[0].To) != 1 || got[0].To[0] != rich.To {
		t.Fatalf("envelope %+v", got)
	}
	m := got[0].Parsed(t)
	if m.Subject != rich.Subject || m.To != rich.To || m.From != "collab@example.com" {
		t.Fatalf("headers: subject %q, to %q, from %q", m.Subject, m.To, m.From)
	}
	if m.Text != rich.Body {
		t.Errorf("text part\n got %q\nwant %q", m.Text, rich.Body)
	}
	if m.HTML != rich.HTML {
		t.Errorf("HTML part\n got %q\nwant %q", m.HTML, rich.HTML)
	}
	if m.ContentType != "multipart/alternative" || m.Header.Get("MIME-Version") != "1.0" || len(m.Parts) != 2 {
		t.Fatalf("structure %s, MIME-Version %q, %d parts", m.ContentType, m.Header.Get("MIME-Version"), len(m.Parts))
	}
	for i, want := range []string{"text/plain", "text/html"} { // plain first: clients show the last they can
		if p := m.Parts[i]; p.ContentType != want || p.Charset != "utf-8" || p.TransferEncoding != "quoted-printable" {
			t.Errorf("part %d: %+v", i, p)
		}
	}
	if id := m.MessageID; !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@example.com>") || len(id) < 30 {
		t.Errorf("Message-ID %q", id)
	}
	if d, err := m.Header.Date(); err != nil || d.Before(before) || d.After(time.Now().Add(time.Second)) {
		t.Errorf("Date %q: %v", m.Header.Get("Date"), err)
	}
	// The boundary occurs only where it delimits: the header, two parts, the end.
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(params["boundary"], "=_") || strings.Count(string(got[0].Data), params["boundary"]) != 4 {
		t.Errorf("boundary %q: %v", params["boundary"], err)
	}
	// On the wire: 7-bit, header lines within RFC 5322's 998 characters, body lines within
	// quoted-printable's 76, whatever the subject and bodies hold.
	head, _, _ := strings.Cut(string(got[0].Data), "\r\n\r\n")
	headLines := strings.Count(head, "\r\n") + 1
	for i, line := range strings.Split(string(got[0].Data), "\r\n") {
		limit := 76
		if i < headLines {
			limit = 998
		}
		if len(line) > limit {
			t.Errorf("line %d has %d characters", i+1, len(line))
		}
		for _, c := range []byte(line) {
			if c >= 0x80 || c == '\r' || c == '\n' {
				t.Fatalf("line %d holds byte %#x", i+1, c)
			}
		}
	}
}

// Two messages never share a Message-ID or a boundary.
func TestSMTPMessageIDsAndBoundariesAreFresh(t *testing.T) {
	srv := smtptest.Start(t)
	s := SMTP{Addr: srv.Addr(), From: "Collab <collab@example.com>"}
	for range 2 {
		if err := s.Send(context.Background(), rich); err != nil {
			t.Fatal(err)
		}
	}
	got := srv.WaitFor(t, 2, 5*time.Second)
	a, b := got[0].Parsed(t), got[1].Parsed(t)
	if a.MessageID == b.MessageID || a.Header.Get("Content-Type") == b.Header.Get("Content-Type") {
		t.Fatalf("repeated: %q %q / %q %q", a.MessageID, b.MessageID, a.Header.Get("Content-Type"), b.Header.Get("Content-Type"))
	}
	if !strings.HasSuffix(a.MessageID, "@example.com>") {
		t.Fatalf("Message-ID %q", a.MessageID)
	}
}

// Without HTML a message is the single text/plain part it always was.
func TestSMTPPlainMessageThroughARealServer(t *testing.T) {
	srv := smtptest.Start(t)
	if err := (SMTP{Addr: srv.Addr(), From: "collab@example.com"}).Send(context.Background(), verification); err != nil {
		t.Fatal(err)
	}
	raw := string(srv.WaitFor(t, 1, 5*time.Second)[0].Data)
	head, body, _ := strings.Cut(raw, "\r\n\r\n")
	if !strings.HasPrefix(head, "From: collab@example.com\r\nTo: owner@example.com\r\nSubject: Verify your email for Acme\r\nDate: ") ||
		!strings.HasSuffix(head, "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8") || !strings.Contains(head, "\r\nMessage-ID: <") {
		t.Fatalf("header block %q", head)
	}
	if body != strings.ReplaceAll(verification.Body, "\n", "\r\n")+"\r\n" {
		t.Fatalf("body %q", body)
	}
}

func TestSMTPFailuresSayWhetherToRetry(t *testing.T) {
	srv := smtptest.Start(t)
	s := SMTP{Addr: srv.Addr(), From: "collab@example.com"}
	srv.FailNext(1)
	err := s.Send(context.Background(), rich)
	if err == nil || !Transient(err) || !strings.Contains(err.Error(), "451") {
		t.Fatalf("a 451 reply: %v (transient %v)", err, Transient(err))
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages delivered by a failed send", n)
	}
	if err := s.Send(context.Background(), rich); err != nil { // the caller's retry
		t.Fatalf("retry: %v", err)
	}
	if got := srv.WaitFor(t, 1, 5*time.Second); len(got) != 1 || srv.Attempts() != 2 {
		t.Fatalf("%d messages after %d attempts", len(got), srv.Attempts())
	}

	srv.RejectNext(1)
	if err := s.Send(context.Background(), rich); err == nil || Transient(err) {
		t.Fatalf("a 550 reply: %v (transient %v)", err, Transient(err))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := (SMTP{Addr: closed, From: "collab@example.com"}).Send(context.Background(), rich); err == nil || !Transient(err) {
		t.Fatalf("server down: %v (transient %v)", err, Transient(err))
	}
	if err := s.Send(context.Background(), Message{To: "not an address"}); err == nil || Transient(err) {
		t.Fatalf("bad address: %v (transient %v)", err, Transient(err))
	}
	if Transient(nil) || Transient(errors.New("other")) {
		t.Fatal("transient without a reason")
	}
}

// net/smtp logs in in the clear towards 127.0.0.1 only, so the --smtp-username flow works
// against a local test server without TLS.
func TestSMTPAuthOnLoopback(t *testing.T) {
	srv := smtptest.Start(t, smtptest.WithAuth("collab", "s3cret"))
	s := SMTP{Addr: srv.Addr(), From: "collab@example.com", Username: "collab", Password: "s3cret"}
	if err := s.Send(context.Background(), rich); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := srv.WaitFor(t, 1, 5*time.Second); got[0].Username != "collab" || got[0].TLS {
		t.Fatalf("received %+v", got[0])
	}
	s.Password = "wrong"
	if err := s.Send(context.Background(), rich); err == nil || Transient(err) {
		t.Fatalf("wrong password: %v (transient %v)", err, Transient(err))
	}
	s.Username = ""
	if err := s.Send(context.Background(), rich); err == nil {
		t.Fatal("sent without logging in")
	}
}

// When the server offers STARTTLS the sender uses it and verifies the certificate: against the
// system's roots by default (which do not know the test certificate), or TLSConfig's.
func TestSMTPStartTLSVerifiesTheServer(t *testing.T) {
	srv := smtptest.Start(t, smtptest.WithAuth("collab", "s3cret"), smtptest.WithSTARTTLS())
	s := SMTP{Addr: srv.Addr(), From: "collab@example.com", Username: "collab", Password: "s3cret"}
	err := s.Send(context.Background(), rich)
	var unknown x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &unknown) || Transient(err) {
		t.Fatalf("untrusted certificate: %v", err)
	}
	s.TLSConfig = &tls.Config{RootCAs: srv.RootCAs()}
	if err := s.Send(context.Background(), rich); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)
	if !got[0].TLS || got[0].Username != "collab" {
		t.Fatalf("received %+v", got[0])
	}
	if m := got[0].Parsed(t); m.Text != rich.Body || m.HTML != rich.HTML {
		t.Fatal("bodies changed on the way")
	}
	if s.TLSConfig.ServerName != "" {
		t.Fatal("Send changed the caller's TLS config")
	}
}

func TestDirWritesHTMLAsMultipartAlternative(t *testing.T) {
	var out bytes.Buffer
	d, err := NewDir(t.TempDir(), slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	secret := rich
	secret.HTML += `<a href="` + secretLink + `">verify</a>`
	if err := d.Send(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(d.Path(), "*.eml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v %v", files, err)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("\r")) || !bytes.HasPrefix(raw, []byte("To: reader@example.com\nSubject: =?utf-8?q?")) {
		t.Fatalf("file starts %q", raw[:min(len(raw), 200)])
	}
	m, err := smtptest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != secret.Subject || m.Text != secret.Body || m.HTML != secret.HTML || m.ContentType != "multipart/alternative" || m.MessageID == "" {
		t.Fatalf("parsed %+v", m)
	}
	if _, err := m.Header.Date(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cr3t") || strings.Contains(out.String(), "verify?token") {
		t.Fatalf("the log holds the link: %s", out.String())
	}
}

func TestMemoryKeepsHTML(t *testing.T) {
	var m Memory
	_ = m.Send(context.Background(), rich)
	if s := m.Sent(); len(s) != 1 || s[0] != rich {
		t.Fatalf("recorded %+v", s)
	}
}

func TestLogNeverLogsEitherBody(t *testing.T) {
	var out bytes.Buffer
	secret := Message{To: "a@example.com", Subject: "s", Body: "text-" + secretLink, HTML: "<a href=\"" + secretLink + "\">html</a>"}
	if err := (Log{Logger: slog.New(slog.NewTextHandler(&out, nil))}).Send(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cr3t") || strings.Contains(out.String(), "html") {
		t.Fatalf("the log holds a body: %s", out.String())
	}
}

// A non-ASCII subject is an RFC 2047 encoded word; an ASCII one is written as it is.
func TestSubjectEncoding(t *testing.T) {
	if got := encodeSubject("Verify your email for Acme", "\r\n"); got != "Verify your email for Acme" {
		t.Fatalf("ASCII subject became %q", got)
	}
	long := strings.Repeat("日本語のお知らせ ", 60)
	enc := encodeSubject(long, "\r\n")
	for _, line := range strings.Split(enc, "\r\n") {
		if len(line) > 76 || strings.ContainsFunc(line, func(r rune) bool { return r >= 0x80 }) {
			t.Fatalf("encoded line %q", line)
		}
	}
	// Unfolded as a mail reader does: the line breaks go, the spaces stay.
	if dec, err := new(mime.WordDecoder).DecodeHeader(strings.ReplaceAll(enc, "\r\n", "")); err != nil || dec != long {
		t.Fatalf("%q decodes to %q, %v", enc, dec, err)
	}
}
