package wasmfile

import (
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"testing"
)

// TestCheckSHA256 accepts the file's digest however the pin is written
// and refuses any other.
func TestCheckSHA256(t *testing.T) {
	data := []byte("\x00asm\x01\x00\x00\x00")
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	for _, pin := range []string{"", digest, "sha256:" + digest, " " + strings.ToUpper(digest) + "\n"} {
		if err := CheckSHA256(data, pin); err != nil {
			t.Errorf("pin %q: %v", pin, err)
		}
	}
	other := sha256.Sum256([]byte("other"))
	if err := CheckSHA256(data, hex.EncodeToString(other[:])); err == nil || !strings.Contains(err.Error(), digest) {
		t.Errorf("another digest: %v, want a mismatch naming the file's digest", err)
	}
}

// TestVerifySignature accepts a cosign sign-blob signature made with the
// key and refuses one over other bytes, by another key, or malformed.
func TestVerifySignature(t *testing.T) {
	data := []byte("\x00asm module")
	key, publicPEM := p256Key(t)
	digest := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	signature := []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
	if err := VerifySignature(data, publicPEM, signature); err != nil {
		t.Fatalf("valid signature: %v", err)
	}
	_, otherPEM := p256Key(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name            string
		data, key, sig  []byte
		wantErrContains string
	}{
		{"other bytes", []byte("\x00asm other"), publicPEM, signature, "does not verify"},
		{"other key", data, otherPEM, signature, "does not verify"},
		{"no PEM", data, []byte("not a key"), signature, "no PEM PUBLIC KEY"},
		{"not P-256", data, publicKeyPEM(t, &p384.PublicKey), signature, "not an ECDSA P-256 key"},
		{"not base64", data, publicPEM, []byte("%%%"), "not base64"},
	} {
		if err := VerifySignature(tt.data, tt.key, tt.sig); err == nil || !strings.Contains(err.Error(), tt.wantErrContains) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.wantErrContains)
		}
	}
}

func p256Key(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key, publicKeyPEM(t, &key.PublicKey)
}

func publicKeyPEM(t *testing.T, pub *ecdsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestDecompress passes a plain module through, unpacks a gzip one, and
// refuses one that unpacks beyond MaxModuleBytes: a gzip bomb costs at
// most the bound.
func TestDecompress(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00")
	if got, err := Decompress(wasm); err != nil || !bytes.Equal(got, wasm) {
		t.Errorf("plain: %x, %v", got, err)
	}
	if got, err := Decompress(gzipped(t, wasm)); err != nil || !bytes.Equal(got, wasm) {
		t.Errorf("gzip: %x, %v", got, err)
	}
	if got, err := Decompress(gzipped(t, make([]byte, MaxModuleBytes))); err != nil || len(got) != MaxModuleBytes {
		t.Errorf("gzip of exactly MaxModuleBytes: %d bytes, %v", len(got), err)
	}
	if _, err := Decompress(gzipped(t, make([]byte, MaxModuleBytes+1))); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("gzip beyond MaxModuleBytes: %v, want a refusal", err)
	}
	if _, err := Decompress([]byte{0x1f, 0x8b, 0}); err == nil {
		t.Error("a truncated gzip header is accepted")
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
