package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// secretPrefix starts every signing secret (Standard Webhooks).
const secretPrefix = "whsec_"

// newSecret is a fresh signing secret: whsec_ and the base64 of 24 random bytes.
func newSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// signature is one v1 signature of a delivery: HMAC-SHA256 with the secret's key over
// id.timestamp.body, base64.
func signature(secret, id string, timestamp int64, body []byte) (string, error) {
	b, err := appendSignature(nil, secret, id, timestamp, string(body))
	return string(b), err
}

// signatures is the webhook-signature header: one signature per secret still signing,
// space-separated (two during a rotation). It is built in one buffer: it is made for every
// attempt.
func signatures(secrets []string, id string, timestamp int64, body string) (string, error) {
	buf := make([]byte, 0, len(secrets)*48)
	for i, s := range secrets {
		if i > 0 {
			buf = append(buf, ' ')
		}
		var err error
		if buf, err = appendSignature(buf, s, id, timestamp, body); err != nil {
			return "", err
		}
	}
	return string(buf), nil
}

// appendSignature appends signature's text to dst. The body is written through a pooled
// buffer (answerBufs'), a piece at a time: a copy of it per attempt is what it saves.
func appendSignature(dst []byte, secret, id string, timestamp int64, body string) ([]byte, error) {
	mac, pool, err := keyedMAC(secret)
	if err != nil {
		return dst, err
	}
	defer pool.Put(mac)
	buf := answerBufs.Get().(*[responsePrefix]byte)
	defer answerBufs.Put(buf)
	head := append(buf[:0], id...)
	head = append(head, '.')
	head = strconv.AppendInt(head, timestamp, 10)
	mac.Write(append(head, '.'))
	for len(body) > 0 {
		n := copy(buf[:], body)
		mac.Write(buf[:n])
		body = body[n:]
	}
	dst = append(dst, "v1,"...)
	return base64.StdEncoding.AppendEncode(dst, mac.Sum(buf[:0])), nil
}

// keyedMACs holds, per signing secret seen, a pool of HMAC-SHA256 states keyed with it (Reset
// returns one to its keyed state): keying one decodes the secret, hashes two blocks and
// allocates five objects, which every attempt did. At most maxKeyedSecrets secrets are kept
// (rotated ones stay until then); past that the cache starts again.
var (
	keyedMACs     sync.Map // secret → *sync.Pool of hash.Hash
	keyedMACCount atomic.Int64
)

const maxKeyedSecrets = 4096

// keyedMAC returns an HMAC-SHA256 keyed with the secret, ready to write, and the pool to put
// it back in when done.
func keyedMAC(secret string) (hash.Hash, *sync.Pool, error) {
	p, ok := keyedMACs.Load(secret)
	if !ok {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
		if err != nil {
			return nil, nil, fmt.Errorf("signing secret is not base64: %w", err)
		}
		if keyedMACCount.Add(1) > maxKeyedSecrets {
			keyedMACs.Clear()
			keyedMACCount.Store(1)
		}
		p, _ = keyedMACs.LoadOrStore(secret, &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }})
	}
	pool := p.(*sync.Pool)
	mac := pool.Get().(hash.Hash)
	mac.Reset()
	return mac, pool, nil
}

// parsePublicKey reads an RSA public key in PEM (PKIX "PUBLIC KEY" or PKCS#1 "RSA PUBLIC KEY").
func parsePublicKey(pemText string) (*rsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("not PEM")
	}
	if k, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PublicKey); ok {
			return rk, nil
		}
		return nil, errors.New("not an RSA key")
	}
	return x509.ParsePKCS1PublicKey(block.Bytes)
}

// encodedBody is encodeData's body: the payload in base64.
func encodedBody(payload []byte) ([]byte, error) {
	return json.Marshal(map[string]string{"encodedPayload": base64.StdEncoding.EncodeToString(payload)})
}

// encryptedBody is encryptData's body: the payload encrypted with a fresh AES-256-CBC key
// (PKCS#7 padding, random IV), the key wrapped with RSA-OAEP (SHA-256), all base64.
func encryptedBody(payload []byte, pub *rsa.PublicKey) ([]byte, error) {
	key := make([]byte, 32)
	iv := make([]byte, aes.BlockSize)
	_, _ = rand.Read(key)
	_, _ = rand.Read(iv)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	pad := aes.BlockSize - len(payload)%aes.BlockSize
	plain := make([]byte, len(payload)+pad)
	copy(plain, payload)
	for i := len(payload); i < len(plain); i++ {
		plain[i] = byte(pad)
	}
	out := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out, plain)
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, key, nil)
	if err != nil {
		return nil, fmt.Errorf("wrap the key: %w", err)
	}
	return json.Marshal(map[string]string{
		"encryptedData": base64.StdEncoding.EncodeToString(out),
		"encryptedKey":  base64.StdEncoding.EncodeToString(wrapped),
		"iv":            base64.StdEncoding.EncodeToString(iv),
	})
}
