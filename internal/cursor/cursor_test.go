package cursor

import (
	"bytes"
	"errors"
	"testing"
)

type pos struct {
	CreatedAt int64  `json:"c"`
	ID        string `json:"i"`
}

func newSealer(t *testing.T, master string) *Sealer {
	t.Helper()
	key, err := DeriveKey([]byte(master), "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpenRoundTrip(t *testing.T) {
	s := newSealer(t, "master")
	tok, err := s.Seal("scope-a", pos{CreatedAt: 42, ID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	var got pos
	if err := s.Open(tok, "scope-a", &got); err != nil {
		t.Fatalf("open: %v", err)
	}
	if got != (pos{CreatedAt: 42, ID: "k1"}) {
		t.Fatalf("got %+v", got)
	}
	if bytes.Contains([]byte(tok), []byte("k1")) {
		t.Fatalf("token %q shows its position", tok)
	}
}

func TestOpenRefuses(t *testing.T) {
	s := newSealer(t, "master")
	tok, err := s.Seal("scope-a", pos{ID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(tok)
	if flipped[len(flipped)-3] == 'A' {
		flipped[len(flipped)-3] = 'B'
	} else {
		flipped[len(flipped)-3] = 'A'
	}
	cases := map[string]struct {
		sealer *Sealer
		token  string
		scope  string
	}{
		"other scope":    {s, tok, "scope-b"},
		"other key":      {newSealer(t, "other"), tok, "scope-a"},
		"tampered":       {s, string(flipped), "scope-a"},
		"not base64":     {s, "%%%", "scope-a"},
		"empty":          {s, "", "scope-a"},
		"short":          {s, "AQ", "scope-a"},
		"plain position": {s, `{"c":1,"i":"k1"}`, "scope-a"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var got pos
			if err := c.sealer.Open(c.token, c.scope, &got); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Open = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestTokensDifferEachTime(t *testing.T) {
	s := newSealer(t, "master")
	a, _ := s.Seal("s", pos{ID: "x"})
	b, _ := s.Seal("s", pos{ID: "x"})
	if a == b {
		t.Fatal("two seals of the same position are equal: nonce reused")
	}
}
