package cloudconfig

import (
	"strings"
	"testing"

	"github.com/wasmccm/wasmccm/runtime/credentials"
)

// FuzzParseConfig: any cloud-config is either refused with an error or
// yields a config whose host settings are within the documented bounds.
func FuzzParseConfig(f *testing.F) {
	f.Add("module: {path: /m.wasm}\n")
	f.Add("clusterName: c\nmodule: {path: /m.wasm.gz, sha256: abc, reloadInterval: 5s}\nlimits: {poolSize: 4, callTimeout: 1s, memoryLimitMiB: 64}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /c, auth: [{name: token, origins: [\"https://a.example\"], bearer: {key: token}}]}\nproviderConfig: {x: [1, 2]}\n")
	f.Add("module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /c, readable: [k], auth: [{name: a, origins: [\"https://a.example\"], sigv4: {accessKeyIDKey: i, secretAccessKeyKey: s, region: r}}, {name: g, origins: [\"https://a.example\"], googleServiceAccount: {key: k, scopes: [s]}}]}\n")
	f.Add("module: {path: x}\nhttp: {allowedOrigins: [\"http://[::1]:80\", \"https://h:99999\"]}\n")
	f.Add("module: {image: r.example/m@sha256:0123456789012345678901234567890123456789012345678901234567890123, imageCacheDir: /c}\nhttp: {allowedOrigins: [\"https://a.example\"], rateLimits: [{origin: \"https://a.example\", perHour: 3600, burst: 5}]}\nsafety: {maxNodeDeletions: {count: 2, window: 1m}}\norphanSweep: {period: 2s}\n")
	f.Add("clusterName: c\nroutes: a\nmodules:\n- name: a\n  module: {path: /a.wasm}\n  nodes: {providerIDPrefix: \"a://\", default: true, selector: {matchLabels: {c: a}}}\n  loadBalancers: {default: true}\n- name: b\n  module: {path: /b.wasm}\n  limits: {poolSize: 2}\n  loadBalancers: {classes: [x/y], targets: all}\n")
	f.Fuzz(func(t *testing.T, doc string) {
		file, err := Parse(strings.NewReader(doc))
		if err != nil {
			return
		}
		for i := range file.Modules {
			checkBounds(t, &file.Modules[i].Config)
		}
	})
}

// checkBounds fails t when cfg's host settings are outside the documented
// bounds.
func checkBounds(t *testing.T, cfg *Config) {
	if err := credentials.Validate(cfg.Credentials, cfg.HTTP.AllowedOrigins); err != nil {
		t.Fatalf("accepted credentials the host refuses: %v", err)
	}
	l := cfg.Limits
	if (cfg.Module.Path == "") == (cfg.Module.Image == "") || l.PoolSize < 0 || l.PoolSize > 256 || l.CallTimeout.Duration < 0 ||
		l.MemoryLimitMiB > 4096 || l.SharedStateMiB > 4096 || l.RecycleAboveMiB > 4096 {
		t.Fatalf("accepted out-of-bounds config: %+v", cfg)
	}
	if _, err := Paces(cfg.HTTP.RateLimits, cfg.HTTP.AllowedOrigins); err != nil {
		t.Fatalf("accepted rate limits the host refuses: %v", err)
	}
	if b := cfg.Safety.MaxNodeDeletions.WithDefaults(); *b.Count < 0 || *b.Percent < 0 || *b.Percent > 100 || b.Window.Duration <= 0 {
		t.Fatalf("accepted a deletion budget out of bounds: %+v", b)
	}
}
