package access

import (
	"context"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	accessv1 "github.com/collab/collab/proto/collab/access/v1"
)

// signer is a decrypted signing key.
type signer struct {
	id       string
	private  ed25519.PrivateKey
	notAfter time.Time
}

// keyRing hands out the signing key of the current rotation period. Periods are fixed slices
// of Unix time (period n covers [n×rotation, (n+1)×rotation)), so every replica computes the
// same kid at the same moment; the first to store a key for it wins and the others read that
// one. Decrypted keys are cached: a key never changes once stored.
type keyRing struct {
	store    Store
	aead     cipher.AEAD
	rotation time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	cache map[string]*signer

	// public holds the keys tokens were verified with, by kid: a stored key never changes.
	publicMu sync.Mutex
	public   map[string]*SigningKey
}

func newKeyRing(store Store, aead cipher.AEAD, rotation time.Duration, log *slog.Logger) *keyRing {
	return &keyRing{store: store, aead: aead, rotation: rotation, log: log, cache: map[string]*signer{}, public: map[string]*SigningKey{}}
}

// verifier returns the stored key kid for checking a token's signature, or ErrNotFound. Only
// keys that exist are cached, so made-up kids cannot grow the cache; a key leaves it once no
// token it signed can still be valid.
func (r *keyRing) verifier(ctx context.Context, kid string, now time.Time) (*SigningKey, error) {
	r.publicMu.Lock()
	k, ok := r.public[kid]
	r.publicMu.Unlock()
	if ok {
		return k, nil
	}
	k, err := r.store.SigningKey(ctx, kid)
	if err != nil {
		return nil, err
	}
	r.publicMu.Lock()
	defer r.publicMu.Unlock()
	for id, old := range r.public {
		if !old.NotAfter.Add(TokenLifetime).After(now) {
			delete(r.public, id)
		}
	}
	r.public[kid] = k
	return k, nil
}

// period returns the kid and bounds of the rotation period holding now.
func (r *keyRing) period(now time.Time) (id string, from, until time.Time) {
	secs := int64(r.rotation / time.Second)
	n := now.Unix() / secs
	if now.Unix() < 0 && now.Unix()%secs != 0 {
		n-- // floor, not truncation, before 1970
	}
	from = time.Unix(n*secs, 0).UTC()
	return fmt.Sprintf("k%d", n), from, from.Add(r.rotation)
}

// current returns the key that signs at now, creating and storing it on first use.
func (r *keyRing) current(ctx context.Context, now time.Time) (*signer, error) {
	id, from, until := r.period(now)
	// One lock around the whole lookup: concurrent first uses in this process then make one
	// key, not one each.
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.cache[id]; ok {
		return k, nil
	}
	stored, err := r.store.SigningKey(ctx, id)
	if errors.Is(err, ErrNotFound) {
		stored, err = r.create(ctx, id, from, until, now)
	}
	if err != nil {
		return nil, err
	}
	k, err := r.open(stored)
	if err != nil {
		return nil, err
	}
	// A key stored by a replica with another rotation could end before now; signing with it
	// would make tokens that outlive its place in the key set.
	if !stored.NotAfter.After(now) {
		return nil, fmt.Errorf("signing key %s ends at %s, before now: replicas disagree on the key rotation", id, stored.NotAfter)
	}
	for kid, old := range r.cache {
		if !old.notAfter.After(now) {
			delete(r.cache, kid) // it will never sign again
		}
	}
	r.cache[id] = k
	return k, nil
}

// create makes a key for the period and stores it unless another replica stored one first,
// in which case that one is returned.
func (r *keyRing) create(ctx context.Context, id string, from, until, now time.Time) (*SigningKey, error) {
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	nonce := make([]byte, r.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	k := &SigningKey{
		ID: id, PublicKey: public,
		// The kid is the additional data: a sealed key copied under another kid does not open.
		SealedPrivateKey: r.aead.Seal(nonce, nonce, private.Seed(), []byte(id)),
		NotBefore:        from, NotAfter: until, CreatedAt: storeTime(now),
	}
	err = r.store.InsertSigningKey(ctx, k)
	switch {
	case err == nil:
		r.log.InfoContext(ctx, "access: signing key created", "kid", id, "not_after", until)
		return k, nil
	case errors.Is(err, ErrKeyExists):
		return r.store.SigningKey(ctx, id)
	}
	return nil, err
}

// open decrypts a stored key and checks it against its public half.
func (r *keyRing) open(k *SigningKey) (*signer, error) {
	n := r.aead.NonceSize()
	if len(k.SealedPrivateKey) < n {
		return nil, fmt.Errorf("signing key %s: sealed key too short", k.ID)
	}
	seed, err := r.aead.Open(nil, k.SealedPrivateKey[:n], k.SealedPrivateKey[n:], []byte(k.ID))
	if err != nil {
		return nil, fmt.Errorf("signing key %s does not open with this master secret: %w", k.ID, err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("signing key %s: seed of %d bytes", k.ID, len(seed))
	}
	private := ed25519.NewKeyFromSeed(seed)
	if subtle.ConstantTimeCompare(private.Public().(ed25519.PublicKey), k.PublicKey) != 1 {
		return nil, fmt.Errorf("signing key %s: public key does not match the private key", k.ID)
	}
	return &signer{id: k.ID, private: private, notAfter: k.NotAfter}, nil
}

// published returns the public keys that verify every token still unexpired at now: those of
// periods that ended less than TokenLifetime ago, and the current one, newest first.
func (r *keyRing) published(ctx context.Context, now time.Time) ([]*SigningKey, error) {
	if _, err := r.current(ctx, now); err != nil {
		return nil, err
	}
	keys, err := r.store.SigningKeys(ctx, now.Add(-TokenLifetime))
	if err != nil {
		return nil, err
	}
	slices.Reverse(keys)
	return keys, nil
}

// ---- JWS (RFC 7515) compact serialization, EdDSA (RFC 8037) ----

var b64 = base64.RawURLEncoding

type jwsHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// tokenClaims are the claims of a generated token. isAdmin is always present, so a verifier
// never has to guess what a missing flag means. aud is the API key: every tenant's tokens are
// signed by the same key set, so a verifier serving one API key (a customer's backend reading
// /.well-known/jwks.json) must see that a token was made for it, and a standard JWT library
// checks aud. authTokenGeneration is the generation of the key's auth token when the token was
// made: a Reset Auth Token moves it on, and VerifyToken then refuses the token.
type tokenClaims struct {
	Issuer              string `json:"iss"`
	Subject             string `json:"sub"`
	Audience            string `json:"aud"`
	AuthTokenGeneration *int64 `json:"authTokenGeneration"`
	UserID              string `json:"userId"`
	APIKey              string `json:"apiKey"`
	OrganizationID      string `json:"organizationId,omitempty"`
	Email               string `json:"email,omitempty"`
	Name                string `json:"name,omitempty"`
	IsAdmin             bool   `json:"isAdmin"`
	IssuedAt            int64  `json:"iat"`
	Expires             int64  `json:"exp"`
	ID                  string `json:"jti"`
}

// sign returns the compact JWS of claims signed by k.
func (k *signer) sign(claims any) (string, error) {
	header, err := json.Marshal(jwsHeader{Alg: "EdDSA", Typ: "JWT", Kid: k.id})
	if err != nil {
		return "", fmt.Errorf("encode token header: %w", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode token claims: %w", err)
	}
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	return input + "." + b64.EncodeToString(ed25519.Sign(k.private, []byte(input))), nil
}

// jwk is the RFC 8037 form of an Ed25519 public key.
func jwk(k *SigningKey) *accessv1.Jwk {
	return &accessv1.Jwk{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(k.PublicKey), Kid: k.ID, Alg: "EdDSA", Use: "sig"}
}
