package yjs

import (
	"bytes"
	"encoding/json"
)

// The y-websocket protocol: every frame is a varUint message type and its payload.
const (
	MessageSync           = 0
	MessageAwareness      = 1
	MessageAuth           = 2
	MessageQueryAwareness = 3
)

// Sync message subtypes (y-protocols/sync).
const (
	SyncStep1  = 0 // a state vector: "send me what I lack"
	SyncStep2  = 1 // an update answering step 1
	SyncUpdate = 2 // an update made since
)

// Message is one y-websocket frame read by ReadMessage.
type Message struct {
	Type uint64
	// Sync: the subtype and its payload (a state vector or an update).
	Sync    uint64
	Payload []byte
	// Awareness: the decoded awareness update.
	Awareness []AwarenessState
}

// AwarenessState is one client's entry of an awareness update: a clock that grows with each
// change and a JSON state; a null state means the client is gone.
type AwarenessState struct {
	Client uint64
	Clock  uint64
	State  json.RawMessage
}

// Gone reports whether the entry removes its client.
func (a AwarenessState) Gone() bool { return string(a.State) == "null" }

// maxAwarenessEntries bounds the entries of one awareness frame; a client sends its own, a
// server relays a room's.
const maxAwarenessEntries = 10000

// ReadMessage reads one frame from an untrusted client. Unknown types and malformed frames
// wrap ErrMalformed. The payload is not copied.
func ReadMessage(frame []byte) (Message, error) {
	d := decoder{buf: frame}
	t, err := d.uint()
	if err != nil {
		return Message{}, err
	}
	m := Message{Type: t}
	switch t {
	case MessageSync:
		if m.Sync, err = d.uint(); err != nil {
			return m, err
		}
		if m.Sync > SyncUpdate {
			return m, malformed("unknown sync message %d", m.Sync)
		}
		if m.Payload, err = d.bytes(); err != nil {
			return m, err
		}
	case MessageAwareness:
		p, err := d.bytes()
		if err != nil {
			return m, err
		}
		if m.Awareness, err = ReadAwareness(p); err != nil {
			return m, err
		}
		m.Payload = p
	case MessageQueryAwareness:
	case MessageAuth:
		// Only servers send auth messages; a client's is ignored but must be well formed.
		if _, err := d.uint(); err != nil {
			return m, err
		}
		if _, err := d.string(); err != nil {
			return m, err
		}
	default:
		return m, malformed("unknown message type %d", t)
	}
	if d.left() != 0 {
		return m, malformed("%d bytes after the message", d.left())
	}
	return m, nil
}

// ReadAwareness decodes an awareness update.
func ReadAwareness(p []byte) ([]AwarenessState, error) {
	d := decoder{buf: p}
	n, err := d.count(3)
	if err != nil {
		return nil, err
	}
	if n > maxAwarenessEntries {
		return nil, malformed("%d awareness entries", n)
	}
	out := make([]AwarenessState, 0, n)
	for i := 0; i < n; i++ {
		var a AwarenessState
		if a.Client, err = d.uint(); err != nil {
			return nil, err
		}
		if a.Clock, err = d.uint(); err != nil {
			return nil, err
		}
		s, err := d.utf8()
		if err != nil {
			return nil, err
		}
		if !json.Valid(s) {
			return nil, malformed("awareness state is not JSON")
		}
		// Copied: a state outlives its frame (a room keeps it), and must not pin the frame.
		a.State = json.RawMessage(bytes.Clone(s))
		out = append(out, a)
	}
	if d.left() != 0 {
		return nil, malformed("%d bytes after the awareness update", d.left())
	}
	return out, nil
}

// EncodeAwareness writes an awareness update.
func EncodeAwareness(states []AwarenessState) []byte {
	var e encoder
	e.uint(uint64(len(states)))
	for _, s := range states {
		e.uint(s.Client)
		e.uint(s.Clock)
		e.bytes(s.State)
	}
	return e.buf
}

// SyncFrame writes a sync message.
func SyncFrame(sub uint64, payload []byte) []byte {
	var e encoder
	e.uint(MessageSync)
	e.uint(sub)
	e.bytes(payload)
	return e.buf
}

// AwarenessFrame writes an awareness message.
func AwarenessFrame(states []AwarenessState) []byte {
	var e encoder
	e.uint(MessageAwareness)
	e.bytes(EncodeAwareness(states))
	return e.buf
}

// PermissionDeniedFrame writes the auth message a y-websocket client reports as
// permission-denied, with the reason.
func PermissionDeniedFrame(reason string) []byte {
	var e encoder
	e.uint(MessageAuth)
	e.uint(0)
	e.string(reason)
	return e.buf
}
