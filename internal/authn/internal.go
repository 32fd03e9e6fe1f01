package authn

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinInternalTokenLength is the shortest internal token accepted: 32 characters, as the 64 hex
// digits of `openssl rand -hex 32` comfortably exceed. With the distinct-character rule below,
// a token that passes carries well over 128 bits unless it was chosen to look random.
const MinInternalTokenLength = 32

// placeholders are parts of example values shipped in deployment files and documents; a token
// that contains one was copied, not generated.
var placeholders = []string{"change-me", "changeme", "change_me", "replace-me", "replaceme", "example", "placeholder", "secret", "password", "token", "internal"}

// CheckInternalToken refuses an internal token that is too weak to guard the internal RPCs: too
// short, made of too few distinct characters, or holding an example value's words.
func CheckInternalToken(token string) error {
	if token == "" {
		return errors.New("no internal token: set --internal-token (COLLAB_INTERNAL_TOKEN) to a long random value, e.g. `openssl rand -hex 32`")
	}
	if len(token) < MinInternalTokenLength {
		return fmt.Errorf("the internal token is %d characters long; at least %d are required (e.g. `openssl rand -hex 32`)", len(token), MinInternalTokenLength)
	}
	lower := strings.ToLower(token)
	for _, p := range placeholders {
		if strings.Contains(lower, p) {
			return fmt.Errorf("the internal token looks like a placeholder (it contains %q): generate one, e.g. `openssl rand -hex 32`", p)
		}
	}
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if len(distinct) < 10 {
		return fmt.Errorf("the internal token uses only %d distinct characters: generate one, e.g. `openssl rand -hex 32`", len(distinct))
	}
	return nil
}

// NewInternalToken returns a random internal token: the all-in-one process's own secret, which
// nothing outside the process knows, so its internal RPCs answer no one else.
func NewInternalToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
