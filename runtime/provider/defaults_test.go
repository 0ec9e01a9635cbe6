package provider

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/runtime/host"
)

// TestDefaults: the defaults the reference documents make a valid
// cloud-config, and the host's among them, converted to the
// cloud-config's units, are the host's own.
func TestDefaults(t *testing.T) {
	d := Defaults()
	d.Module.Path = "module.wasm"
	data, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the defaults do not validate: %v\n%s", err, data)
	}
	got, want := HostConfig(cfg, "module"), host.Defaults()
	if got.ClusterName != "kubernetes" || got.PoolSize != want.PoolSize || got.CallTimeout != want.CallTimeout ||
		got.MemoryLimitPages != want.MemoryLimitPages || got.SharedStateBytes != want.SharedStateBytes ||
		got.HTTP.Timeout != want.HTTP.Timeout || got.HTTP.MaxResponseBytes != want.HTTP.MaxResponseBytes {
		t.Errorf("host config of the defaults %+v, want the host's defaults %+v", got, want)
	}
}
