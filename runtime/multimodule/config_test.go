package multimodule

import (
	"strings"
	"testing"
)

func TestIsMulti(t *testing.T) {
	for text, want := range map[string]bool{
		twoClouds:                         true,
		"module: {path: /m.wasm}\n":       false,
		"modules: []\n":                   true, // refused by ParseConfig, as it should be
		"modules:\n":                      true,
		"- a\n":                           false,
		"clusterName: x\nmodules: [{}]\n": true,
	} {
		if got := IsMulti([]byte(text)); got != want {
			t.Errorf("IsMulti(%q) = %v, want %v", text, got, want)
		}
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
			_, err := ParseConfig(strings.NewReader(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
