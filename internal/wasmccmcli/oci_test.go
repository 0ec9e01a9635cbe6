package wasmccmcli

import (
	"bytes"
	"encoding/base64"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// TestPushPull pushes a module to an in-process registry behind basic
// authentication and pulls it back through the command line.
func TestPushPull(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ci" || p != "pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	dockerConfig := filepath.Join(dir, "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("ci:pw"))
	if err := os.WriteFile(dockerConfig, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	module := testprovider(t)
	wasm, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	notModule := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notModule, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "", "push", "-docker-config", dockerConfig, module, host+"/provider:v1")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	ref := strings.TrimSpace(out)
	if !strings.HasPrefix(ref, host+"/provider@sha256:") {
		t.Fatalf("push printed %q, want the reference by digest", out)
	}

	pulled := filepath.Join(dir, "pulled.wasm")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"pull by digest", []string{"pull", "-docker-config", dockerConfig, "-o", pulled, ref}, 0, "artifact sha256:"},
		{"pull by tag refused", []string{"pull", "-docker-config", dockerConfig, "-o", pulled, host + "/provider:v1"}, 1, "has no digest"},
		{"pull by tag allowed", []string{"pull", "-docker-config", dockerConfig, "-allow-tags", "-o", pulled, host + "/provider:v1"}, 0, "artifact sha256:"},
		{"pull without credentials", []string{"pull", "-docker-config", filepath.Join(dir, "missing.json"), "-o", pulled, ref}, 1, "registry credentials"},
		{"push a file that is no module", []string{"push", "-docker-config", dockerConfig, notModule, host + "/provider:v1"}, 1, "not a wasm module"},
		{"push without REF", []string{"push", module}, 1, "want MODULE and REF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(pulled)
			code, out, errOut := runCLI(t, "", tt.args...)
			if code != tt.wantCode || !strings.Contains(out+errOut, tt.wantOut) {
				t.Fatalf("exit %d, output %q %q; want exit %d and %q", code, out, errOut, tt.wantCode, tt.wantOut)
			}
			if tt.wantCode == 0 {
				got, err := os.ReadFile(pulled)
				if err != nil || !bytes.Equal(got, wasm) {
					t.Fatalf("pulled module differs from the pushed one (%v)", err)
				}
			}
		})
	}
}
