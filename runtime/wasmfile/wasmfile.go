// Package wasmfile checks and unpacks a provider module's file as it is
// stored (in a ConfigMap, an image volume or an OCI layer) before anything
// runs it: the sha256 pin (CheckSHA256), the detached signature
// (VerifySignature), and gzip decompression bounded by MaxModuleBytes
// (Decompress).
//
// It uses the standard library alone, so that what only fetches or checks
// module files (runtime/oci, runtime/modulefile) does not pull in the
// WebAssembly runtime or the credential schemes.
package wasmfile

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// MaxModuleBytes bounds a module's size after decompression, so that a
// gzip bomb in a ConfigMap cannot exhaust the CCM's memory.
const MaxModuleBytes = 64 << 20

var gzipMagic = []byte{0x1f, 0x8b}

// CheckSHA256 compares data's digest with a hex digest ("sha256:" prefix
// optional). An empty want accepts anything.
func CheckSHA256(data []byte, want string) error {
	want = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(want), "sha256:"))
	if want == "" {
		return nil
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("sha256 mismatch: file has %s, configuration pins %s", got, want)
	}
	return nil
}

// Decompress returns data itself when it is not gzip, else its content,
// bounded by MaxModuleBytes.
func Decompress(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, gzipMagic) {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	wasm, err := io.ReadAll(io.LimitReader(zr, MaxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("decompressed module exceeds %d bytes", MaxModuleBytes)
	}
	return wasm, nil
}
