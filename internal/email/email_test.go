package email

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smtpServer is a minimal SMTP receiver on loopback speaking enough of RFC 5321 for one message.
func smtpServer(t *testing.T) (addr string, transcripts <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// Its own variable, not the named result: the return statement writes the results while
	// the goroutine below already reads this.
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		write := func(s string) { _, _ = conn.Write([]byte(s + "\r\n")) } // a lost reply fails the client under test
		var transcript strings.Builder
		write("220 test ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			transcript.WriteString(line)
			cmd := strings.ToUpper(strings.TrimSpace(line))
			switch {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				write("250 test")
			case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"):
				write("250 ok")
			case cmd == "DATA":
				write("354 go on")
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					transcript.WriteString(l)
				}
				write("250 queued")
			case cmd == "QUIT":
				write("221 bye")
				got <- transcript.String()
				return
			default:
				write("502 not implemented")
			}
		}
	}()
	return ln.Addr().String(), got
}

func TestSMTPSendsOneMessage(t *testing.T) {
	addr, got := smtpServer(t)
	s := SMTP{Addr: addr, From: "collab@example.com"}
	err := s.Send(context.Background(), Message{To: "owner@example.com", Subject: "Verify", Body: "Open http://x/verify?token=abc\nthanks"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	transcript := <-got
	for _, want := range []string{"MAIL FROM:<collab@example.com>", "RCPT TO:<owner@example.com>", "Subject: Verify", "Open http://x/verify?token=abc\r\nthanks"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("transcript lacks %q:\n%s", want, transcript)
		}
	}
}

func TestSMTPRefusesBadInput(t *testing.T) {
	s := SMTP{Addr: "127.0.0.1:1", From: "collab@example.com"}
	for name, m := range map[string]Message{
		"bad to":            {To: "not an address", Subject: "x"},
		"header in subject": {To: "a@example.com", Subject: "x\r\nBcc: evil@example.com"},
	} {
		if err := s.Send(context.Background(), m); err == nil {
			t.Errorf("%s: sent", name)
		}
	}
	if err := (SMTP{Addr: "127.0.0.1:1", From: "bad"}).Send(context.Background(), Message{To: "a@example.com"}); err == nil {
		t.Error("bad from: sent")
	}
}

func TestMemoryRecords(t *testing.T) {
	var m Memory
	_ = m.Send(context.Background(), Message{To: "a@example.com"})
	if s := m.Sent(); len(s) != 1 || s[0].To != "a@example.com" {
		t.Fatalf("recorded %+v", s)
	}
}

const secretLink = "https://collab.example/v2/workspace/email/verify?token=w1.s3cr3t-verification-secret"

var verification = Message{To: "owner@example.com", Subject: "Verify your email for Acme", Body: "Open this link:\n\n" + secretLink + "\n"}

// The log never holds a body: it is where the secret the mail delivers would leak from.
func TestLogNeverLogsTheBody(t *testing.T) {
	var out bytes.Buffer
	if err := (Log{Logger: slog.New(slog.NewTextHandler(&out, nil))}).Send(context.Background(), verification); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cr3t") || strings.Contains(out.String(), "verify?token") {
		t.Fatalf("the log holds the link: %s", out.String())
	}
	if !strings.Contains(out.String(), "owner@example.com") || !strings.Contains(out.String(), "not sent") {
		t.Fatalf("the log does not say what was not sent: %s", out.String())
	}
}

func TestDirWritesPrivateFilesAndLogsOnlyWhere(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	dir := filepath.Join(t.TempDir(), "mail")
	d, err := NewDir(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("mail directory %v %v", info, err)
	}
	for range 2 {
		if err := d.Send(context.Background(), verification); err != nil {
			t.Fatal(err)
		}
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v %v", files, err)
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name())
		info, err := os.Stat(path)
		if err != nil || info.Mode().Perm() != 0o600 || filepath.Ext(path) != ".eml" {
			t.Fatalf("%s: %v %v", path, info, err)
		}
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), "To: owner@example.com\nSubject: Verify your email for Acme\n") || !strings.Contains(string(b), secretLink) {
			t.Fatalf("%s holds %q", path, b)
		}
		if !strings.Contains(out.String(), path) {
			t.Errorf("the log does not say where %s is: %s", path, out.String())
		}
	}
	if strings.Contains(out.String(), "s3cr3t") || strings.Contains(out.String(), "verify?token") {
		t.Fatalf("the log holds the link: %s", out.String())
	}
	for name, m := range map[string]Message{
		"bad to":            {To: "Ann <a@example.com>", Subject: "x"},
		"header in subject": {To: "a@example.com", Subject: "x\r\nBcc: evil@example.com"},
	} {
		if err := d.Send(context.Background(), m); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

func TestDirDefaultsToAPrivateTempDirectory(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := NewDir("", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Path(), os.Getenv("TMPDIR")) {
		t.Fatalf("%s is not under the temporary directory", d.Path())
	}
	if info, err := os.Stat(d.Path()); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("mail directory %v %v", info, err)
	}
}
