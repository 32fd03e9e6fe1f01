package webhooktest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Go signing and encryption below are the test's own, written from the Standard Webhooks
// specification; the delivery engine has its own, and its e2e tests check it against the
// receiver in the same way.

// sign returns "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", key being the base64 after
// "whsec_".
func sign(t testing.TB, secret, id string, timestamp int64, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// newSecret returns a random "whsec_" secret of 24 bytes.
func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// encrypt returns the JSON {"encryptedData","encryptedKey","iv"} of plain: AES-256-CBC with
// PKCS#7 padding under a random key and IV, the key wrapped with RSA-OAEP (SHA-256).
func encrypt(t testing.TB, pub *rsa.PublicKey, plain []byte) []byte {
	t.Helper()
	key := make([]byte, 32)
	iv := make([]byte, aes.BlockSize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(iv); err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize // 1..16
	padded := append(append([]byte{}, plain...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	data := make([]byte, len(padded))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(data, padded)
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(map[string]string{
		"encryptedData": base64.StdEncoding.EncodeToString(data),
		"encryptedKey":  base64.StdEncoding.EncodeToString(wrapped),
		"iv":            base64.StdEncoding.EncodeToString(iv),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// answer is what post returns of the receiver's answer (its body is read and closed).
type answer struct {
	StatusCode int
	Header     http.Header
}

// post delivers body to url with the Standard Webhooks headers and returns the answer.
func post(t testing.TB, url, id string, timestamp int64, signature string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(timestamp, 10))
	req.Header.Set("webhook-signature", signature)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}
}

func only(t testing.TB, r *Receiver, path string) Delivery {
	t.Helper()
	got := r.WaitFor(t, path, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("%s received %d deliveries, want 1: %+v", path, len(got), got)
	}
	return got[0]
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(t testing.TB, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("payload %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("payload = %s, want %s", got, want)
	}
}

// The specification's example: Go and standardwebhooks must both produce it.
func TestSignatureVector(t *testing.T) {
	const (
		secret = "whsec_plJ3nmyCDGBKInavdOK15jsl"
		id     = "msg_loFOjxBNrRLzqYUf"
		ts     = 1731705121
		body   = `{"event_type":"ping","data":{"success":true}}`
		want   = "v1,rAvfW3dJ/X/qxhsaXPOyyCGmRKsaKWcsNccKXlIktD0="
	)
	if got := sign(t, secret, id, ts, []byte(body)); got != want {
		t.Errorf("Go signature = %s, want %s", got, want)
	}
	r := Start(t)
	if got := r.Sign(t, secret, id, ts, body); got != want {
		t.Errorf("standardwebhooks signature = %s, want %s", got, want)
	}
}

func TestVerifiedDelivery(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	r.Configure(t, "/hooks/ok", []string{secret})
	body := []byte(`{"type":"document.created","data":{"id":"d1","title":"caf\u00e9 ☕"}}`)
	now := time.Now().Unix()
	resp := post(t, r.URL("/hooks/ok?tenant=w1"), "msg_1", now, sign(t, secret, "msg_1", now, body), body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want 200", resp.StatusCode)
	}
	d := only(t, r, "/hooks/ok")
	if !d.Verified || d.VerifyError != "" {
		t.Fatalf("verified = %v (%q), want true", d.Verified, d.VerifyError)
	}
	jsonEqual(t, d.Payload, body)
	if d.ID != "msg_1" || d.Timestamp != now || d.Body != string(body) || d.Method != http.MethodPost ||
		d.URL != "/hooks/ok?tenant=w1" || d.AnsweredStatus != 200 || d.Seq != 1 {
		t.Errorf("delivery = %+v", d)
	}
	if d.Headers["content-type"] != "application/json" || d.Headers["webhook-id"] != "msg_1" ||
		d.Headers["webhook-timestamp"] != strconv.FormatInt(now, 10) || !strings.HasPrefix(d.Headers["webhook-signature"], "v1,") {
		t.Errorf("headers = %v", d.Headers)
	}
	if since := time.Since(d.ReceivedAt()); since < 0 || since > time.Minute {
		t.Errorf("received at %v", d.ReceivedAt())
	}
	if got := r.Received(t, "/hooks/other"); len(got) != 0 {
		t.Errorf("another path received %+v", got)
	}
}

// The receiver refuses what standardwebhooks refuses, with the library's message.
func TestRefusedDeliveries(t *testing.T) {
	r := Start(t)
	secret, other := newSecret(t), newSecret(t)
	r.Configure(t, "/hooks/strict", []string{secret})
	body := []byte(`{"type":"ping"}`)
	now := time.Now().Unix()
	old := time.Now().Add(-10 * time.Minute).Unix()
	future := time.Now().Add(10 * time.Minute).Unix()
	cases := []struct {
		name      string
		timestamp int64
		signature string
		body      []byte
		want      string
	}{
		{"wrong secret", now, sign(t, other, "msg_a", now, body), body, "No matching signature found"},
		{"tampered body", now, sign(t, secret, "msg_b", now, body), []byte(`{"type":"pong"}`), "No matching signature found"},
		{"other id", now, sign(t, secret, "msg_x", now, body), body, "No matching signature found"},
		{"10 minutes old", old, sign(t, secret, "msg_d", old, body), body, "Message timestamp too old"},
		{"10 minutes ahead", future, sign(t, secret, "msg_e", future, body), body, "Message timestamp too new"},
		{"version v2 only", now, "v2," + strings.TrimPrefix(sign(t, secret, "msg_f", now, body), "v1,"), body, "No matching signature found"},
		{"no signature", now, "", body, "Missing required headers"},
	}
	for i, c := range cases {
		id := "msg_" + string(rune('a'+i))
		if resp := post(t, r.URL("/hooks/strict"), id, c.timestamp, c.signature, c.body); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status = %d; the receiver answers as configured, verified or not", c.name, resp.StatusCode)
		}
	}
	got := r.WaitFor(t, "/hooks/strict", len(cases), 10*time.Second)
	for i, c := range cases {
		d := got[i]
		if d.Verified || d.VerifyError != c.want || string(d.Payload) != "null" {
			t.Errorf("%s: verified = %v, error %q, payload %s; want refused with %q", c.name, d.Verified, d.VerifyError, d.Payload, c.want)
		}
		if d.Body != string(c.body) {
			t.Errorf("%s: body = %q", c.name, d.Body)
		}
	}
}

// During a rotation the sender signs with the old and the new secret, space-separated; either
// secret alone verifies, and so do both.
func TestRotationSignatures(t *testing.T) {
	r := Start(t)
	older, newer, stranger := newSecret(t), newSecret(t), newSecret(t)
	r.Configure(t, "/old", []string{older})
	r.Configure(t, "/new", []string{newer})
	r.Configure(t, "/both", []string{stranger, newer})
	r.Configure(t, "/stranger", []string{stranger})
	body := []byte(`{"type":"rotation"}`)
	now := time.Now().Unix()
	header := sign(t, older, "msg_r", now, body) + " " + sign(t, newer, "msg_r", now, body)
	for _, p := range []string{"/old", "/new", "/both", "/stranger"} {
		post(t, r.URL(p), "msg_r", now, header, body)
	}
	for _, p := range []string{"/old", "/new", "/both"} {
		if d := only(t, r, p); !d.Verified {
			t.Errorf("%s: refused: %s", p, d.VerifyError)
		}
	}
	if d := only(t, r, "/stranger"); d.Verified || d.VerifyError != "No matching signature found" {
		t.Errorf("/stranger: verified = %v (%q), want refused", d.Verified, d.VerifyError)
	}
	// Entries of other versions are skipped, not fatal.
	header = "v2,bm90IGEgc2lnbmF0dXJl " + sign(t, newer, "msg_s", now, body)
	post(t, r.URL("/new"), "msg_s", now, header, body)
	if got := r.WaitFor(t, "/new", 2, 10*time.Second); !got[1].Verified {
		t.Errorf("v2 then v1: refused: %s", got[1].VerifyError)
	}
}

func TestUnknownPath(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	body := []byte(`{}`)
	now := time.Now().Unix()
	resp := post(t, r.URL("/nowhere"), "msg_1", now, sign(t, secret, "msg_1", now, body), body)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status = %d, want 404", resp.StatusCode)
	}
	d := only(t, r, "/nowhere")
	if d.Verified || d.VerifyError != "unknown path" || d.AnsweredStatus != 404 {
		t.Errorf("delivery = %+v", d)
	}
}

func TestResponses(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	r.Configure(t, "/flaky", []string{secret}, WithResponses(
		Response{Status: 503, RetryAfter: "7"},
		Response{Status: 500, Body: "boom"},
		Response{Status: 204, Delay: 200 * time.Millisecond},
	))
	body := []byte(`{"n":1}`)
	var statuses []int
	for i := range 4 {
		now := time.Now().Unix()
		id := "msg_" + strconv.Itoa(i)
		start := time.Now()
		resp := post(t, r.URL("/flaky"), id, now, sign(t, secret, id, now, body), body)
		statuses = append(statuses, resp.StatusCode)
		if i == 0 && resp.Header.Get("Retry-After") != "7" {
			t.Errorf("Retry-After = %q, want 7", resp.Header.Get("Retry-After"))
		}
		if i == 1 && resp.Header.Get("Retry-After") != "" {
			t.Errorf("Retry-After = %q on the second answer", resp.Header.Get("Retry-After"))
		}
		if i >= 2 {
			if took := time.Since(start); took < 200*time.Millisecond {
				t.Errorf("answer %d came after %v, want the 200ms delay", i, took)
			}
		}
	}
	if want := []int{503, 500, 204, 204}; !slices.Equal(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	got := r.WaitFor(t, "/flaky", 4, 10*time.Second)
	for i, d := range got {
		if d.AnsweredStatus != statuses[i] || !d.Verified || d.AnsweredAtMs < d.ReceivedAtMs || d.ClientClosed {
			t.Errorf("delivery %d = %+v", i, d)
		}
	}

	// Configuring again restarts the responses.
	r.Configure(t, "/flaky", []string{secret}, WithResponses(Response{Status: 410}))
	now := time.Now().Unix()
	if resp := post(t, r.URL("/flaky"), "msg_g", now, sign(t, secret, "msg_g", now, body), body); resp.StatusCode != http.StatusGone {
		t.Errorf("after reconfiguring: status = %d, want 410", resp.StatusCode)
	}
	if got := r.Received(t, "/flaky"); len(got) != 5 {
		t.Errorf("reconfiguring kept %d deliveries, want 5", len(got))
	}
}

func TestHang(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	r.Configure(t, "/dead", []string{secret}, WithResponses(Response{Hang: true}))
	body := []byte(`{"n":1}`)
	now := time.Now().Unix()
	req, err := http.NewRequest(http.MethodPost, r.URL("/dead"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", "msg_h")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now, 10))
	req.Header.Set("webhook-signature", sign(t, secret, "msg_h", now, body))
	client := &http.Client{Timeout: 300 * time.Millisecond}
	resp, err := client.Do(req)
	if err == nil {
		_ = resp.Body.Close() // an answer fails the test below; the connection is still freed
	}
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Fatalf("posting to a hanging endpoint: %v, want a timeout", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := only(t, r, "/dead")
		if !d.Verified || d.AnsweredStatus != 0 || d.AnsweredAtMs != 0 {
			t.Fatalf("delivery = %+v", d)
		}
		if d.ClientClosed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the receiver did not notice that the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEncodedPayload(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	r.Configure(t, "/encoded", []string{secret})
	inner := []byte(`{"type":"document.updated","data":{"id":"d2","n":[1,2,3]}}`)
	body, _ := json.Marshal(map[string]string{"encodedPayload": base64.StdEncoding.EncodeToString(inner)})
	now := time.Now().Unix()
	post(t, r.URL("/encoded"), "msg_e", now, sign(t, secret, "msg_e", now, body), body)
	d := only(t, r, "/encoded")
	if !d.Verified || d.PayloadError != "" {
		t.Fatalf("verified = %v (%q), payload error %q", d.Verified, d.VerifyError, d.PayloadError)
	}
	jsonEqual(t, d.Payload, inner)
}

func TestEncryptedPayload(t *testing.T) {
	r := Start(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	secret := newSecret(t)
	exact := `{"type":"exact","data":"`
	for (len(exact)+2)%aes.BlockSize != 0 {
		exact += "x"
	}
	exact += `"}` // a multiple of the block size: PKCS#7 adds a whole block of padding
	for _, inner := range []string{
		`{"type":"document.shared","data":{"id":"d3","to":"ana@example.com","note":"ünïcødé"}}`,
		exact,
	} {
		r.Reset(t)
		r.Configure(t, "/sealed", []string{secret}, WithPrivateKey(key))
		r.Configure(t, "/wrongkey", []string{secret}, WithPrivateKey(otherKey))
		r.Configure(t, "/nokey", []string{secret})
		body := encrypt(t, &key.PublicKey, []byte(inner))
		now := time.Now().Unix()
		for _, p := range []string{"/sealed", "/wrongkey", "/nokey"} {
			post(t, r.URL(p), "msg_x", now, sign(t, secret, "msg_x", now, body), body)
		}
		d := only(t, r, "/sealed")
		if !d.Verified || d.PayloadError != "" {
			t.Fatalf("verified = %v (%q), payload error %q", d.Verified, d.VerifyError, d.PayloadError)
		}
		jsonEqual(t, d.Payload, []byte(inner))
		if d := only(t, r, "/wrongkey"); !d.Verified || string(d.Payload) != "null" ||
			!strings.Contains(d.PayloadError, "RSA-OAEP-SHA256 decryption failed") {
			t.Errorf("wrong key: verified %v, payload %s, error %q", d.Verified, d.Payload, d.PayloadError)
		}
		if d := only(t, r, "/nokey"); string(d.Payload) != "null" || !strings.Contains(d.PayloadError, "no privateKeyPem") {
			t.Errorf("no key: payload %s, error %q", d.Payload, d.PayloadError)
		}
	}
}

func TestReset(t *testing.T) {
	r := Start(t)
	secret := newSecret(t)
	r.Configure(t, "/a", []string{secret})
	body := []byte(`{}`)
	now := time.Now().Unix()
	post(t, r.URL("/a"), "msg_1", now, sign(t, secret, "msg_1", now, body), body)
	r.WaitFor(t, "/a", 1, 10*time.Second)
	r.Reset(t)
	if got := r.Received(t, "/a"); len(got) != 0 {
		t.Errorf("after Reset: %+v", got)
	}
	// The endpoint is gone too.
	if resp := post(t, r.URL("/a"), "msg_2", now, sign(t, secret, "msg_2", now, body), body); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after Reset: status = %d, want 404", resp.StatusCode)
	}
}

// Receivers are independent processes; deliveries to one never show in another.
func TestTwoReceivers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.URL("/x") == b.URL("/x") {
		t.Fatalf("both receivers at %s", a.URL("/x"))
	}
	secret := newSecret(t)
	a.Configure(t, "/x", []string{secret})
	b.Configure(t, "/x", []string{secret})
	body := []byte(`{}`)
	now := time.Now().Unix()
	post(t, a.URL("x"), "msg_1", now, sign(t, secret, "msg_1", now, body), body)
	a.WaitFor(t, "/x", 1, 10*time.Second)
	if got := b.Received(t, "/x"); len(got) != 0 {
		t.Errorf("b received %+v", got)
	}
}

func TestReceiverDir(t *testing.T) {
	env, err := prepare()
	if err != nil {
		t.Fatal(err)
	}
	dir := env.Dir
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "..", "..", "..", "e2e", "webhookreceiver"); dir != filepath.Clean(want) {
		t.Errorf("receiverDir = %s, want %s", dir, filepath.Clean(want))
	}
}
