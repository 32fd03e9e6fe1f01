// Package cursor seals paging positions into opaque tokens. A token is the position after the
// last returned item, encrypted and authenticated with a server key, and bound to the query it
// came from: callers can neither read nor forge one, and a token reused with other filters is
// refused.
package cursor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalid is returned for a token that was not sealed by this key for this query.
var ErrInvalid = errors.New("invalid page token")

const version = 1

// Sealer seals and opens tokens. Safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// DeriveKey derives the 32-byte key of one purpose (one kind of token) from a master secret, so
// tokens of one operation never open as another's.
func DeriveKey(master []byte, purpose string) ([]byte, error) {
	key, err := hkdf.Key(sha256.New, master, nil, "collab cursor "+purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("derive cursor key: %w", err)
	}
	return key, nil
}

// NewSealer returns a Sealer for a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("cursor key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cursor cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encodes position (any JSON-marshalable value) for the query described by scope.
func (s *Sealer) Seal(scope string, position any) (string, error) {
	plain, err := json.Marshal(position)
	if err != nil {
		return "", fmt.Errorf("seal cursor: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead()+1)
	_, _ = rand.Read(nonce)
	out := append([]byte{version}, nonce...)
	out = s.aead.Seal(out, nonce, plain, []byte(scope))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decodes a token sealed for scope into position. Any token that was not sealed by this
// key for this scope gives ErrInvalid.
func (s *Sealer) Open(token, scope string, position any) error {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 1+s.aead.NonceSize()+s.aead.Overhead() || raw[0] != version {
		return ErrInvalid
	}
	nonce := raw[1 : 1+s.aead.NonceSize()]
	plain, err := s.aead.Open(nil, nonce, raw[1+s.aead.NonceSize():], []byte(scope))
	if err != nil {
		return ErrInvalid
	}
	if err := json.Unmarshal(plain, position); err != nil {
		return ErrInvalid
	}
	return nil
}
