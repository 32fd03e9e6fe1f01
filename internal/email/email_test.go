package email

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
)

// smtpServer is a minimal SMTP receiver on loopback speaking enough of RFC 5321 for one message.
func smtpServer(t *testing.T) (addr string, got chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		write := func(s string) { conn.Write([]byte(s + "\r\n")) }
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
