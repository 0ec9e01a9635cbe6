package main

import (
	"bytes"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInit(t *testing.T) {
	dir := t.TempDir()
	occupied := filepath.Join(dir, "occupied")
	os.MkdirAll(occupied, 0o755)
	os.WriteFile(filepath.Join(occupied, "keep.txt"), []byte("mine"), 0o644)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"MyCloud"}, "must be lower-case"},
		{[]string{}, "want exactly one NAME"},
		{[]string{"-dir", occupied, "mycloud"}, "exists and is not empty"},
		{[]string{"-dir", filepath.Join(dir, "ok"), "-module", "example.com/acme/ccm", "acme-cloud"}, ""},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(t, "", append([]string{"init"}, tt.args...)...)
		if tt.wantErr != "" {
			if code != 1 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("init %q: exit %d, %q; want error %q", tt.args, code, errOut, tt.wantErr)
			}
			continue
		}
		if code != 0 {
			t.Fatalf("init %q: exit %d: %s", tt.args, code, errOut)
		}
		if !strings.Contains(out, "wasmccm test -config cloud-config.yaml -spec test-spec.yaml acme-cloud.wasm") {
			t.Errorf("next steps missing:\n%s", out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(occupied, "keep.txt")); string(b) != "mine" {
		t.Error("init touched a non-empty directory")
	}
	want := map[string]string{
		"go.mod":            "module example.com/acme/ccm\n\ngo 1.24\n\nrequire (\n\tgithub.com/wasmccm/wasmccm/abi " + sdkVersion + "\n\tgithub.com/wasmccm/wasmccm/modules/sdk " + sdkVersion + "\n)\n",
		"provider.go":       "package acmecloud",
		"provider_test.go":  `"acme-cloud://i-1"`,
		"module/main.go":    `acmecloud "example.com/acme/ccm"`,
		"Makefile":          "-o acme-cloud.wasm ./module",
		"cloud-config.yaml": "path: acme-cloud.wasm",
		"test-spec.yaml":    "providerID: acme-cloud://i-1",
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, "ok", name))
		if err != nil || !strings.Contains(string(b), content) {
			t.Errorf("%s: %v, want it to contain %q:\n%s", name, err, content, b)
		}
	}
}

// TestScaffoldGofmt: every Go file init writes is gofmt-clean, whatever
// the provider's name and module path.
func TestScaffoldGofmt(t *testing.T) {
	for _, data := range []scaffoldData{
		{Name: "mycloud", Package: "mycloud", Module: "mycloud", SDKVersion: sdkVersion},
		{Name: "acme-cloud", Package: "acmecloud", Module: "example.com/acme/ccm", SDKVersion: sdkVersion},
		{Name: "zcloud", Package: "zcloud", Module: "zz.example/z", SDKVersion: sdkVersion},
	} {
		files, err := renderScaffold(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f.path, ".go") {
				continue
			}
			formatted, err := format.Source(f.content)
			if err != nil {
				t.Errorf("%s (%s): %v", f.path, data.Module, err)
			} else if !bytes.Equal(formatted, f.content) {
				t.Errorf("%s (%s) is not gofmt-clean:\n%s", f.path, data.Module, f.content)
			}
		}
	}
}
