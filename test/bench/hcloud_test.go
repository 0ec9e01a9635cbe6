package bench

import (
	"context"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/modules/hcloud"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
)

const (
	hcloudModule   = "../../modules/hcloud/module"
	hcloudEndpoint = "http://hcloud.bench"
)

// hcloudConfig is the provider config with the server snapshot at its
// default max age, or "off".
func hcloudConfig(serverCache string) []byte {
	return []byte(`{"endpoint": "` + hcloudEndpoint + `/v1", "tokenCredential": "token", "network": "k8s", "serverCacheMaxAge": "` + serverCache + `"}`)
}

// BenchmarkHcloudInstanceMetadata is BenchmarkCall's InstanceMetadata for
// the Hetzner Cloud provider: a Node without provider ID, looked up by name
// among cloudInstances servers of the fake Hetzner API, answered
// in-process, natively and as Go and TinyGo modules. The lookup comes from
// the server snapshot in shared state, as the module runs by default.
func BenchmarkHcloudInstanceMetadata(b *testing.B) {
	benchmarkHcloudInstanceMetadata(b, "10s", cloudInstances)
}

// BenchmarkHcloudInstanceMetadataNoSnapshot is the same lookup with the
// snapshot off: one GET /v1/servers?name=... per call.
func BenchmarkHcloudInstanceMetadataNoSnapshot(b *testing.B) {
	benchmarkHcloudInstanceMetadata(b, "off", cloudInstances)
}

// BenchmarkHcloudInstanceMetadata5000 serves the lookup from a snapshot of
// 5,000 servers, and reports the shared state it takes (state-MiB).
func BenchmarkHcloudInstanceMetadata5000(b *testing.B) {
	benchmarkHcloudInstanceMetadata(b, "1h", 5000)
}

func benchmarkHcloudInstanceMetadata(b *testing.B, serverCache string, servers int) {
	ctx := context.Background()
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			e := newCloudEnvN(b, simcloud.Global{}, 0) // for its credential directory
			fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, RateLimit: 1 << 30})
			network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
			if err != nil {
				b.Fatal(err)
			}
			for i := 1; i <= servers; i++ {
				if _, err := fake.AddServer(hcloudfake.Server{Name: nodeName(i), Network: network.ID}); err != nil {
					b.Fatal(err)
				}
			}
			e.transport = handlerTransport{fake.Handler()}
			n := node(42, false)
			var call func() error
			if v.tc == "" {
				p := hcloud.New(e.nativeHost(b, hcloudEndpoint))
				if err := p.Init(ctx, clusterName, hcloudConfig(serverCache)); err != nil {
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
				cfg.ProviderConfig = hcloudConfig(serverCache)
				cfg.HTTP = egress.Config{AllowedOrigins: []string{hcloudEndpoint}, Transport: e.transport}
				cfg.Credentials = e.credentials(hcloudEndpoint)
				cfg.CallTimeout = 0 // the CCM's default: the first call lists every server
				m, err := host.New(ctx, moduleWasm(b, hcloudModule, v.tc), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close(context.Background()) })
				call = func() error { return wasmTarget{m}.instanceMetadata(ctx, n) }
			}
			start := time.Now()
			for range 3 {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			// The first call fills the snapshot: it lists every server.
			warmup := time.Since(start)
			measure(b, call)
			b.ReportMetric(float64(warmup.Milliseconds()), "warmup-ms")
			if v.tc != "" {
				b.ReportMetric(moduleGauge(b, "wasmccm_module_state_bytes", "hcloud-"+string(v.tc))/(1<<20), "state-MiB")
			}
		})
	}
}

// moduleGauge reads a gauge of the host's metrics for one module.
func moduleGauge(b *testing.B, name, module string) float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "module" && l.GetValue() == module {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	b.Fatalf("no %s for module %s", name, module)
	return 0
}
