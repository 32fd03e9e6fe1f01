package collabd

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// MaxHeaderBytes bounds the request line and headers of one HTTP request (net/http adds 4 KiB
// of slack to it). API callers send a few hundred bytes; a browser's live-sync upgrade carries
// its cookies, which stay well under this. Larger requests are answered 431 by net/http itself.
// net/http's default, 1 MiB, let 300 sockets hold 385 MB (issue 20; see docs/operations.md,
// "HTTP listener").
const MaxHeaderBytes = 16 << 10

// limitListeners caps the HTTP listener's open connections: in all (max, by
// netutil.LimitListener: past it, Accept waits for a connection to close, and new ones wait in
// the kernel's queue) and per client address (perAddr: past it, a new connection from that
// address is closed at once, so one address cannot take the whole). 0 means no cap. The
// address is the TCP peer's: behind a proxy, the proxy's (docs/operations.md, "HTTP listener").
func limitListeners(ln net.Listener, maxConns, perAddr int, log *slog.Logger) net.Listener {
	if perAddr > 0 {
		ln = &perAddrListener{Listener: ln, max: perAddr, open: map[string]int{}, log: log}
	}
	if maxConns > 0 {
		ln = netutil.LimitListener(ln, maxConns)
	}
	return ln
}

// perAddrListener closes connections from an address that already holds max.
type perAddrListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu         sync.Mutex
	open       map[string]int
	lastLogged time.Time
}

func (l *perAddrListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			// At most one line a minute: a flood must not become a flood of logs.
			logIt := time.Since(l.lastLogged) >= time.Minute
			if logIt {
				l.lastLogged = time.Now()
			}
			l.mu.Unlock()
			_ = c.Close()
			if logIt {
				l.log.Warn("http: connection refused: its address holds the most connections one address may", "address", host, "max", l.max)
			}
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *perAddrListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// countedConn gives its address's place back when it is closed, once, however often Close is
// called (net/http and a hijacking handler may both close it).
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
