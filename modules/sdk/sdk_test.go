//go:build !wasip1

package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/modules/sdk"
	"github.com/wasmccm/wasmccm/modules/sdk/hosthttp"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
)

// TestStandardLibraryOnly keeps the SDK module importable by TinyGo and small
// in wasip1 builds: nothing outside the standard library and the ABI module
// (whose go.mod requires nothing).
func TestStandardLibraryOnly(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
	cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, "github.com/wasmccm/wasmccm/modules/sdk") && pkg != "github.com/wasmccm/wasmccm/abi" {
			t.Errorf("the SDK depends on %s", pkg)
		}
	}
}

func TestImportsOutsideWasm(t *testing.T) {
	h := sdk.Imports()
	if _, err := h.HTTP(&abi.HTTPRequest{URL: "http://x"}); !errors.Is(err, sdk.ErrNoHost) {
		t.Fatalf("HTTP outside wasm: %v", err)
	}
	if _, err := h.Credential("token"); !errors.Is(err, sdk.ErrNoHost) {
		t.Fatalf("Credential outside wasm: %v", err)
	}
}

// TestTransportOverHost runs net/http client code over an sdk.Host, as a
// standard Go module does over the host's http_do.
func TestTransportOverHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-In"))
		w.WriteHeader(http.StatusAccepted)
		w.Write(append([]byte(r.Method+" "), body...))
	}))
	defer srv.Close()
	client := &http.Client{Transport: &hosthttp.Transport{Host: &native.Host{Credentials: map[string]string{"token": "t"}}}}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL, strings.NewReader("hello"))
	req.Header.Set("X-In", "42")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || string(body) != "POST hello" || resp.Header.Get("X-Echo") != "42" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

func TestNativeHostCredentials(t *testing.T) {
	h := &native.Host{Credentials: map[string]string{"token": "t"}}
	if v, err := h.Credential("token"); err != nil || v != "t" {
		t.Fatalf("%q %v", v, err)
	}
	var cerr *sdk.CredentialError
	if _, err := h.Credential("other"); !errors.As(err, &cerr) || cerr.Errno != abi.ErrnoNotGranted {
		t.Fatalf("ungranted credential: %v", err)
	}
}

// TestNotFound: the error says what was not found, matches ErrNotFound
// however wrapped, and reaches the host as StatusNotFound.
func TestNotFound(t *testing.T) {
	err := fmt.Errorf("looking up node-1: %w", sdk.NotFound("mycloud: no server named node-1"))
	if !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("%v does not match ErrNotFound", err)
	}
	if got := err.Error(); got != "looking up node-1: mycloud: no server named node-1" {
		t.Errorf("message %q", got)
	}
	if o := sdk.OutcomeOf(err); o.Status != abi.StatusNotFound {
		t.Errorf("status %v, want NotFound", o.Status)
	}
}
