// Package ids makes random identifiers and secrets, and hashes secrets for storage.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Random returns n characters drawn uniformly from [0-9A-Za-z] by crypto/rand.
func Random(n int) string {
	return string(AppendRandom(make([]byte, 0, n), n))
}

// AppendRandom appends n characters drawn as Random draws them to dst: an id made of parts
// is then built in one buffer.
func AppendRandom(dst []byte, n int) []byte {
	var small [48]byte
	var buf []byte
	if n+n/2 > len(small) {
		buf = make([]byte, n+n/2)
	} else {
		buf = small[:n+n/2]
	}
	for i := 0; i < n; {
		_, _ = rand.Read(buf) // crypto/rand.Read never fails on supported platforms.
		for _, b := range buf {
			// 62*4 = 248: rejecting 248..255 keeps the draw uniform.
			if b >= 248 {
				continue
			}
			dst = append(dst, alphabet[b%62])
			i++
			if i == n {
				break
			}
		}
	}
	return dst
}

// Hash is the stored form of a high-entropy secret (auth tokens, verification tokens). A fast
// hash suffices: the secrets are random, not passwords.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Matches reports whether secret hashes to hash, in constant time.
func Matches(secret, hash string) bool {
	got := Hash(secret)
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// Mask shows a secret's last four characters only, e.g. "********wXyZ".
func Mask(lastFour string) string {
	return "********" + lastFour
}

// LastFour returns the tail kept beside a hash so a masked form can be shown later.
func LastFour(secret string) string {
	if len(secret) <= 4 {
		return ""
	}
	return secret[len(secret)-4:]
}
