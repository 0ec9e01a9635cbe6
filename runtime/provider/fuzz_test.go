package provider

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
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := ParseConfig(strings.NewReader(doc))
		if err != nil {
			return
		}
		hc := cfg.HostConfig("fuzz")
		if err := credentials.Validate(hc.Credentials, hc.HTTP.AllowedOrigins); err != nil {
			t.Fatalf("accepted credentials the host refuses: %v", err)
		}
		if cfg.Module.Path == "" || hc.PoolSize < 0 || hc.PoolSize > 256 || hc.CallTimeout < 0 || hc.MemoryLimitPages > 65536 {
			t.Fatalf("accepted out-of-bounds config: %+v", cfg)
		}
	})
}
