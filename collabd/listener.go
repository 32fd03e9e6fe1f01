package collabd

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/collab/collab/internal/apierr"
)

// MaxHeaderBytes bounds the request line and headers of one HTTP request (net/http adds 4 KiB
// of slack to it). API callers send a few hundred bytes; a browser's live-sync upgrade carries
// its cookies, which stay well under this. Larger requests are answered 431 by net/http itself.
// net/http's default, 1 MiB, let 300 sockets hold 385 MB (issue 20; see docs/operations.md,
// "HTTP listener").
const MaxHeaderBytes = 16 << 10

// maxGRPCConns caps the gRPC listener's open connections: its callers are the deployment's
// own processes and trusted internal callers, a few connections each.
const maxGRPCConns = 10000

// limitListeners caps a listener's open connections: in all (max: past it, Accept waits for
// a connection to close, and new ones wait in the kernel's queue) and per client address
// (perAddr: past it, a new connection from that address is closed at once, so one address
// cannot take the whole; an IPv6 address counts by its /64, which one host commonly holds
// whole). 0 means no cap. The address is the TCP peer's: behind a proxy, the proxy's
// (docs/operations.md, "HTTP listener"). Its connections keep CloseWrite, which net/http uses
// to close gracefully after refusing a request (netutil.LimitListener's hide it).
func limitListeners(ln net.Listener, maxConns, perAddr int, log *slog.Logger) net.Listener {
	if maxConns <= 0 && perAddr <= 0 {
		return ln
	}
	l := &limitListener{Listener: ln, perAddr: perAddr, open: map[string]int{}, log: log}
	if maxConns > 0 {
		l.slots = make(chan struct{}, maxConns)
	}
	return l
}

// limitListener is limitListeners' listener.
type limitListener struct {
	net.Listener
	slots   chan struct{} // one per open connection; nil: no cap in all
	perAddr int
	log     *slog.Logger

	mu         sync.Mutex
	open       map[string]int
	lastLogged time.Time
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		if l.slots != nil {
			l.slots <- struct{}{} // waits while max connections are open
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.free()
			return nil, err
		}
		key, ok := l.take(c.RemoteAddr())
		if !ok {
			l.free()
			_ = c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(key); l.free() }}, nil
	}
}

// free gives back a slot of the cap in all.
func (l *limitListener) free() {
	if l.slots != nil {
		<-l.slots
	}
}

// take counts a connection from addr, or reports false when its address holds the most.
func (l *limitListener) take(addr net.Addr) (string, bool) {
	if l.perAddr <= 0 {
		return "", true
	}
	key := addrKey(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.perAddr {
		// At most one line a minute: a flood must not become a flood of logs.
		if time.Since(l.lastLogged) >= time.Minute {
			l.lastLogged = time.Now()
			l.log.Warn("http: connection refused: its address holds the most connections one address may", "address", key, "max", l.perAddr)
		}
		return "", false
	}
	l.open[key]++
	return key, true
}

func (l *limitListener) release(key string) {
	if l.perAddr <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// addrKey is the client a connection counts against: its IPv4 address, or its IPv6 /64.
func addrKey(addr net.Addr) string {
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// countedConn gives its places back when it is closed, once, however often Close is called
// (net/http and a hijacking handler may both close it).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite shuts the connection's writing side, as net/http does after refusing a request so
// that the client reads the answer before the close.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// limitRequests caps the requests one client address has open at once at perAddr, the cap of
// its connections: over HTTP/1.1 a connection carries one request at a time, but over HTTP/2
// (TLS) one carries up to 250, so the connections' cap alone let one address hold 250 times
// its requests (issue 20, attack pass 26; docs/operations.md, "HTTP listener"). Past it a
// request is answered 429 at once. The address counts as the listener counts it (addrKey).
func limitRequests(next http.Handler, perAddr int) http.Handler {
	l := &requestLimiter{next: next, perAddr: perAddr, open: map[string]int{}}
	l.message = fmt.Sprintf("Your address has the most requests open at once it may (%d); wait for some to end.", perAddr)
	return l
}

// requestLimiter is limitRequests' handler.
type requestLimiter struct {
	next    http.Handler
	perAddr int
	message string

	mu   sync.Mutex
	open map[string]int
}

func (l *requestLimiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := remoteKey(r.RemoteAddr)
	l.mu.Lock()
	if l.open[key] >= l.perAddr {
		l.mu.Unlock()
		apierr.WriteHTTP(w, http.StatusTooManyRequests, codes.ResourceExhausted, l.message)
		return
	}
	l.open[key]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.open[key]--; l.open[key] <= 0 {
			delete(l.open, key)
		}
		l.mu.Unlock()
	}()
	l.next.ServeHTTP(w, r)
}

// remoteKey is addrKey of a request's RemoteAddr ("ip:port"), without an allocation for IPv4.
func remoteKey(remote string) string {
	host := remote
	if i := strings.LastIndexByte(remote, ':'); i >= 0 && !strings.HasSuffix(remote, "]") {
		host = remote[:i]
	}
	if !strings.HasPrefix(host, "[") {
		return host // IPv4 (what net/http gives for a TCP peer), as addrKey counts it
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && a.Is6() && !a.Is4In6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Masked().Addr().String() + "/64"
		}
	}
	return host
}
