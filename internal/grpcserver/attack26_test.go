package grpcserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	workspacev1 "github.com/collab/collab/proto/collab/workspace/v1"
)

// TestPartialRequestsEnd: a call whose request message does not come whole within
// requestReadTimeout of its headers ends, as an HTTP request's body does within the HTTP
// listener's read timeout. Without it, a client (no credentials needed: the message is read
// before any check) held up to 8 MiB a call, 1,000 calls a connection, by sending all of each
// message but its last byte, until the connection's maximum age (30 min): one connection of 64
// such calls of 4 MiB held 262 MB (issue 20, attack pass 26).
func TestPartialRequestsEnd(t *testing.T) {
	defer func(d time.Duration) { requestReadTimeout = d }(requestReadTimeout)
	requestReadTimeout = 300 * time.Millisecond
	var logs strings.Builder
	c, _, addr := dialTCP(t, &logs)

	// A call whose handler runs longer than the timeout is not cut: the timeout ends with the
	// message's arrival.
	if _, err := c.CreateWorkspace(context.Background(), &workspacev1.CreateWorkspaceRequest{OwnerEmail: "slow"}); err != nil {
		t.Fatalf("a slow handler: %v", err)
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(conn, conn)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/grpc.health.v1.Health/Check"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// A message of 1,000 bytes, of which 10 come.
	msg := make([]byte, 5+10)
	binary.BigEndian.PutUint32(msg[1:], 1000)
	if err := fr.WriteData(1, false, msg); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the call was not ended: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				return // the call's status, in trailers
			}
		}
	}
}

// dialTCP is dial over a TCP listener on loopback (the transport's own reading), with its address.
func dialTCP(t *testing.T, logs *strings.Builder) (workspacev1.WorkspaceServiceClient, *Health, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, h := dialOn(t, logs, lis, func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", lis.Addr().String())
	})
	return c, h, lis.Addr().String()
}
