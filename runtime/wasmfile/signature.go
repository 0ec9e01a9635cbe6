package wasmfile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// VerifySignature checks a detached signature in the format of
// `cosign sign-blob --key`: base64 of an ASN.1 ECDSA signature over the
// SHA-256 digest of data, made with the private half of a P-256 key whose
// public half is PEM "PUBLIC KEY" (PKIX).
func VerifySignature(data, publicKeyPEM, signatureB64 []byte) error {
	block, _ := pem.Decode(publicKeyPEM)
	if block == nil || block.Type != "PUBLIC KEY" {
		return errors.New("public key: no PEM PUBLIC KEY block")
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return errors.New("public key: not an ECDSA P-256 key")
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(signatureB64)))
	if err != nil {
		return fmt.Errorf("signature: not base64: %w", err)
	}
	digest := sha256.Sum256(data)
	if !ecdsa.VerifyASN1(pub, digest[:], sig) {
		return errors.New("signature does not verify against the public key")
	}
	return nil
}
