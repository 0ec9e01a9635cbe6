package wasmccmcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadConfigPicksAModule: the tool takes one module's grants from a
// cloud-config of several, named after the file.
func TestLoadConfigPicksAModule(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	two := write("two.yaml", `
modules:
- name: a
  module: {path: /a.wasm}
  loadBalancers: {default: true}
  http: {allowedOrigins: ["https://a.example"]}
- name: b
  module: {path: /b.wasm}
  loadBalancers: {classes: [x/b]}
  http: {allowedOrigins: ["https://b.example"]}
`)
	one := write("one.yaml", "modules:\n- name: a\n  module: {path: /a.wasm}\n  loadBalancers: {default: true}\n")
	sole := write("sole.yaml", "module: {path: /a.wasm}\nhttp: {allowedOrigins: [\"https://s.example\"]}\n")
	for _, tc := range []struct {
		path, origin, err string
	}{
		{path: two + "#b", origin: "https://b.example"},
		{path: two + "#a", origin: "https://a.example"},
		{path: two, err: "name one of a, b (-config FILE#NAME)"},
		{path: two + "#c", err: `no module "c"; it has a, b`},
		{path: one},
		{path: sole, origin: "https://s.example"},
		{path: sole + "#a", err: "name none"},
	} {
		cfg, err := loadConfig(tc.path, "/built.wasm")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if cfg.Module.Path != "/built.wasm" || tc.origin != "" && cfg.HTTP.AllowedOrigins[0] != tc.origin {
			t.Errorf("%s: module %s, origins %v; want /built.wasm and %s", tc.path, cfg.Module.Path, cfg.HTTP.AllowedOrigins, tc.origin)
		}
	}
}
