package cursor

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/collab/collab/internal/clock"
)

type pos struct {
	CreatedAt int64  `json:"c"`
	ID        string `json:"i"`
}

// t0 is not on a whole second, as no clock is: a token's age is still counted exactly.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 750_000_000, time.UTC)

func newSealer(t testing.TB, master string) *Sealer {
	t.Helper()
	s, _ := newTimedSealer(t, master)
	return s
}

func newTimedSealer(t testing.TB, master string, opts ...Option) (*Sealer, *clock.Fake) {
	t.Helper()
	key, err := DeriveKey([]byte(master), "test")
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	s, err := NewSealer(key, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func TestSealOpenRoundTrip(t *testing.T) {
	s := newSealer(t, "master")
	// An id long enough that random base64 never holds it by chance (a two-letter one did,
	// in about one token of sixty).
	const id = "the-position-key-1"
	tok, err := s.Seal("scope-a", pos{CreatedAt: 42, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	var got pos
	if err := s.Open(tok, "scope-a", &got); err != nil {
		t.Fatalf("open: %v", err)
	}
	if got != (pos{CreatedAt: 42, ID: id}) {
		t.Fatalf("got %+v", got)
	}
	if bytes.Contains([]byte(tok), []byte(id)) {
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

func TestNewSealerNeedsAClockAndALifetime(t *testing.T) {
	key := make([]byte, 32)
	if _, err := NewSealer(key, nil); err == nil {
		t.Error("a sealer without a clock")
	}
	if _, err := NewSealer(key, clock.NewFake(t0), WithLifetime(0)); err == nil {
		t.Error("a sealer with no lifetime")
	}
	if _, err := NewSealer(key[:16], clock.NewFake(t0)); err == nil {
		t.Error("a 16-byte key")
	}
}

// A token is honoured for its lifetime after it was issued, by the clock the sealer was given.
func TestTokensExpire(t *testing.T) {
	s, clk := newTimedSealer(t, "master")
	tok, err := s.Seal("scope", pos{ID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	var got pos
	clk.Advance(DefaultLifetime)
	if err := s.Open(tok, "scope", &got); err != nil || got.ID != "k1" {
		t.Fatalf("at exactly the lifetime: %v %+v", err, got)
	}
	clk.Advance(time.Second)
	if err := s.Open(tok, "scope", &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("a second past the lifetime: %v", err)
	}
	// Expiry is reported only for tokens that are ours: a stranger's old token is invalid.
	if err := newSealer(t, "other").Open(tok, "scope", &got); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another key's token: %v", err)
	}
	if err := s.Open(tok, "other scope", &got); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another scope's old token: %v", err)
	}

	short, clk := newTimedSealer(t, "master", WithLifetime(time.Minute))
	tok, _ = short.Seal("scope", pos{ID: "k2"})
	clk.Advance(time.Minute + time.Second)
	if err := short.Open(tok, "scope", &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("custom lifetime: %v", err)
	}
	// A token dated more than a lifetime ahead (a replica whose clock ran far ahead) is not
	// honoured either.
	ahead, aheadClock := newTimedSealer(t, "master", WithLifetime(time.Minute))
	aheadClock.Advance(time.Hour)
	tok, _ = ahead.Seal("scope", pos{ID: "k3"})
	if err := short.Open(tok, "scope", &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("token from the future: %v", err)
	}
}

// Tokens of the first format carried no issue time; ours among them are called expired, so a
// caller paging across an upgrade is told to start again.
func TestUntimedTokensAreExpired(t *testing.T) {
	key, _ := DeriveKey([]byte("master"), "test")
	s, err := NewSealer(key, clock.NewFake(t0))
	if err != nil {
		t.Fatal(err)
	}
	tok := sealUntimed(t, key, "scope", pos{ID: "k1"})
	var got pos
	if err := s.Open(tok, "scope", &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("an untimed token of ours: %v", err)
	}
	if err := s.Open(tok, "other", &got); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an untimed token of another scope: %v", err)
	}
	// A timed token relabelled as untimed does not open: the version is authenticated.
	timed, _ := s.Seal("scope", pos{ID: "k1"})
	raw, _ := base64.RawURLEncoding.DecodeString(timed)
	raw[0] = versionUntimed
	if err := s.Open(base64.RawURLEncoding.EncodeToString(raw), "scope", &got); !errors.Is(err, ErrInvalid) {
		t.Fatalf("relabelled token: %v", err)
	}
}

// sealUntimed writes a token as the first format did: version 1, nonce, AES-GCM of the JSON
// position with the scope as additional data.
func sealUntimed(t testing.TB, key []byte, scope string, position any) string {
	t.Helper()
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	plain, _ := json.Marshal(position)
	out := append([]byte{versionUntimed}, make([]byte, aead.NonceSize())...)
	out = aead.Seal(out, out[1:], plain, []byte(scope))
	return base64.RawURLEncoding.EncodeToString(out)
}

// A token has one spelling: line breaks and other encodings of the same bytes are refused.
func TestOpenRefusesOtherSpellings(t *testing.T) {
	s := newSealer(t, "master")
	tok, _ := s.Seal("scope", pos{ID: "k1"})
	var got pos
	for name, v := range map[string]string{
		"line break":     tok[:10] + "\n" + tok[10:],
		"carriage":       tok[:10] + "\r" + tok[10:],
		"padding":        tok + "==",
		"std alphabet":   strings.NewReplacer("-", "+", "_", "/").Replace(tok) + "+",
		"trailing space": tok + " ",
	} {
		if err := s.Open(v, "scope", &got); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRefusal(t *testing.T) {
	for err, want := range map[error]string{
		ErrExpired: "pageToken has expired; request the first page again.",
		ErrInvalid: "pageToken is invalid.",
	} {
		st := status.Convert(Refusal("pageToken", err))
		if st.Code() != codes.InvalidArgument || st.Message() != want {
			t.Errorf("Refusal(%v) = %v", err, st)
		}
	}
}
