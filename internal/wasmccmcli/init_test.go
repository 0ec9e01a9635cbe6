package wasmccmcli

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/internal/conformance"
)

func TestInit(t *testing.T) {
	dir := t.TempDir()
	occupied := filepath.Join(dir, "occupied")
	os.MkdirAll(occupied, 0o755)
	os.WriteFile(filepath.Join(occupied, "keep.txt"), []byte("mine"), 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("mine"), 0o644)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"MyCloud"}, "must be lower-case"},
		{[]string{}, "want exactly one NAME"},
		{[]string{"-dir", occupied, "mycloud"}, "exists and is not empty, and init writes only into a new or empty directory: pick another with -dir, or remove it"},
		{[]string{"-dir", file, "mycloud"}, file + " is a file, and init creates a directory there: remove or rename the file, or pick another directory with -dir"},
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
	if b, _ := os.ReadFile(file); string(b) != "mine" {
		t.Error("init touched a file")
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

// TestScaffoldMakefileWithoutTinyGo: make module without TinyGo names the
// three ways on: make deps, TINYGO= and make module-go.
func TestScaffoldMakefileWithoutTinyGo(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := filepath.Join(t.TempDir(), "mycloud")
	if code, _, errOut := runCLI(t, "", "init", "-dir", dir, "mycloud"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	missing := filepath.Join(t.TempDir(), "bin", "tinygo")
	cmd := exec.Command("make", "module", "TINYGO="+missing)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make module succeeded without TinyGo:\n%s", out)
	}
	for _, want := range []string{"TinyGo not found: " + missing, "make deps", "make module TINYGO=/path/to/tinygo", "make module-go"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make module output lacks %q:\n%s", want, out)
		}
	}
}

// TestScaffoldSpecSections: the test spec init writes shows every section
// of the spec, and with its examples uncommented the suite reads it: the
// scaffold never shows a field the suite would reject.
func TestScaffoldSpecSections(t *testing.T) {
	files, err := renderScaffold(scaffoldData{Name: "mycloud", Package: "mycloud", Module: "mycloud", SDKVersion: sdkVersion})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(files, func(f scaffoldFile) bool { return f.path == "test-spec.yaml" })
	if i < 0 {
		t.Fatal("init writes no test-spec.yaml")
	}
	// A commented example starts with a key or a list item; prose does not.
	example := regexp.MustCompile(`(?m)^(\s*)# (\s*(?:[A-Za-z]+:|- ))`)
	uncommented := example.ReplaceAll(files[i].content, []byte("$1$2"))
	path := filepath.Join(t.TempDir(), "test-spec.yaml")
	if err := os.WriteFile(path, uncommented, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := conformance.ReadSpec(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, uncommented)
	}
	if len(spec.Nodes) != 4 || len(spec.LoadBalancer.Destructive) != 1 || len(spec.LoadBalancer.List.Foreign) != 1 || len(spec.LoadBalancer.Annotations) != 1 || spec.LimitedCredentials == nil ||
		spec.RateLimit == nil || spec.SlowCloud == nil || spec.Warm.Period == "" || spec.Routes.DestinationCIDR == "" {
		t.Errorf("the scaffold's spec lacks a section:\n%s", uncommented)
	}
}
