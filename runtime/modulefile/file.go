// Package modulefile gets a provider module's bytes and decides whether to
// trust them: a file (a mounted ConfigMap or image volume) checked against
// its sha256 pin and signature, an OCI artifact pulled from a registry
// into a cache and installed as that file, and the last-known-good record
// kept in the cluster.
//
// It knows nothing of the controllers or of wasm: it hands out checked,
// decompressed bytes, and runtime/provider decides which module serves.
package modulefile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/wasmccm/wasmccm/runtime/wasmfile"
)

// Trust is what a module file must satisfy: the sha256 pin of the file
// as stored (hex, optional "sha256:" prefix) and, when PublicKeyPath is
// set, an ECDSA P-256 signature (`cosign sign-blob --key`) in
// SignaturePath.
type Trust struct {
	SHA256                       string
	PublicKeyPath, SignaturePath string
}

// File is a module as read and checked.
type File struct {
	// Wasm is the decompressed module.
	Wasm   []byte
	Digest string
	// Raw and Signature are the file and its signature as stored, which
	// the last-known-good record keeps.
	Raw, Signature []byte
	// Checked names everything the checks read: the module's digest, the
	// pin, and the signature's and public key's contents (or why they
	// could not be read). A rejection remembered under it is checked again
	// when any of them changes (a signature or key arriving after the
	// module file, from another ConfigMap or Secret, or a key rotation).
	Checked string
}

// Read reads the module at path and applies trust's checks, the pin
// first, then the signature, both over the file's bytes as stored.
func Read(path string, trust Trust) (File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("reading module: %w", err)
	}
	file, err := Check(raw, trust, func() ([]byte, error) { return os.ReadFile(trust.SignaturePath) })
	if err != nil {
		err = fmt.Errorf("module %s: %w", path, err)
	}
	return file, err
}

// Check applies trust's checks to a module file's bytes, reading the
// signature only when trust requires one, and decompresses it.
func Check(raw []byte, trust Trust, readSignature func() ([]byte, error)) (File, error) {
	sum := sha256.Sum256(raw)
	file := File{Digest: hex.EncodeToString(sum[:]), Raw: raw}
	file.Checked = file.Digest + " pin " + trust.SHA256
	if err := wasmfile.CheckSHA256(raw, trust.SHA256); err != nil {
		return file, err
	}
	if trust.PublicKeyPath != "" {
		key, keyErr := os.ReadFile(trust.PublicKeyPath)
		sig, sigErr := readSignature()
		file.Checked += " key " + contentKey(key, keyErr) + " signature " + contentKey(sig, sigErr)
		if keyErr != nil {
			return file, fmt.Errorf("module public key: %w", keyErr)
		}
		if sigErr != nil {
			return file, fmt.Errorf("module signature: %w", sigErr)
		}
		if err := wasmfile.VerifySignature(raw, key, sig); err != nil {
			return file, err
		}
		file.Signature = sig
	}
	var err error
	file.Wasm, err = wasmfile.Decompress(raw)
	return file, err
}

// contentKey names a file's content, or the error reading it.
func contentKey(b []byte, err error) string {
	if err != nil {
		return "(" + err.Error() + ")"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
