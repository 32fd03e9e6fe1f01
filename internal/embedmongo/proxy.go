package embedmongo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// maxProxyConns bounds the connections the proxy holds (each one is two sockets, a goroutine and
// about 100 KiB of buffers); the drivers' pools stay far below it (100 per client).
const maxProxyConns = 1024

// proxyBufSize is the size of each connection's read and write buffers.
const proxyBufSize = 32 << 10

// proxy stands between the drivers and FerretDB and gives the embedded server MongoDB's
// single-document atomicity, which FerretDB 1.24 on SQLite lacks: it reads an update as a
// document, changes it in Go and writes it back, so two concurrent updates of one document
// each overwrite the other's change and both answer success (issue 20, finding 1). The proxy
// reads every message it forwards (wire.go), tells from the command what it may write
// (classify.go: documents by _id, a collection, a database, everything) and holds the locks of
// that (locks.go) from forwarding the write until FerretDB has answered it; reads pass
// unlocked. A message it cannot read exactly closes the connection.
//
// Why not one lock per database, which would need no classification: on the loaded 2-core
// machine it cut the throughput of concurrent writes of different documents by more than half
// (docs/benchmarks.md), as it held every write of the database for the whole of FerretDB's
// work on one (parsing, reading the document, changing it), most of which runs outside
// SQLite's own write lock.
type proxy struct {
	ln     net.Listener
	target string // FerretDB's socket
	log    *slog.Logger
	locks  locks

	mu      sync.Mutex
	conns   map[net.Conn]bool // true for a client's, false for the proxy's own to FerretDB
	clients int
	closed  bool
	wg      sync.WaitGroup
}

// listenProxy starts a proxy listening on the Unix socket path and forwarding to FerretDB's
// socket target.
func listenProxy(path, target string, log *slog.Logger) (*proxy, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("embedded mongo: proxy: %w", err)
	}
	p := &proxy{ln: ln, target: target, log: log, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of file descriptors, say: wait a little rather than spin
			p.log.Error("embedded mongo: proxy accept", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !p.track(c, true) {
			_ = c.Close()
			continue
		}
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

// track records c so that close can end it; a client's connection (client) also counts against
// maxProxyConns and adds its goroutine to the wait group. It returns false when the proxy is
// closed or full.
func (p *proxy) track(c net.Conn, client bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if client {
		if p.clients >= maxProxyConns {
			p.log.Error("embedded mongo: proxy refused a connection: too many", "limit", maxProxyConns)
			return false
		}
		p.clients++
		p.wg.Add(1)
	}
	p.conns[c] = client
	return true
}

// untrack closes c and forgets it.
func (p *proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	if p.conns[c] {
		p.clients--
	}
	delete(p.conns, c)
	p.mu.Unlock()
}

// close stops accepting, ends every connection and waits for their goroutines.
func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// handle serves one client connection over a connection of its own to FerretDB, until either
// side closes it or a message is refused.
func (p *proxy) handle(client net.Conn) {
	server, err := net.DialTimeout("unix", p.target, 10*time.Second)
	if err != nil {
		p.log.Error("embedded mongo: proxy dial", "err", err)
		return
	}
	if !p.track(server, false) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	c := proxyConn{
		server: server,
		cr:     bufio.NewReaderSize(client, proxyBufSize),
		sr:     bufio.NewReaderSize(server, proxyBufSize),
		cw:     bufio.NewWriterSize(client, proxyBufSize),
		buf:    make([]byte, 0, proxyBufSize),
		copy:   make([]byte, proxyBufSize),
	}
	if err := c.serve(&p.locks); errors.Is(err, errRefused) {
		p.log.Error("embedded mongo: proxy closed a connection", "err", err)
	}
}

// proxyConn is one client's connection and its own connection to FerretDB.
type proxyConn struct {
	server net.Conn
	cr, sr *bufio.Reader
	cw     *bufio.Writer
	buf    []byte // the requests that fit in it are read into it
	copy   []byte // the buffer a read's replies are copied through
	held   []byte // a write's replies, read before they are sent on
	head   [headerLen + 4]byte
}

// serve forwards the client's requests one at a time, each with its replies: a driver sends
// one request and reads its reply before the next on a connection, and a client that sends
// ahead (pipelines) waits, which changes nothing but its speed.
func (c *proxyConn) serve(locks *locks) error {
	for {
		msg, err := readMessage(c.cr, c.buf)
		if err != nil {
			return err // io.EOF: the client closed
		}
		req, err := parseRequest(msg)
		if err != nil {
			return err
		}
		if err := c.exchange(req, msg, locks.lock(req)); err != nil {
			return err
		}
	}
}

// exchange forwards one request and its replies (one, or a stream while each has moreToCome:
// an exhaust cursor or a streaming hello), and releases the request's lock (unlock) once the
// server has answered. A write's replies are read whole into memory before its lock is
// released and then sent on, so a client that reads slowly never holds up a database's
// writes; a read's are streamed. A reply is read whole from the server even when the client
// has gone, so the server is done with a write before its lock is released.
func (c *proxyConn) exchange(req request, msg []byte, unlock func()) error {
	locked := true
	release := func() {
		if locked {
			locked = false
			unlock()
		}
	}
	defer release()
	if req.moreToCome {
		msg = withoutMoreToCome(msg)
	}
	if _, err := c.server.Write(msg); err != nil {
		return fmt.Errorf("forward %s: %w", req.command, err)
	}
	out := &replySink{w: c.cw, drop: req.moreToCome}
	held := c.held[:0]
	for {
		h, more, head, err := c.readReplyHead()
		if err != nil {
			return fmt.Errorf("reply to %s: %w", req.command, err)
		}
		body := int(h.length) - len(head)
		if req.scope != scopeRead {
			if len(held)+int(h.length) > maxMessageLen {
				return refuse("replies to %s longer than %d bytes", req.command, maxMessageLen)
			}
			held = append(held, head...)
			n := len(held)
			held = slices.Grow(held, body)[:n+body]
			if _, err := io.ReadFull(c.sr, held[n:]); err != nil {
				return fmt.Errorf("reply to %s: %w", req.command, err)
			}
		} else {
			_, _ = out.Write(head)
			if _, err := io.CopyBuffer(out, io.LimitReader(c.sr, int64(body)), c.copy); err != nil {
				return fmt.Errorf("reply to %s: %w", req.command, err)
			}
			out.flush()
			if more && out.err != nil { // the client left a stream of replies
				return out.err
			}
		}
		if !more {
			break
		}
	}
	release()
	if len(held) > 0 {
		_, _ = out.Write(held)
		out.flush()
	}
	if cap(held) <= proxyBufSize { // kept for the next write's replies, unless a large one grew it
		c.held = held[:0]
	}
	return out.err
}

// readReplyHead reads the start of a server's reply: its header, and for OP_MSG its flags,
// which say whether more replies follow (more). head holds those bytes, ready to be sent on.
func (c *proxyConn) readReplyHead() (h header, more bool, head []byte, err error) {
	head = c.head[:headerLen]
	if h, err = readHeader(c.sr, head); err != nil {
		return h, false, nil, err
	}
	switch h.opCode {
	case opMsg:
		if h.length < headerLen+4 {
			return h, false, nil, refuse("OP_MSG reply of %d bytes", h.length)
		}
		head = c.head[:headerLen+4]
		if _, err := io.ReadFull(c.sr, head[headerLen:]); err != nil {
			return h, false, nil, err
		}
		return h, head[headerLen]&flagMoreToCome != 0, head, nil
	case opReply:
		return h, false, head, nil
	default:
		return h, false, nil, refuse("reply opcode %d", h.opCode)
	}
}

// replySink writes replies to the client until a write fails (the client has gone) and then
// drops them, as it drops the replies of a request the client wants none of (drop).
type replySink struct {
	w    *bufio.Writer
	drop bool
	err  error
}

func (s *replySink) Write(b []byte) (int, error) {
	if !s.drop && s.err == nil {
		_, s.err = s.w.Write(b)
	}
	return len(b), nil
}

func (s *replySink) flush() {
	if !s.drop && s.err == nil {
		s.err = s.w.Flush()
	}
}
