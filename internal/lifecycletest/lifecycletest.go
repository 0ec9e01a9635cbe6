// Package lifecycletest provides what the tests of the module lifecycle
// (runtime/lifecycle) and of the provider adapter (runtime/provider) run
// modules with: the first-party simcloud module and its variants, the
// host's test guests, a simulated cloud with the grants a module needs to
// reach it, signed and compressed module files, and files written as the
// kubelet updates a volume.
package lifecycletest

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
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/credentials"
)

func build(t testing.TB, dir string) []byte {
	t.Helper()
	root, err := wasmbuild.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	path, err := wasmbuild.Build(filepath.Join(root, dir), wasmbuild.Go)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// SimcloudModule returns the simcloud module ("simcloud") or one of the
// variants the end-to-end suite replaces it with (test/e2e/testdata), and
// its digest.
func SimcloudModule(t testing.TB, pkg string) ([]byte, string) {
	t.Helper()
	dir := filepath.Join("test", "e2e", "testdata", pkg)
	if pkg == "simcloud" {
		dir = filepath.Join("modules", "simcloud", "module")
	}
	wasm := build(t, dir)
	return wasm, Digest(wasm)
}

// Guest returns one of the host's test guests (runtime/host/testdata).
func Guest(t testing.TB, name string) []byte {
	t.Helper()
	return build(t, filepath.Join("runtime", "host", "testdata", "guests", name))
}

// Digest is data's sha256, in hex, as modulefile.File.Digest has it.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// CompilationCache is the compilation cache the end-to-end suite's CCMs
// use too: the test modules are compiled once per content, not once per
// test process.
func CompilationCache() string { return filepath.Join(wasmbuild.CacheDir(), "compilation") }

// Grants are what the simcloud module needs to reach its cloud: the
// origin to allow, the credentials to apply, and its providerConfig.
type Grants struct {
	Origin         string
	Credentials    credentials.Config
	ProviderConfig []byte
}

// Simcloud starts a simulated cloud and returns it with the grants the
// simcloud module needs to reach it.
func Simcloud(t testing.TB) (*simcloud.Cloud, Grants) {
	t.Helper()
	cloud := simcloud.New(simcloud.Options{Token: "t"})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	creds := t.TempDir()
	WriteFile(t, filepath.Join(creds, "token"), []byte("t"))
	return cloud, Grants{
		Origin: srv.URL,
		Credentials: credentials.Config{Dir: creds, Auth: []credentials.AuthConfig{
			{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}},
		}},
		ProviderConfig: fmt.Appendf(nil, `{"endpoint":%q,"tokenCredential":"token"}`, srv.URL),
	}
}

// WriteFile writes data to path, then renames it into place, as the
// kubelet's atomic volume update does, so a poll never reads half a file.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Signer returns a new P-256 public key, PEM-encoded, and a function
// signing with it as `cosign sign-blob` does.
func Signer(t testing.TB) ([]byte, func([]byte) []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), func(b []byte) []byte {
		sum := sha256.Sum256(b)
		sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
	}
}

// Gzip compresses data: the same module to the host, another file.
func Gzip(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
