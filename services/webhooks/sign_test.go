package webhooks

import (
	"context"
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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Standard Webhooks specification's test vector.
func TestSignatureVector(t *testing.T) {
	got, err := signature("whsec_plJ3nmyCDGBKInavdOK15jsl", "msg_loFOjxBNrRLzqYUf", 1731705121, []byte(`{"event_type":"ping","data":{"success":true}}`))
	if err != nil || got != "v1,rAvfW3dJ/X/qxhsaXPOyyCGmRKsaKWcsNccKXlIktD0=" {
		t.Fatalf("%q %v", got, err)
	}
	two, _ := signatures([]string{"whsec_plJ3nmyCDGBKInavdOK15jsl", newSecret()}, "msg_loFOjxBNrRLzqYUf", 1731705121, `{"event_type":"ping","data":{"success":true}}`)
	if parts := strings.Split(two, " "); len(parts) != 2 || parts[0] != got {
		t.Fatalf("rotation header %q", two)
	}
	if s := newSecret(); !strings.HasPrefix(s, "whsec_") || len(s) != 6+32 {
		t.Fatalf("secret %q", s)
	}
}

func TestEncryptedBodyDecrypts(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	pub, err := parsePublicKey(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"event":"comment.add","data":{"text":"héllo"}}`)
	body, err := encryptedBody(payload, pub)
	if err != nil {
		t.Fatal(err)
	}
	var enc map[string]string
	_ = json.Unmarshal(body, &enc)
	wrapped, _ := base64.StdEncoding.DecodeString(enc["encryptedKey"])
	key, err := rsa.DecryptOAEP(sha256.New(), nil, priv, wrapped, nil)
	if err != nil {
		t.Fatal(err)
	}
	iv, _ := base64.StdEncoding.DecodeString(enc["iv"])
	data, _ := base64.StdEncoding.DecodeString(enc["encryptedData"])
	block, _ := aes.NewCipher(key)
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(data, data)
	data = data[:len(data)-int(data[len(data)-1])]
	if string(data) != string(payload) {
		t.Fatalf("decrypted %q", data)
	}
	if _, err := parsePublicKey("nope"); err == nil {
		t.Fatal("a non-PEM key parsed")
	}
}

// cutReader gives its text, then fails as a body read at the attempt's deadline does.
type cutReader struct{ s *strings.Reader }

func (c cutReader) Read(p []byte) (int, error) {
	if c.s.Len() == 0 {
		return 0, context.DeadlineExceeded
	}
	return c.s.Read(p)
}

func TestReadAnswer(t *testing.T) {
	// An answer cut at the deadline keeps what came and says why it stopped (a timeout, which
	// the circuit counts), before and after the prefix is full.
	for _, body := range []string{"partial", strings.Repeat("z", 2*responsePrefix)} {
		got, err := readAnswer(cutReader{strings.NewReader(body)})
		if got != trimmed(body, responsePrefix) || !timedOut(err) {
			t.Errorf("an answer cut at the deadline: read %q, %v", trimmed(got, 40), err)
		}
	}
	for _, c := range []struct {
		name     string
		body     string
		want     string
		leftOver int // bytes of the body not read
	}{
		{"empty", "", "", 0},
		{"short", `{"ok":true}`, `{"ok":true}`, 0},
		{"invalid UTF-8 dropped", "a\xffb", "ab", 0},
		{"the prefix only, the rest drained", strings.Repeat("x", 3000), strings.Repeat("x", responsePrefix), 0},
		{"draining stops at its limit", strings.Repeat("y", responsePrefix+drainLimit+5000), strings.Repeat("y", responsePrefix), 5000},
	} {
		r := strings.NewReader(c.body)
		got, err := readAnswer(r)
		if got != c.want || err != nil {
			t.Errorf("%s: read %q (%v), want %q", c.name, trimmed(got, 40), err, trimmed(c.want, 40))
		}
		// A reader of this size gives what was asked for in whole buffers: at most one
		// buffer's worth past the limit is read.
		if left := r.Len(); left > c.leftOver || left < c.leftOver-responsePrefix {
			t.Errorf("%s: %d bytes left unread, want about %d", c.name, left, c.leftOver)
		}
	}
}

func TestTimeIDSortsByTime(t *testing.T) {
	times := []time.Time{time.UnixMilli(0), time.UnixMilli(1), time.UnixMilli(0xfff), time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), time.UnixMilli(0xffffffffffff)}
	prev := ""
	for _, at := range times {
		id := timeID("atmpt_", at)
		want := fmt.Sprintf("atmpt_%012x", at.UnixMilli())
		if len(id) != len(want)+12 || id[:len(want)] != want {
			t.Fatalf("timeID at %v = %q, want %q and 12 random characters", at, id, want)
		}
		if id <= prev {
			t.Fatalf("%q sorts before %q, made earlier", id, prev)
		}
		prev = id
	}
}

// TestKeyedMACsSignAsFreshOnes holds the pooled keyed states to what a fresh HMAC signs,
// however they are reused, and the cache to its bound.
func TestKeyedMACsSignAsFreshOnes(t *testing.T) {
	fresh := func(secret, id string, ts int64, body string) string {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%d.%s", id, ts, body)
		return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	a, b := newSecret(), newSecret()
	for i := range 20 {
		secret := a
		if i%3 == 0 {
			secret = b
		}
		body := strings.Repeat("x", i*37)
		got, err := signature(secret, fmt.Sprint("msg_", i), int64(1731705121+i), []byte(body))
		if err != nil || got != fresh(secret, fmt.Sprint("msg_", i), int64(1731705121+i), body) {
			t.Fatalf("signature %d: %q, %v", i, got, err)
		}
	}
	for range maxKeyedSecrets + 10 {
		if _, err := signature(newSecret(), "msg", 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := keyedMACCount.Load(); n > maxKeyedSecrets {
		t.Fatalf("%d secrets kept, at most %d", n, maxKeyedSecrets)
	}
	if _, err := signature("whsec_not base64!", "msg", 1, nil); err == nil {
		t.Fatal("a secret that is not base64 signed")
	}
}

// The keyed-MAC cache is cleared while other attempts sign (review of issue 20, finding 3):
// signers of many distinct secrets at once, past the bound, each keep signing as a fresh HMAC
// does, and the cache holds at most its bound and one entry per signer being added.
func TestKeyedMACsClearedWhileInUse(t *testing.T) {
	want := func(secret, id string, ts int64, body string) string {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%d.%s", id, ts, body)
		return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	}
	const signers = 4
	steady := newSecret()
	var wg sync.WaitGroup
	for g := range signers {
		wg.Go(func() {
			for i := range maxKeyedSecrets { // half of them new: 2 × the bound in all, so it is cleared
				secret := newSecret()
				if i%2 == 0 {
					secret = steady // held in the cache while others clear it
				}
				body := strings.Repeat("b", (g*31+i)%2000)
				got, err := signature(secret, "msg_x", int64(i), []byte(body))
				if err != nil || got != want(secret, "msg_x", int64(i), body) {
					t.Errorf("signer %d, signature %d: %q, %v", g, i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	keyedMACs.Range(func(any, any) bool { n++; return true })
	if n > maxKeyedSecrets+signers {
		t.Fatalf("%d secrets kept, at most %d", n, maxKeyedSecrets+signers)
	}
}
