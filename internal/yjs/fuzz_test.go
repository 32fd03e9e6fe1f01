package yjs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// seedUpdates are small real updates: the fuzzers start from valid bytes and mutate them.
func seedUpdates(t testing.TB) [][]byte {
	d := NewDocWithClient(7)
	var out [][]byte
	add := func(k Kind, v any) {
		u, err := d.Replace("content", k, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	add(Text, "hello 😀 world")
	add(Text, "hello there")
	m := NewDocWithClient(9)
	u, _ := m.Replace("m", Map, map[string]any{"a": 1.5, "b": []any{"x", true, nil}, "c": map[string]any{"d": "e"}})
	out = append(out, u)
	x := NewDocWithClient(11)
	u, _ = x.Replace("x", XML, `<p a="1">hi<b>there</b></p>`)
	out = append(out, u)
	full, _ := d.Encode(nil)
	out = append(out, full, d.StateVector())
	return out
}

// FuzzApply holds Apply to its contract on any bytes: no panic, malformed input leaves the
// document unchanged, and whatever is accepted encodes to an update that loads to the same
// content.
func FuzzApply(f *testing.F) {
	for _, u := range seedUpdates(f) {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tm := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("HANG %x", b)) })
		defer tm.Stop()
		d := NewDocWithClient(1)
		_, _ = d.Replace("content", Text, "base")
		before, _ := d.Encode(nil)
		err := d.Apply(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			after, _ := d.Encode(nil)
			if !bytes.Equal(before, after) {
				t.Fatal("a refused update changed the document")
			}
			return
		}
		full, err := d.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		e := NewDocWithClient(2)
		if err := e.Apply(full); err != nil {
			t.Fatalf("our encoding does not load: %v", err)
		}
		for _, k := range []Kind{Text, Map, Array, XML} {
			for name := range d.roots {
				_ = d.JSON(name, k)
				_ = e.JSON(name, k)
			}
		}
		// Content equality is not asked of hostile updates: an item whose origin lies right of
		// its right origin (no client writes one) integrates differently depending on how its
		// neighbours were split and merged, in yjs as here. The conformance suite holds
		// equality on real documents. What holds for any input: our encoding loads, completely
		// when the document was complete.
		if !d.Pending() && e.Pending() {
			t.Fatal("our encoding of a complete document leaves structs waiting")
		}
		if _, err := d.Encode(d.StateVector()); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadMessage holds the y-websocket frame reader to never panic, and to read back what
// the writers write.
func FuzzReadMessage(f *testing.F) {
	f.Add(SyncFrame(SyncStep1, []byte{0}))
	for _, u := range seedUpdates(f) {
		f.Add(SyncFrame(SyncUpdate, u))
	}
	f.Add(AwarenessFrame([]AwarenessState{{Client: 5, Clock: 2, State: []byte(`{"user":{"name":"a"}}`)}}))
	f.Add(PermissionDeniedFrame("no"))
	f.Add([]byte{MessageQueryAwareness})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadMessage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not wrapping ErrMalformed: %v", err)
			}
			return
		}
		switch m.Type {
		case MessageSync:
			if !bytes.Equal(SyncFrame(m.Sync, m.Payload), b) {
				// A non-minimal varUint reads the same; only check that the rewrite reads back.
				if _, err := ReadMessage(SyncFrame(m.Sync, m.Payload)); err != nil {
					t.Fatal(err)
				}
			}
		case MessageAwareness:
			if _, err := ReadMessage(AwarenessFrame(m.Awareness)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzApplySequence applies a sequence of updates (each a lib0 varUint8Array of the input) to
// one document, as a room or a stored log does: states only several updates reach (waiting
// structs, splits of items from earlier updates, merged updates with skips) must not panic
// either, and the document must keep encoding to something that loads.
func FuzzApplySequence(f *testing.F) {
	frame := func(updates ...[]byte) []byte {
		var e encoder
		for _, u := range updates {
			e.bytes(u)
		}
		return e.buf
	}
	seeds := seedUpdates(f)
	f.Add(frame(seeds...))
	f.Add(frame(seeds[1], seeds[0]))
	for _, s := range []string{"AQMHBYQHBAFhCgGEBwYBYwA=", "AQEHBoQHBQFiAA==", "AQUHAAQBAXQBaIQHAAFlhAcBAWyEBwIBbIQHAwFvAA=="} {
		b, _ := base64.StdEncoding.DecodeString(s)
		seeds = append(seeds, b)
	}
	f.Add(frame(seeds[len(seeds)-3:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		tm := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("HANG %x", b)) })
		defer tm.Stop()
		d := NewDocWithClient(1)
		dec := decoder{buf: b}
		for dec.left() > 0 {
			u, err := dec.bytes()
			if err != nil {
				break
			}
			_, _ = d.ApplyUntrusted(context.Background(), u, Limits{})
		}
		full, err := d.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		e := NewDocWithClient(2)
		if err := e.Apply(full); err != nil {
			t.Fatalf("our encoding does not load: %v", err)
		}
		for name := range d.roots {
			for _, k := range []Kind{Text, Map, Array, XML} {
				_ = d.JSON(name, k)
			}
			_ = d.Delta(name)
		}
	})
}

// FuzzReplace holds Replace, which writes callers' content (text, XML parsed here, maps and
// arrays as encoding/json decodes them) into a document that may hold other content, to its
// contract on any input: no panic; a refusal wraps ErrValue and changes nothing; otherwise
// the update it returns brings a peer that had the state before to the same content, the
// document encodes to something that loads, text reads back as given, and writing the same
// value again changes nothing.
func FuzzReplace(f *testing.F) {
	f.Add(uint8(Text), "hello world", "hello there world")
	f.Add(uint8(Text), "😀 a\nb\nc", "a\nB\nc 😀")
	f.Add(uint8(XML), `<p a="1">hi<b>there</b></p>`, `<p a="2">hi<i>you</i></p>text`)
	f.Add(uint8(XML), `<p>x</p>`, `<p><q/></p>`)
	f.Add(uint8(Map), `{"a":1.5,"b":["x",true,null],"c":{"d":"e"}}`, `{"a":2,"c":{"d":"f","g":[1]}}`)
	f.Add(uint8(Array), `["a",{"b":1},[2]]`, `[{"b":2},"a"]`)
	f.Fuzz(func(t *testing.T, kind uint8, prior, next string) {
		tm := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("HANG %d %q %q", kind, prior, next)) })
		defer tm.Stop()
		k := Kind(kind % 4)
		value := func(s string) (any, bool) {
			if k == Text || k == XML {
				return s, true
			}
			var v any
			if json.Unmarshal([]byte(s), &v) != nil {
				return nil, false
			}
			return v, true
		}
		d := NewDocWithClient(1)
		if v, ok := value(prior); ok {
			if _, err := d.Replace("c", k, v); err != nil && !errors.Is(err, ErrValue) {
				t.Fatalf("error not wrapping ErrValue: %v", err)
			}
		}
		v, ok := value(next)
		if !ok {
			return
		}
		before, err := d.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := d.Replace("c", k, v)
		if err != nil {
			if !errors.Is(err, ErrValue) {
				t.Fatalf("error not wrapping ErrValue: %v", err)
			}
			if after, _ := d.Encode(nil); !bytes.Equal(before, after) {
				t.Fatal("a refused value changed the document")
			}
			return
		}
		// view is a root's content as JSON text, comparable.
		view := func(x *Doc) string {
			b, err := json.Marshal(x.JSON("c", k))
			if err != nil {
				t.Fatalf("the view does not encode: %v", err)
			}
			return string(b)
		}
		got := view(d)
		// The content reads back as written: text as given, maps and arrays as the JSON they
		// were decoded from, XML as its parse renders.
		switch k {
		case Text:
			if s, _ := d.JSON("c", k).(string); s != next {
				t.Fatalf("text reads %q, want %q", s, next)
			}
		case Map, Array:
			if want, _ := json.Marshal(v); got != string(want) {
				t.Fatalf("reads %s, want %s", got, want)
			}
		case XML:
			nodes, err := parseXML(next, 0)
			if err != nil {
				t.Fatalf("written, yet does not parse: %v", err)
			}
			var want strings.Builder
			for _, n := range nodes {
				want.WriteString(n.render())
			}
			if s, _ := d.JSON("c", k).(string); s != want.String() {
				t.Fatalf("xml reads %q, want %q", s, want.String())
			}
		}
		peer := NewDocWithClient(2)
		if err := peer.Apply(before); err != nil {
			t.Fatalf("our encoding does not load: %v", err)
		}
		if len(u) > 0 {
			if err := peer.Apply(u); err != nil {
				t.Fatalf("the update does not load: %v", err)
			}
		}
		if g := view(peer); g != got || peer.Pending() {
			t.Fatalf("a peer reads %q (pending %v), the writer %q", g, peer.Pending(), got)
		}
		full, err := d.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh := NewDocWithClient(3)
		if err := fresh.Apply(full); err != nil || view(fresh) != got {
			t.Fatalf("our encoding loads as %q (%v), want %q", view(fresh), err, got)
		}
		if again, err := d.Replace("c", k, v); err != nil || len(again) != 0 {
			t.Fatalf("the same value again: %d bytes (%v)", len(again), err)
		}
	})
}
