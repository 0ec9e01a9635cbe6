package cloudconfig

import (
	"strings"
	"testing"
)

const twoClouds = `
clusterName: demo
routes: sim
modules:
- name: sim
  module: {path: /modules/sim.wasm}
  nodes: {providerIDPrefix: "simcloud://", default: true}
  loadBalancers: {default: true}
- name: test
  module: {path: /modules/test.wasm}
  nodes: {providerIDPrefix: "test://", namePattern: "test-*"}
  loadBalancers: {classes: [example.com/test]}
`

func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestParseForms: a file with a top-level modules key, even an empty one,
// is a list of named modules; any other is one unnamed module's Config.
func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		sole       bool
		wantErr    string
	}{
		{"several", twoClouds, false, ""},
		{"one", "clusterName: c\nmodule: {path: /m.wasm}\n", true, ""},
		{"empty list", "modules: []\n", false, "0 modules"},
		{"null list", "modules:\n", false, "0 modules"},
		{"not a mapping", "- a\n", true, "cannot unmarshal"},
		{"one module's fields beside the list", "modules: [{name: a, module: {path: /a.wasm}, loadBalancers: {default: true}}]\nlimits: {poolSize: 2}\n", false, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.text))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Sole() != tc.sole {
				t.Errorf("Sole() = %v, want %v", f.Sole(), tc.sole)
			}
			if tc.sole && (len(f.Modules) != 1 || f.Modules[0].Name != "" || f.ClusterName != f.Modules[0].ClusterName) {
				t.Errorf("one module's file read as %+v", f)
			}
		})
	}
}

// TestPick: the module a command names, or the only one.
func TestPick(t *testing.T) {
	one := mustParse(t, "module: {path: /m.wasm}\n")
	several := mustParse(t, twoClouds)
	for _, tc := range []struct {
		name     string
		f        *File
		pick     string
		wantPath string
		wantErr  string
	}{
		{"the only module", one, "", "/m.wasm", ""},
		{"a name for the unnamed module", one, "sim", "", "name none"},
		{"by name", several, "test", "/modules/test.wasm", ""},
		{"no name among several", several, "", "", "name one of sim, test"},
		{"unknown name", several, "gone", "", `no module "gone"; it has sim, test`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.f.Pick(tc.pick)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || cfg.Module.Path != tc.wantPath {
				t.Fatalf("Pick(%q) = %+v, %v; want module.path %s", tc.pick, cfg, err, tc.wantPath)
			}
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	cfg := mustParse(t, twoClouds)
	for _, m := range cfg.Modules {
		if m.ClusterName != "demo" {
			t.Errorf("module %s: cluster name %q, want the cloud-config's", m.Name, m.ClusterName)
		}
		if want := "wasmccm-last-known-good-" + m.Name; m.Module.LastKnownGood.Name != want {
			t.Errorf("module %s: last-known-good record %q, want %q", m.Name, m.Module.LastKnownGood.Name, want)
		}
	}
}

// TestParseConfigRefuses lists the cloud-configs whose routing would be
// ambiguous or empty, each with the words its error must contain.
func TestParseConfigRefuses(t *testing.T) {
	one := func(entry string) string { return "modules:\n" + entry }
	sim := "- name: sim\n  module: {path: /s.wasm}\n  nodes: {providerIDPrefix: \"simcloud://\"}\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"no modules", "modules: [{}]\nclusterName: x\n", "name"},
		{"bad name", one("- name: Sim_1\n  module: {path: /s.wasm}\n  loadBalancers: {default: true}\n"), `"Sim_1"`},
		{"duplicate name", one(sim + sim), "used twice"},
		{"module's own problems", one("- name: sim\n  nodes: {providerIDPrefix: \"s://\"}\n"), "module.path or module.image is required"},
		{"unknown field", one("- name: sim\n  module: {path: /s.wasm}\n  nodes: {prefix: \"s://\"}\n"), "unknown field"},
		{"serves nothing", one("- name: sim\n  module: {path: /s.wasm}\n"), "serves no Nodes"},
		{"rule without prefix", one("- name: sim\n  module: {path: /s.wasm}\n  nodes: {namePattern: \"s-*\"}\n  loadBalancers: {default: true}\n"), "need nodes.providerIDPrefix"},
		{"prefix without scheme", one("- name: sim\n  module: {path: /s.wasm}\n  nodes: {providerIDPrefix: sim}\n"), `lacks the scheme`},
		{"overlapping prefixes", one(sim + "- name: sub\n  module: {path: /t.wasm}\n  nodes: {providerIDPrefix: \"simcloud://eu/\"}\n"), "could both claim"},
		{"two Node defaults", one(
			"- name: a\n  module: {path: /a.wasm}\n  nodes: {providerIDPrefix: \"a://\", default: true}\n" +
				"- name: b\n  module: {path: /b.wasm}\n  nodes: {providerIDPrefix: \"b://\", default: true}\n"), "nodes.default is set on 2 modules"},
		{"two load balancer defaults", one(
			"- name: a\n  module: {path: /a.wasm}\n  loadBalancers: {default: true}\n" +
				"- name: b\n  module: {path: /b.wasm}\n  loadBalancers: {default: true}\n"), "loadBalancers.default is set on 2 modules"},
		{"a class twice", one(
			"- name: a\n  module: {path: /a.wasm}\n  loadBalancers: {classes: [x/y]}\n" +
				"- name: b\n  module: {path: /b.wasm}\n  loadBalancers: {classes: [x/y]}\n"), `"x/y" is served by a too`},
		{"bad targets", one("- name: a\n  module: {path: /a.wasm}\n  loadBalancers: {default: true, targets: some}\n"), "loadBalancers.targets"},
		{"bad selector", one("- name: a\n  module: {path: /a.wasm}\n  nodes: {providerIDPrefix: \"a://\", selector: {matchExpressions: [{key: k, operator: Sideways}]}}\n"), "nodes.selector"},
		{"bad pattern", one("- name: a\n  module: {path: /a.wasm}\n  nodes: {providerIDPrefix: \"a://\", namePattern: \"[\"}\n"), "nodes.namePattern"},
		{"routes to nobody", "routes: gone\n" + one(sim), `no module is named "gone"`},
		{"another cluster", "clusterName: a\n" + one(sim+"  clusterName: b\n"), "differs from the cloud-config's"},
		{"shared record", one(
			"- name: a\n  module: {path: /a.wasm, lastKnownGood: {name: lkg}}\n  loadBalancers: {default: true}\n" +
				"- name: b\n  module: {path: /b.wasm, lastKnownGood: {name: lkg}}\n  loadBalancers: {classes: [x/y]}\n"), "is a's too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
