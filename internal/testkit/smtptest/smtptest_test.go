package smtptest

import (
	"crypto/tls"
	"errors"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// A multipart/alternative message as another mailer would write it: quoted-printable text,
// base64 HTML, an encoded subject.
const sample = "From: sender@example.com\r\n" +
	"To: rcpt@example.com\r\n" +
	"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"Message-ID: <1@example.com>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b1\"\r\n" +
	"\r\n" +
	"preamble\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Gr=C3=BC=C3=9Fe, long=\r\n line\r\n" +
	"second\r\n" +
	"--b1\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+R3LDvMOfZTwv\r\ncD4=\r\n" +
	"--b1--\r\n"

func TestRecordsAndParses(t *testing.T) {
	s := Start(t)
	if err := smtp.SendMail(s.Addr(), nil, "sender@example.com", []string{"rcpt@example.com", "cc@example.com"}, []byte(sample)); err != nil {
		t.Fatalf("send: %v", err)
	}
	got := s.WaitFor(t, 1, 5*time.Second)
	if len(got) != 1 || got[0].From != "sender@example.com" || strings.Join(got[0].To, ",") != "rcpt@example.com,cc@example.com" ||
		string(got[0].Data) != sample || got[0].TLS || got[0].Username != "" {
		t.Fatalf("received %+v", got)
	}
	m := got[0].Parsed(t)
	if m.Subject != "Grüße" || m.To != "rcpt@example.com" || m.From != "sender@example.com" || m.MessageID != "<1@example.com>" ||
		m.ContentType != "multipart/alternative" || m.Text != "Grüße, long line\nsecond" || m.HTML != "<p>Grüße</p>" {
		t.Fatalf("parsed %+v", m)
	}
	if len(m.Parts) != 2 || m.Parts[0].ContentType != "text/plain" || m.Parts[0].TransferEncoding != "quoted-printable" ||
		m.Parts[1].ContentType != "text/html" || m.Parts[1].Charset != "utf-8" || m.Parts[1].TransferEncoding != "base64" {
		t.Fatalf("parts %+v", m.Parts)
	}
	if s.Attempts() != 1 || len(s.Messages()) != 1 {
		t.Fatalf("attempts %d, messages %d", s.Attempts(), len(s.Messages()))
	}
}

func TestParseSinglePartAndRefusals(t *testing.T) {
	m, err := Parse([]byte("To: a@example.com\nSubject: hi\n\nline one\nline two\n"))
	if err != nil || m.Text != "line one\nline two\n" || m.HTML != "" || len(m.Parts) != 1 || m.Parts[0].Charset != "us-ascii" {
		t.Fatalf("parsed %+v, %v", m, err)
	}
	for name, raw := range map[string]string{
		"charset":   "Content-Type: text/plain; charset=iso-2022-jp\r\n\r\nx",
		"encoding":  "Content-Type: text/plain\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nx",
		"boundary":  "Content-Type: multipart/alternative\r\n\r\nx",
		"multipart": "Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nno end",
	} {
		if _, err := Parse([]byte(raw)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// replyCode is the SMTP reply code of a net/smtp error; 0 when it is not a reply.
func replyCode(err error) int {
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return reply.Code
	}
	return 0
}

func TestFailNextAndRejectNext(t *testing.T) {
	s := Start(t)
	send := func() error {
		return smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: x\r\n\r\nbody\r\n"))
	}
	s.FailNext(2)
	s.RejectNext(1)
	for i, want := range []int{451, 451, 550} {
		if err := send(); replyCode(err) != want {
			t.Fatalf("delivery %d: %v, want %d", i+1, err, want)
		}
	}
	if err := send(); err != nil {
		t.Fatalf("after the failures: %v", err)
	}
	if got := s.WaitFor(t, 1, 5*time.Second); len(got) != 1 || s.Attempts() != 4 {
		t.Fatalf("%d messages after %d attempts", len(got), s.Attempts())
	}
}

func TestLinesOverTheLimitAreRefused(t *testing.T) {
	s := Start(t)
	err := smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: x\r\n\r\n"+strings.Repeat("y", 999)+"\r\n"))
	if code := replyCode(err); code/100 != 5 {
		t.Fatalf("a 999-character line: %v", err)
	}
	if err := smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, []byte("Subject: x\r\n\r\n"+strings.Repeat("y", 998)+"\r\n")); err != nil {
		t.Fatalf("a 998-character line: %v", err)
	}
}

func TestAuth(t *testing.T) {
	s := Start(t, WithAuth("user", "pw"))
	msg := []byte("Subject: x\r\n\r\nbody\r\n")
	// net/smtp sends a password in the clear to 127.0.0.1 only, as here.
	if err := smtp.SendMail(s.Addr(), nil, "a@example.com", []string{"b@example.com"}, msg); err == nil {
		t.Fatal("sent without logging in")
	}
	if err := smtp.SendMail(s.Addr(), smtp.PlainAuth("", "user", "wrong", "127.0.0.1"), "a@example.com", []string{"b@example.com"}, msg); replyCode(err) != 535 {
		t.Fatalf("wrong password: %v", err)
	}
	if err := smtp.SendMail(s.Addr(), smtp.PlainAuth("", "user", "pw", "127.0.0.1"), "a@example.com", []string{"b@example.com"}, msg); err != nil {
		t.Fatalf("logged in: %v", err)
	}
	if got := s.WaitFor(t, 1, 5*time.Second); got[0].Username != "user" {
		t.Fatalf("received %+v", got[0])
	}
}

func TestSTARTTLS(t *testing.T) {
	s := Start(t, WithAuth("user", "pw"), WithSTARTTLS())
	if s.RootCAs() == nil {
		t.Fatal("no root for the certificate")
	}
	// Before STARTTLS the server does not accept a login, even on loopback (and net/smtp
	// quits after a failed AUTH: a connection of its own).
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(smtp.PlainAuth("", "user", "pw", "127.0.0.1")); replyCode(err) != 523 {
		t.Fatalf("login without TLS: %v", err)
	}
	_ = c.Close() // net/smtp closed it already after the failed AUTH
	if c, err = smtp.Dial(s.Addr()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if err := c.StartTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: s.RootCAs()}); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	if err := c.Auth(smtp.PlainAuth("", "user", "pw", "127.0.0.1")); err != nil {
		t.Fatalf("auth over TLS: %v", err)
	}
	if err := c.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("b@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("Subject: x\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.WaitFor(t, 1, 5*time.Second); !got[0].TLS || got[0].Username != "user" {
		t.Fatalf("received %+v", got[0])
	}
}
