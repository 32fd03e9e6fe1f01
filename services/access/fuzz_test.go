package access

import (
	"crypto/ed25519"
	"crypto/sha256"
	"slices"
	"testing"
)

// fuzzSigner signs with a fixed key. Ed25519 signatures are deterministic, so the tokens it
// signs are the same in every run: the seed corpus holds them, and they are the only input that
// may verify.
func fuzzSigner() *signer {
	seed := sha256.Sum256([]byte("collab FuzzParseToken"))
	return &signer{id: "k20522", private: ed25519.NewKeyFromSeed(seed[:])}
}

func fuzzTokens(t testing.TB) []string {
	t.Helper()
	k := fuzzSigner()
	gen := int64(2)
	var out []string
	for _, c := range []tokenClaims{
		{Issuer: "collab", Subject: "u1", Audience: "k1", AuthTokenGeneration: &gen, UserID: "u1", APIKey: "k1", OrganizationID: "o",
			Email: "u1@example.com", IsAdmin: true, IssuedAt: 1773104400, Expires: 1773277200, ID: "jti-fuzz-0001"},
		{Issuer: "collab", Subject: "ü \"2\"", Audience: "k2", AuthTokenGeneration: &gen, UserID: "ü \"2\"", APIKey: "k2", Name: "Zoë",
			IssuedAt: 1773104400, Expires: 1773277200, ID: "jti-fuzz-0002"},
	} {
		tok, err := k.sign(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
	return out
}

// The committed seeds include the fixed key's tokens, so the fuzzer starts from inputs that
// pass every check and mutates from there.
func TestFuzzSeedsVerify(t *testing.T) {
	pub := fuzzSigner().private.Public().(ed25519.PublicKey)
	for _, tok := range fuzzTokens(t) {
		p, err := parseToken(tok)
		if err != nil || !p.verify(pub) {
			t.Fatalf("seed %q: %v", tok, err)
		}
		if _, err := p.claims(); err != nil {
			t.Fatalf("seed %q claims: %v", tok, err)
		}
	}
}

// FuzzParseToken: tokens come from anyone who connects, so parsing must take any string
// without panicking, accept only the form sign writes, and no string but one this key signed
// may verify. The seed corpus is in testdata/fuzz/FuzzParseToken.
func FuzzParseToken(f *testing.F) {
	pub := fuzzSigner().private.Public().(ed25519.PublicKey)
	signed := fuzzTokens(f)
	for _, tok := range signed {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := parseToken(tok)
		if err != nil {
			if p != nil {
				t.Fatalf("parseToken(%q) returned a token and an error", tok)
			}
			return
		}
		if p.header.Alg != "EdDSA" || p.header.Typ != "JWT" || !kidPattern.MatchString(p.header.Kid) ||
			len(p.signature) != ed25519.SignatureSize || len(tok) > maxTokenBytes {
			t.Fatalf("parseToken(%q) accepted a form sign never writes: %+v", tok, p.header)
		}
		if !p.verify(pub) {
			return
		}
		if !slices.Contains(signed, tok) {
			t.Fatalf("a string this key never signed verified: %q", tok)
		}
		if _, err := p.claims(); err != nil {
			t.Fatalf("claims of a signed token: %v", err)
		}
	})
}
