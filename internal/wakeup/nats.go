package wakeup

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSConfig is how to reach the engine.
type NATSConfig struct {
	// URL is the server's address (nats://host:4222, tls://host:4222; several, comma-separated,
	// for a cluster's seeds).
	URL string
	// Token authenticates to the server (its authorization token), when set.
	Token string
	// CAFile verifies the server's certificate (PEM), for tls:// URLs or servers that require
	// TLS; empty: the system's roots.
	CAFile string
	// Name names the connection in the server's monitoring.
	Name string
	// Queue bounds the messages waiting to be handed to the client library; past it Publish
	// drops. Zero: DefaultQueue.
	Queue int
	// ReconnectBuffer bounds the bytes the library holds while the server is unreachable;
	// past it messages are dropped. Zero: DefaultReconnectBuffer.
	ReconnectBuffer int
	Logger          *slog.Logger
}

// Bounds of what a bus holds for an engine that does not take it.
const (
	DefaultQueue           = 4096
	DefaultReconnectBuffer = 1 << 20
)

// NATS is a bus on a NATS server or cluster (core publish/subscribe: at most once, which is
// what a hint needs). It reconnects forever; while the server is down, publishing drops (and
// counts) what the reconnect buffer cannot hold, and subscriptions resume on reconnect.
type NATS struct {
	nc    *nats.Conn
	m     *Metrics
	log   *slog.Logger
	queue chan outMsg
	mu    sync.Mutex
	done  chan struct{}
	wg    sync.WaitGroup
	// refused is why the last attempt to connect failed, as logged ("" once connected).
	refused   string
	refusedMu sync.Mutex
	statuses  chan nats.Status // the RECONNECTING events watchRefusals reads
}

type outMsg struct {
	subject string
	payload []byte
}

// DialNATS connects to the engine. An unreachable server is not an error: the connection
// keeps trying in the background (Connected reports it); a malformed URL or unreadable CA
// file is.
func DialNATS(cfg NATSConfig, m *Metrics) (*NATS, error) {
	if m == nil {
		m, _ = NewMetrics(nil)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.ReconnectBuffer <= 0 {
		cfg.ReconnectBuffer = DefaultReconnectBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &NATS{m: m, log: cfg.Logger, queue: make(chan outMsg, cfg.Queue), done: make(chan struct{})}
	m.Up.Set(0)
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(cfg.ReconnectBuffer),
		nats.ConnectHandler(func(*nats.Conn) { m.Up.Set(1); b.connected() }),
		nats.ReconnectHandler(func(*nats.Conn) { m.Up.Set(1); b.connected(); b.log.Info("wake-ups: engine reconnected") }),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			m.Up.Set(0)
			if c.IsClosed() {
				return // Close: not an outage
			}
			b.log.Warn("wake-ups: engine unreachable; rooms follow the store at the safety poll", "err", err)
		}),
		// The first connection's failure, and reconnects that fail to dial.
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { b.refusedBy(err) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				m.Dropped.Inc()
				return
			}
			b.log.Warn("wake-ups: engine", "err", err)
		}),
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("wake-ups: connect to %s: %w", cfg.URL, err)
	}
	if nc.IsConnected() {
		m.Up.Set(1)
	}
	b.nc = nc
	b.wg.Add(2)
	go b.send()
	b.statuses = nc.StatusChanged(nats.RECONNECTING)
	go b.watchRefusals(b.statuses)
	return b, nil
}

// watchRefusals logs why reconnects fail after the server answered: a certificate that does
// not verify, a server without TLS. The library reports those to no handler: it keeps the
// error (LastError) and goes back to reconnecting, which statuses tells. It returns when Close
// removes statuses.
func (b *NATS) watchRefusals(statuses chan nats.Status) {
	defer b.wg.Done()
	for range statuses {
		b.refusedBy(b.nc.LastError())
	}
}

// refusedBy logs why the engine could not be reached, once per reason until the bus connects
// (attempts repeat every half second or so; an operator needs the reason, not each attempt):
// without it a wrong CA or token looks like an engine that is down.
func (b *NATS) refusedBy(err error) {
	if err == nil {
		return
	}
	why := err.Error()
	b.refusedMu.Lock()
	same := why == b.refused
	b.refused = why
	b.refusedMu.Unlock()
	if !same {
		b.log.Warn("wake-ups: cannot connect to the engine; retrying, rooms follow the store at the safety poll", "err", err)
	}
}

// connected forgets the last refusal: the next one is news.
func (b *NATS) connected() {
	b.refusedMu.Lock()
	b.refused = ""
	b.refusedMu.Unlock()
}

// Publish queues the message for the engine, or drops it when the queue is full.
func (b *NATS) Publish(subject string, payload []byte) {
	select {
	case <-b.done:
		b.m.Dropped.Inc()
		return
	default:
	}
	select {
	case b.queue <- outMsg{subject, payload}:
	default:
		b.m.Dropped.Inc()
	}
}

// send hands queued messages to the library, which buffers them (and holds up to
// ReconnectBuffer bytes while the server is unreachable); what it refuses is dropped.
func (b *NATS) send() {
	defer b.wg.Done()
	for {
		select {
		case <-b.done:
			return
		case msg := <-b.queue:
			if err := b.nc.Publish(msg.subject, msg.payload); err != nil {
				b.m.Dropped.Inc()
				continue
			}
			b.m.Published.Inc()
		}
	}
}

// Subscribe delivers the subject's messages to h (on the library's goroutine of the
// subscription).
func (b *NATS) Subscribe(subject string, h Handler) (func(), error) {
	sub, err := b.nc.Subscribe(subject, func(msg *nats.Msg) {
		b.m.Received.Inc()
		h(msg.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("wake-ups: subscribe: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Missed counts a lost wake-up.
func (b *NATS) Missed() { b.m.Missed.Inc() }

// Connected reports whether the connection to the engine is up.
func (b *NATS) Connected() bool { return b.nc.IsConnected() }

// Close stops sending and closes the connection (what is queued is dropped).
func (b *NATS) Close() {
	b.mu.Lock()
	select {
	case <-b.done:
		b.mu.Unlock()
		return
	default:
		close(b.done)
	}
	b.mu.Unlock()
	b.nc.RemoveStatusListener(b.statuses)
	b.wg.Wait()
	b.nc.Close()
}
