package yjs

import (
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
// higher client, right to left at one place. With LimitWork it is refused early.
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
	d.LimitWork()
	start := time.Now()
	_, err := d.ApplyChanged(e.buf)
	if !errors.Is(err, ErrTooComplex) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("apply = %v, want ErrTooComplex", err)
	}
	t.Logf("refused after %v", time.Since(start))
	// Ordinary updates stay well within the limit.
	u, _ := base.Replace("t", Text, strings.Repeat("a", 3000)+"typed"+strings.Repeat("a", 3000))
	l := NewDoc()
	mustApply(t, l, state)
	l.LimitWork()
	if err := l.Apply(u); err != nil {
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
