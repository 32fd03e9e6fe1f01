// Package tlstest makes certificate authorities and certificates for tests, with crypto/x509,
// and writes them as the PEM files the process reads.
package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// PEM is the CA certificate, the content of a CA bundle file.
	PEM []byte
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: CA: %v", err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue makes a certificate for both server and client use, named name, with hosts (DNS names
// or IP addresses) as its SANs; without hosts, 127.0.0.1 and localhost. It is valid from an
// hour ago for a day.
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) Leaf {
	t.Helper()
	return ca.IssueValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts...)
}

// IssueValid is Issue with the validity period from notBefore to notAfter.
func (ca *CA) IssueValid(t testing.TB, name string, notBefore, notAfter time.Time, hosts ...string) Leaf {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatalf("tlstest: issue %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: issue %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("tlstest: key of %s: %v", name, err)
	}
	return Leaf{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Files are the paths of a certificate, its key and the CA bundle that verifies it.
type Files struct{ Cert, Key, CA string }

// Write puts the leaf and the CA's certificate in dir as <base>.crt, <base>.key and
// <base>-ca.crt (the key readable by its owner only).
func (ca *CA) Write(t testing.TB, dir, base string, l Leaf) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(dir, base+".crt"), Key: filepath.Join(dir, base+".key"), CA: filepath.Join(dir, base+"-ca.crt")}
	Replace(t, f.Cert, l.CertPEM)
	Replace(t, f.Key, l.KeyPEM)
	Replace(t, f.CA, ca.PEM)
	return f
}

// Replace writes b to path as an operator's rotation would: a new file renamed over the old
// one, so a reader sees either version whole.
func Replace(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("tlstest: serial: %v", err)
	}
	return n
}
