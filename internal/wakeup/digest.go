package wakeup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Digest names ids in a subject or a payload without showing them: 16 bytes of SHA-256 of
// their JSON array, in hex. Subjects may not hold the characters ids may (dots, spaces,
// wildcards), and the engine is shared infrastructure that need not see API keys or ids; the
// JSON array keeps ids holding separators from running into each other.
func Digest(ids ...string) string {
	b, _ := json.Marshal(ids)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
