package yjs

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A merged update's skip arriving before the struct it skipped must not take its place: yjs
// reads these three updates (the first from Y.mergeUpdates) as "helloabc".
func TestSkipNeverReplacesTheStructItSkipped(t *testing.T) {
	d := NewDoc()
	for _, u := range []string{"AQMHBYQHBAFhCgGEBwYBYwA=", "AQEHBoQHBQFiAA==", "AQUHAAQBAXQBaIQHAAFlhAcBAWyEBwIBbIQHAwFvAA=="} {
		if err := d.Apply(b64(t, u)); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.JSON("t", Text); got != "helloabc" || d.Pending() {
		t.Fatalf("read %q (pending %v), want helloabc", got, d.Pending())
	}
}

// Strings that are not UTF-8 are refused, as lib0's fatal TextDecoder refuses them; accepted,
// they would be written back and make the document unreadable to yjs.
func TestInvalidUTF8IsRefused(t *testing.T) {
	d := NewDoc()
	err := d.Apply([]byte{1, 1, 1, 0, 0x28, 1, 1, 'm', 1, 0xff, 1, 125, 1, 0})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("apply = %v, want ErrMalformed", err)
	}
	if len(d.clients) != 0 {
		t.Fatal("a refused update changed the document")
	}
	if _, err := ReadMessage(AwarenessFrame([]AwarenessState{{Client: 1, Clock: 1, State: []byte("\"\xff\"")}})); !errors.Is(err, ErrMalformed) {
		t.Fatalf("awareness with invalid UTF-8: %v", err)
	}
	// Nor does Replace write them (found by FuzzReplace: text read back as U+FFFD).
	for _, c := range []struct {
		k Kind
		v any
	}{
		{Text, "a\xf0"},
		{XML, "<p>\xff</p>"},
		{Map, map[string]any{"k\xff": 1.0}},
		{Map, map[string]any{"k": []any{"\xc3"}}},
		{Array, []any{map[string]any{"k": "\xff"}}},
	} {
		if _, err := d.Replace("c", c.k, c.v); !errors.Is(err, ErrValue) {
			t.Errorf("replace %v with %#v: %v, want ErrValue", c.k, c.v, err)
		}
	}
	if _, err := d.Replace("c\xff", Text, "a"); !errors.Is(err, ErrValue) {
		t.Errorf("a root name that is not UTF-8: %v, want ErrValue", err)
	}
	if len(d.clients) != 0 {
		t.Fatal("a refused value changed the document")
	}
}

// A waiting deletion that an update extends is a change (the live path stores only changes).
func TestExtendingAWaitingDeletionIsAChange(t *testing.T) {
	ds := func(clock, n uint64) []byte {
		var e encoder
		e.uint(0) // no structs
		e.uint(1)
		e.uint(7)
		e.uint(1)
		e.uint(clock)
		e.uint(n)
		return e.buf
	}
	d := NewDoc()
	for i, c := range []struct {
		clock, n uint64
		want     bool
	}{{5, 5, true}, {5, 10, true}, {10, 5, false}, {5, 10, false}} {
		changed, err := d.ApplyChanged(ds(c.clock, c.n))
		if err != nil || changed != c.want {
			t.Fatalf("step %d: changed %v, %v; want %v", i, changed, err, c.want)
		}
	}
}

// One small update can make YATA's conflict resolution quadratic (in yjs too): insertions by a
// higher client, right to left at one place. Its work budget refuses it early.
func TestWorkLimitRefusesQuadraticUpdates(t *testing.T) {
	base := NewDocWithClient(5)
	if _, err := base.Replace("t", Text, strings.Repeat("a", 6000)); err != nil {
		t.Fatal(err)
	}
	state, _ := base.Encode(nil)
	const n = 5000
	var e encoder
	e.uint(1)
	e.uint(n - 1)
	e.uint(9)
	e.uint(0)
	for k := 0; k < n-1; k++ {
		e.byte(0x80 | refString)
		e.uint(5)
		e.uint(uint64(n - 2 - k))
		e.string("x")
	}
	e.uint(0)
	d := NewDoc()
	if err := d.Apply(state); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := d.ApplyUntrusted(context.Background(), e.buf, Limits{})
	if !errors.Is(err, ErrTooComplex) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("apply = %v, want ErrTooComplex", err)
	}
	t.Logf("refused after %v", time.Since(start))
	if got, _ := d.Encode(nil); !bytes.Equal(got, state) {
		t.Fatal("the refused update changed the document")
	}
	// Ordinary updates stay well within the limit.
	u, _ := base.Replace("t", Text, strings.Repeat("a", 3000)+"typed"+strings.Repeat("a", 3000))
	l := NewDoc()
	mustApply(t, l, state)
	if _, err := l.ApplyUntrusted(context.Background(), u, Limits{}); err != nil {
		t.Fatalf("an ordinary update refused: %v", err)
	}
}

// XML names keep their prefix (yjs knows no namespaces), and nothing closes the fragment early.
func TestXMLParsing(t *testing.T) {
	d := NewDoc()
	if _, err := d.Replace("x", XML, `<w:p xmlns:w="urn:w">t</w:p>`); err != nil {
		t.Fatal(err)
	}
	if got := d.JSON("x", XML); got != `<w:p xmlns:w="urn:w">t</w:p>` {
		t.Fatalf("read %q", got)
	}
	for _, bad := range []string{"a</r><y>b</y><r>c", "<p></q>", "</r>", "<p>", "a</r>"} {
		if _, err := d.Replace("x", XML, bad); !errors.Is(err, ErrValue) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// Plain writes view values as JSON.stringify would, choosing where it cannot.
func TestPlain(t *testing.T) {
	got := Plain(map[string]any{"u": Undefined{}, "b": BigInt(10), "h": BigInt(1 << 60), "a": []any{Undefined{}, []byte{1, 2}}, "s": SubDoc{GUID: "g"}})
	want := map[string]any{"b": float64(10), "h": "1152921504606846976", "a": []any{nil, "AQI="}, "s": map[string]any{"guid": "g"}}
	if !sameJSON(got, want) {
		t.Fatalf("%#v", got)
	}
}

// Heads that need each other (client A's first struct has its origin in B's missing clocks
// and B's in A's, which no client writes) stay pending: integrating them once looped for
// ever, each head queueing the other (found by FuzzApply). When the clocks one of them needs
// arrive, the rest follow.
func TestHeadsThatNeedEachOtherWait(t *testing.T) {
	// A one-character string item of client c at clock 0 whose origin is dep.
	item := func(c uint64, dep ID) []byte {
		var e encoder
		e.uint(1) // one client
		e.uint(1) // one struct
		e.uint(c)
		e.uint(0)
		e.byte(0x80 | refString)
		e.uint(dep.Client)
		e.uint(dep.Clock)
		e.string("x")
		e.uint(0) // no deletions
		return e.buf
	}
	for _, clients := range [][]uint64{{1, 2}, {1, 2, 3}, {3, 2, 1}} {
		d := NewDocWithClient(99)
		// Client clients[i] needs clock 1 of the next client; each sends clock 0 only.
		for i, c := range clients {
			next := clients[(i+1)%len(clients)]
			done := make(chan error, 1)
			go func() { done <- d.Apply(item(c, ID{next, 1})) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%v: apply: %v", clients, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("%v: apply of client %d does not return", clients, c)
			}
		}
		if !d.Pending() || len(d.clients) != 0 {
			t.Fatalf("%v: heads that need each other were integrated", clients)
		}
	}

	// Once the cycle is broken (client 2 gets a root item at clock 0 and its clock 1 as a
	// new struct), every waiting struct integrates.
	d := NewDocWithClient(99)
	if err := d.Apply(item(1, ID{2, 1})); err != nil {
		t.Fatal(err)
	}
	var e encoder
	e.uint(1)
	e.uint(2)
	e.uint(2)
	e.uint(0)
	e.byte(refString) // root item at clock 0
	e.uint(1)
	e.string("t")
	e.string("a")
	e.byte(0x80 | refString) // clock 1, right of clock 0
	e.uint(2)
	e.uint(0)
	e.string("b")
	e.uint(0)
	if err := d.Apply(e.buf); err != nil {
		t.Fatal(err)
	}
	if got := d.JSON("t", Text); got != "abx" || d.Pending() {
		t.Fatalf("read %q (pending %v), want abx", got, d.Pending())
	}
}
