// Package cursor seals paging positions into opaque tokens. A token is the position after the
// last returned item and the time it was issued, encrypted and authenticated with a server key,
// and bound to the query it came from: callers can neither read nor forge one, a token reused
// with other filters is refused, and so is one older than the token lifetime.
package cursor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/clock"
)

// DefaultLifetime is how long a page token is honoured after it was issued. A listing is paged
// through in minutes; a day leaves room for slow batch jobs, while a token copied into a log or
// a link does not keep reading a tenant's listing for ever.
const DefaultLifetime = 24 * time.Hour

var (
	// ErrInvalid is returned for a token that was not sealed by this key for this query.
	ErrInvalid = errors.New("invalid page token")
	// ErrExpired is returned for a token sealed by this key for this query, but longer ago than
	// the lifetime (or by a version of the service whose tokens carried no issue time).
	ErrExpired = errors.New("page token has expired")
)

// Token versions: the first byte of every token.
const (
	// versionUntimed tokens (before issue times) are recognised only to call them expired.
	versionUntimed = 1
	// versionTimed tokens seal the issue time (8 bytes, Unix seconds, big-endian) and then the
	// JSON position.
	versionTimed = 2
)

var encoding = base64.RawURLEncoding

// Sealer seals and opens tokens. Safe for concurrent use.
type Sealer struct {
	aead     cipher.AEAD
	clock    clock.Clock
	lifetime time.Duration
}

// Option configures a Sealer.
type Option func(*Sealer)

// WithLifetime sets how long tokens are honoured (default DefaultLifetime).
func WithLifetime(d time.Duration) Option { return func(s *Sealer) { s.lifetime = d } }

// DeriveKey derives the 32-byte key of one purpose (one kind of token) from a master secret, so
// tokens of one operation never open as another's.
func DeriveKey(master []byte, purpose string) ([]byte, error) {
	key, err := hkdf.Key(sha256.New, master, nil, "collab cursor "+purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive cursor key: %w", err)
	}
	return key, nil
}

// NewSealer returns a Sealer for a 32-byte key. clk dates the tokens and judges their age; it is
// required, so every service's tests control token expiry through the clock they inject.
func NewSealer(key []byte, clk clock.Clock, opts ...Option) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("cursor key must be 32 bytes, got %d", len(key))
	}
	if clk == nil {
		return nil, errors.New("cursor: a clock is required")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	s := &Sealer{aead: aead, clock: clk, lifetime: DefaultLifetime}
	for _, o := range opts {
		o(s)
	}
	if s.lifetime <= 0 {
		return nil, fmt.Errorf("cursor: lifetime %s must be positive", s.lifetime)
	}
	return s, nil
}

// additionalData binds a token to its version and query: a token changed to claim another
// version, or used for another query, does not open.
func additionalData(version byte, scope string) []byte {
	if version == versionUntimed {
		return []byte(scope) // as those tokens were sealed
	}
	return append([]byte{version}, scope...)
}

// Seal encodes position (any JSON-marshalable value) for the query described by scope, dated
// now.
func (s *Sealer) Seal(scope string, position any) (string, error) {
	pos, err := json.Marshal(position)
	if err != nil {
		return "", fmt.Errorf("seal cursor: %w", err)
	}
	plain := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(pos)), uint64(s.clock.Now().Unix())) //nolint:gosec // G115: the bits round-trip: Open reads them back with int64()
	plain = append(plain, pos...)
	n := s.aead.NonceSize()
	out := make([]byte, 1+n, 1+n+len(plain)+s.aead.Overhead())
	out[0] = versionTimed
	if _, err := rand.Read(out[1:]); err != nil {
		return "", fmt.Errorf("seal cursor: %w", err)
	}
	// The nonce is the random bytes just read, not a constant (G407 sees only the make).
	out = s.aead.Seal(out, out[1:1+n], plain, additionalData(versionTimed, scope)) //nolint:gosec // G407: random nonce, above
	return encoding.EncodeToString(out), nil
}

// Open decodes a token sealed for scope into position. A token that was not sealed by this key
// for this scope gives ErrInvalid; one sealed longer ago than the lifetime gives ErrExpired.
// Whatever the input, Open does not panic.
func (s *Sealer) Open(token, scope string, position any) error {
	raw, err := encoding.DecodeString(token)
	// A token has exactly one spelling: the decoder would also take line breaks and stray low
	// bits of the last character, and a second spelling of a token is not a token we issued.
	if err != nil || encoding.EncodeToString(raw) != token {
		return ErrInvalid
	}
	n := s.aead.NonceSize()
	if len(raw) < 1+n+s.aead.Overhead() {
		return ErrInvalid
	}
	version, nonce, sealed := raw[0], raw[1:1+n], raw[1+n:]
	if version != versionTimed && version != versionUntimed {
		return ErrInvalid
	}
	plain, err := s.aead.Open(nil, nonce, sealed, additionalData(version, scope))
	if err != nil {
		return ErrInvalid
	}
	if version == versionUntimed {
		// Ours, but from before tokens carried their issue time: its age is unknown.
		return ErrExpired
	}
	if len(plain) < 8 {
		return ErrInvalid
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(plain[:8])), 0) //nolint:gosec // G115: the bits Seal wrote with uint64(); authenticated by the AEAD
	// A token dated ahead of this clock came from a replica whose clock runs ahead; it is
	// honoured no longer than the lifetime either way.
	now := time.Unix(s.clock.Now().Unix(), 0) // whole seconds, as the issue time is kept
	if age := now.Sub(issued); age > s.lifetime || age < -s.lifetime {
		return ErrExpired
	}
	if err := json.Unmarshal(plain[8:], position); err != nil {
		return ErrInvalid
	}
	return nil
}

// Refusal turns an Open error into what the caller sees: INVALID_ARGUMENT naming field, telling
// an expired token (start again) from one that was never valid for this query.
func Refusal(field string, err error) error {
	if errors.Is(err, ErrExpired) {
		return apierr.InvalidArgument("%s has expired; request the first page again.", field)
	}
	return apierr.InvalidArgument("%s is invalid.", field)
}
