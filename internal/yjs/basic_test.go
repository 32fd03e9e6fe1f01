package yjs

import (
	"reflect"
	"strings"
	"testing"
)

// roundTrip applies every update to a fresh document and returns it.
func loaded(t *testing.T, updates ...[]byte) *Doc {
	t.Helper()
	d := NewDoc()
	for _, u := range updates {
		if err := d.Apply(u); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	return d
}

// mustApply applies u to d, failing the test if d refuses it.
func mustApply(t *testing.T, d *Doc, u []byte) {
	t.Helper()
	if err := d.Apply(u); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func TestReplaceRoundTrips(t *testing.T) {
	cases := []struct {
		kind   Kind
		values []any
	}{
		{Text, []any{"hello world", "hello brave new world", "", "héllo 😀 wörld\nline two\n", "héllo 😁 wörld\nline 2\n"}},
		{Map, []any{
			map[string]any{"a": "x", "b": float64(1)},
			map[string]any{"a": "y", "c": []any{true, nil, 2.5}},
			map[string]any{"c": map[string]any{"deep": "yes"}, "big": float64(1 << 40)},
			map[string]any{},
		}},
		{Array, []any{[]any{"a", "b", "c"}, []any{"a", "x", "c", "d"}, []any{float64(1), map[string]any{"k": "v"}}, []any{}}},
		{XML, []any{`<p>hello</p>`, `<p a="1">hello there</p><h1>t</h1>`, `<h1>t</h1><ul><li>x</li></ul>`, ``}},
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			src := NewDoc()
			var log [][]byte
			for _, v := range c.values {
				u, err := src.Replace("content", c.kind, v)
				if err != nil {
					t.Fatalf("replace %v: %v", v, err)
				}
				log = append(log, u)
				got := src.JSON("content", c.kind)
				if c.kind == XML {
					if got != v {
						t.Fatalf("local xml = %q, want %q", got, v)
					}
				} else if !reflect.DeepEqual(got, v) {
					t.Fatalf("local = %#v, want %#v", got, v)
				}
				// The updates so far rebuild the same content elsewhere.
				dst := loaded(t, log...)
				if g := dst.JSON("content", c.kind); !reflect.DeepEqual(g, got) {
					t.Fatalf("replayed = %#v, want %#v", g, got)
				}
				full, _ := src.Encode(nil)
				if g := loaded(t, full).JSON("content", c.kind); !reflect.DeepEqual(g, got) {
					t.Fatalf("from full = %#v, want %#v", g, got)
				}
			}
		})
	}
}

func TestReplaceKeepsUnchangedItems(t *testing.T) {
	d := NewDoc()
	long := strings.Repeat("abcdefghij", 100)
	if _, err := d.Replace("content", Text, long); err != nil {
		t.Fatal(err)
	}
	edited := long[:500] + "X" + long[501:]
	u, err := d.Replace("content", Text, edited)
	if err != nil {
		t.Fatal(err)
	}
	// One insertion of one character and one deletion of one: far below a whole rewrite.
	if len(u) > 64 {
		t.Fatalf("update of a one-character change is %d bytes", len(u))
	}
	again, err := d.Replace("content", Text, edited)
	if err != nil || len(again) != 0 {
		t.Fatalf("no-op replace = %d bytes, %v", len(again), err)
	}
}

func TestConcurrentEditsConverge(t *testing.T) {
	base := NewDoc()
	u0, _ := base.Replace("content", Text, "hello world")
	a, b := loaded(t, u0), loaded(t, u0)
	ua, _ := a.Replace("content", Text, "hello brave world")
	ub, _ := b.Replace("content", Text, "hello world!")
	mustApply(t, a, ub)
	mustApply(t, b, ua)
	ga, gb := a.JSON("content", Text), b.JSON("content", Text)
	if ga != gb || ga != "hello brave world!" {
		t.Fatalf("a=%q b=%q", ga, gb)
	}
	// Out of order: the second update before the first waits, then both apply.
	c := NewDoc()
	mustApply(t, c, ua)
	if g := c.JSON("content", Text); g != "" {
		t.Fatalf("pending shown: %q", g)
	}
	mustApply(t, c, u0)
	mustApply(t, c, ub)
	if g := c.JSON("content", Text); g != ga {
		t.Fatalf("out of order = %q, want %q", g, ga)
	}
}

func TestReplaceRefusesWrongValues(t *testing.T) {
	d := NewDoc()
	for _, c := range []struct {
		k Kind
		v any
	}{{Text, float64(1)}, {Map, "x"}, {Array, map[string]any{}}, {XML, []any{}}, {XML, "<p>"}, {XML, "<a></b>"}} {
		if _, err := d.Replace("content", c.k, c.v); err == nil {
			t.Errorf("%v %v accepted", c.k, c.v)
		}
	}
}
