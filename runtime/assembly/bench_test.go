package assembly

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// BenchmarkInstanceMetadata is one simcloud Node call with simcloud
// served alone (its one-module cloud-config) and routed among two modules:
// the cost of routing a call.
func BenchmarkInstanceMetadata(b *testing.B) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) *hybrid
	}{
		{"one-module", newSingle},
		{"two-modules", func(t testing.TB) *hybrid { return newHybrid(t, "simcloud://") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.open(b)
			node := h.nodes["sim-a"]
			ctx := context.Background()
			if _, err := h.instances.InstanceMetadata(ctx, node); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.instances.InstanceMetadata(ctx, node); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStart starts and closes the CCM's provider with simcloud alone,
// with simcloud twice, and with simcloud and the host's test provider (a
// larger module), the Node-serving ones answering one call so that they
// have an instance: ns/op is the start, B/op what the Go heap
// allocated for it, and rss-MiB what the process's resident memory grew
// by while it ran (guest memory included, which the Go heap does not
// count), on average after a first, untimed start has loaded what every
// start shares (the compilation cache, the runtime's own growth).
func BenchmarkStart(b *testing.B) {
	cfg, cloud := hybridConfig(b, "simcloud://")
	if _, err := cloud.AddInstance(simcloud.Instance{Name: "sim-a", Zone: "sim-1a", Region: "sim-1", State: "running"}); err != nil {
		b.Fatal(err)
	}
	sim := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sim-a", Labels: map[string]string{"cloud": "sim"}}}
	test := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "test-a"}}
	// simcloud twice: the second serves a load balancer class only.
	twice := &cloudconfig.File{Modules: []cloudconfig.Entry{cfg.Modules[0], cfg.Modules[0]}}
	twice.Modules[1].Name = "sim-lb"
	twice.Modules[1].Nodes = cloudconfig.NodeRule{}
	twice.Modules[1].LoadBalancers = cloudconfig.LoadBalancerRule{Classes: []string{"example.com/sim"}}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		start func() (cloudprovider.Interface, error)
		nodes []*v1.Node
	}{
		{"one-module", func() (cloudprovider.Interface, error) { return provider.New(ctx, &cfg.Modules[0].Config) }, []*v1.Node{sim}},
		{"simcloud-twice", func() (cloudprovider.Interface, error) { return Start(ctx, twice, nil, nil) }, []*v1.Node{sim}},
		{"simcloud-and-test-provider", func() (cloudprovider.Interface, error) { return Start(ctx, cfg, nil, nil) }, []*v1.Node{sim, test}},
	} {
		run := func(b *testing.B) float64 {
			runtime.GC()
			before := residentMiB(b)
			c, err := tc.start()
			if err != nil {
				b.Fatal(err)
			}
			instances, _ := c.InstancesV2()
			for _, n := range tc.nodes {
				if _, err := instances.InstanceExists(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
			grew := residentMiB(b) - before
			c.(interface{ Close(context.Context) error }).Close(ctx)
			return grew
		}
		b.Run(tc.name, func(b *testing.B) {
			run(b)
			b.ReportAllocs()
			var grew float64
			for b.Loop() {
				grew += run(b)
			}
			b.ReportMetric(grew/float64(b.N), "rss-MiB")
		})
	}
}

// residentMiB is the process's resident set, from /proc.
func residentMiB(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm:", err)
	}
	fields := strings.Fields(string(data))
	pages, _ := strconv.ParseFloat(fields[1], 64)
	return pages * float64(os.Getpagesize()) / (1 << 20)
}
