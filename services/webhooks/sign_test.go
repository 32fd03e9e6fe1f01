package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
)

// REFERENCE's test vector.
func TestSignatureVector(t *testing.T) {
	got, err := signature("whsec_plJ3nmyCDGBKInavdOK15jsl", "msg_loFOjxBNrRLzqYUf", 1731705121, []byte(`{"event_type":"ping","data":{"success":true}}`))
	if err != nil || got != "v1,rAvfW3dJ/X/qxhsaXPOyyCGmRKsaKWcsNccKXlIktD0=" {
		t.Fatalf("%q %v", got, err)
	}
	two, _ := signatures([]string{"whsec_plJ3nmyCDGBKInavdOK15jsl", newSecret()}, "msg_loFOjxBNrRLzqYUf", 1731705121, []byte(`{"event_type":"ping","data":{"success":true}}`))
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
