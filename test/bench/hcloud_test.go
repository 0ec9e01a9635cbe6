package bench

import (
	"context"
	"testing"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/modules/hcloud"
	"github.com/wasmccm/wasmccm/runtime/host"
)

const (
	hcloudModule   = "../../modules/hcloud/module"
	hcloudEndpoint = "http://hcloud.bench"
)

var hcloudConfig = []byte(`{"endpoint": "` + hcloudEndpoint + `/v1", "tokenCredential": "token", "network": "k8s"}`)

// BenchmarkHcloudInstanceMetadata is BenchmarkCall's InstanceMetadata for
// the Hetzner Cloud provider: a Node without provider ID, looked up by name
// (GET /v1/servers?name=...) among cloudInstances servers of the fake
// Hetzner API, answered in-process, natively and as Go and TinyGo modules.
func BenchmarkHcloudInstanceMetadata(b *testing.B) {
	ctx := context.Background()
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			e := newCloudEnvN(b, simcloud.Global{}, 0) // for its credential directory
			fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, RateLimit: 1 << 30})
			network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
			if err != nil {
				b.Fatal(err)
			}
			for i := 1; i <= cloudInstances; i++ {
				if _, err := fake.AddServer(hcloudfake.Server{Name: nodeName(i), Network: network.ID}); err != nil {
					b.Fatal(err)
				}
			}
			e.transport = handlerTransport{fake.Handler()}
			n := node(42, false)
			var call func() error
			if v.tc == "" {
				p := hcloud.New(e.nativeHost(b, hcloudEndpoint))
				if err := p.Init(ctx, clusterName, hcloudConfig); err != nil {
					b.Fatal(err)
				}
				call = func() error {
					meta, err := p.InstanceMetadata(ctx, n)
					if err != nil {
						return err
					}
					return checkMetadata(meta)
				}
			} else {
				cfg := e.cachedConfig("hcloud-" + string(v.tc))
				cfg.ProviderConfig = hcloudConfig
				cfg.HTTP = host.HTTPConfig{AllowedOrigins: []string{hcloudEndpoint}, Transport: e.transport}
				cfg.Credentials = e.credentials(hcloudEndpoint)
				m, err := host.New(ctx, moduleWasm(b, hcloudModule, v.tc), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close(context.Background()) })
				call = func() error { return wasmTarget{m}.instanceMetadata(ctx, n) }
			}
			for range 3 {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			measure(b, call)
		})
	}
}
