package collabd

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// dialFrom opens a TCP connection to addr from the loopback address ip (Linux routes all of
// 127/8 to lo, so 127.0.0.2 and 127.0.0.3 are two clients of one machine).
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// served reports whether the process answers a request on c (a readiness probe of the HTTP
// listener: any HTTP answer counts), or closed c unanswered.
func served(t *testing.T, c net.Conn) bool {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "POST /v2/workspace/get HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("no answer and no close within 5 s")
		}
		return false
	}
	resp.Body.Close()
	return true
}

// One client address holds at most --http-max-conns-per-address connections: its next is
// closed at once, another address is served, and a closed connection gives its place back.
func TestConnectionsPerAddressAreCapped(t *testing.T) {
	p := startProcess(t, "--http-max-conns-per-address=3")
	var held []net.Conn
	for range 3 {
		c := dialFrom(t, "127.0.0.2", p.HTTPAddr)
		if !served(t, c) {
			t.Fatal("a connection within the cap was not served")
		}
		held = append(held, c)
	}
	if served(t, dialFrom(t, "127.0.0.2", p.HTTPAddr)) {
		t.Fatal("a fourth connection from one address was served")
	}
	if !served(t, dialFrom(t, "127.0.0.3", p.HTTPAddr)) {
		t.Fatal("another address was refused")
	}
	held[0].Close()
	// The server sees the close when it next reads the connection: within its read loop.
	deadline := time.Now().Add(5 * time.Second)
	for !served(t, dialFrom(t, "127.0.0.2", p.HTTPAddr)) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place was not given back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Past --http-max-conns, a new connection waits until one closes, and is then served.
func TestConnectionsInAllAreCapped(t *testing.T) {
	p := startProcess(t, "--http-max-conns=2", "--http-max-conns-per-address=0")
	a, b := dialFrom(t, "127.0.0.2", p.HTTPAddr), dialFrom(t, "127.0.0.3", p.HTTPAddr)
	if !served(t, a) || !served(t, b) {
		t.Fatal("connections within the cap were not served")
	}
	c := dialFrom(t, "127.0.0.4", p.HTTPAddr)
	answered := make(chan bool, 1)
	go func() {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "POST /v2/workspace/get HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err == nil
	}()
	select {
	case <-answered:
		t.Fatal("a third connection was served while two were open")
	case <-time.After(300 * time.Millisecond):
	}
	a.Close()
	if !<-answered {
		t.Fatal("the waiting connection was not served once one closed")
	}
}

// Request headers are bounded by MaxHeaderBytes: 300 connections each sending a megabyte of
// header line hold a few megabytes, not hundreds (net/http's default let them hold 385 MB),
// and each is answered 431.
func TestRequestHeadersAreBounded(t *testing.T) {
	p := startProcess(t, "--http-max-conns-per-address=0")
	// 300 connections each send a megabyte of one header line, never ending it: the server
	// stops reading each at the cap and answers 431, so what it holds stays small.
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	line := "POST /v2/workspace/get HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20)
	var wg sync.WaitGroup
	for range 300 {
		c := dialFrom(t, "127.0.0.2", p.HTTPAddr)
		if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _, _ = io.WriteString(c, line) })
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 40<<20 {
		t.Fatalf("300 connections sending a megabyte of header each grew the heap by %d MiB", grew>>20)
	}

	c := dialFrom(t, "127.0.0.2", p.HTTPAddr)
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(c, "POST /v2/workspace/get HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 1<<20)+"\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 1 MiB header: status %d, want 431", resp.StatusCode)
	}
}

// An IPv6 client counts by its /64, which one host commonly holds whole; IPv4 by its address.
func TestAddrKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:1234":                 "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:80":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff::9]:80": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:80":           "2001:db8:1:3::/64",
		"[::ffff:192.0.2.7]:1":           "::ffff:192.0.2.7",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := addrKey(a); got != want && !(want == "::ffff:192.0.2.7" && got == "192.0.2.7") {
			t.Errorf("%s counts as %q, want %q", addr, got, want)
		}
	}
}

// The connections keep CloseWrite (net/http's graceful close after a refusal needs it).
func TestCountedConnKeepsCloseWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := limitListeners(ln, 2, 1, slog.New(slog.DiscardHandler))
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			defer c.Close()
			_, _ = io.ReadAll(c)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("the listener's connection hides CloseWrite")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
}
