package gateway

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// An answer written to a client that never reads ends within the write timeout of its piece
// (a real HTTP/1.1 server and a client socket with a small receive buffer, so that the answer
// cannot all go to the kernel); without the deadline the handler's write waited for ever. A
// client that reads slowly but steadily gets the whole answer, though it takes longer than
// one timeout.
func TestAnswerToAClientThatDoesNotReadEnds(t *testing.T) {
	old := answerWriteTimeout
	answerWriteTimeout = 300 * time.Millisecond
	t.Cleanup(func() { answerWriteTimeout = old })
	answer := make([]byte, 32<<20)
	done := make(chan error, 1)
	srv := smallBufferServer(t, func(w http.ResponseWriter, _ *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		_, err := rec.Write(answer)
		done <- err
	})
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	c, err := dialer.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("32 MiB were written to a client that read nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer's write still waits for a client that reads nothing")
	}

	// A client that reads 64 KiB every 100 ms (over 3 s for the answer, where the timeout is
	// 0.3 s), through the same small receive buffer, gets it whole.
	slow := answer[:2<<20]
	srv2 := smallBufferServer(t, func(w http.ResponseWriter, _ *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		_, err := rec.Write(slow)
		done <- err
	})
	client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	resp, err := client.Get(srv2.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, buf := 0, make([]byte, 64<<10)
	for {
		time.Sleep(100 * time.Millisecond)
		n, err := resp.Body.Read(buf)
		got += n
		if err != nil {
			break
		}
	}
	if got != len(slow) {
		t.Fatalf("the slow reader got %d bytes of %d", got, len(slow))
	}
	if err := <-done; err != nil {
		t.Fatalf("the slow reader's answer: %v", err)
	}
}

// smallBufferServer is an HTTP server whose connections have a small send buffer, so that what
// a handler writes waits for the client to read it instead of going to the kernel.
func smallBufferServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}
