package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
	"github.com/wasmccm/wasmccm/runtime/provider"
)

// sharedCache is the compilation cache of the benchmarks that are not
// about compilation, so that setting up a wasm variant costs milliseconds.
var sharedCache = filepath.Join(os.TempDir(), "wasmccm-bench-compilation")

func (e *cloudEnv) cachedConfig(name string) host.Config {
	cfg := e.hostConfig(name)
	cfg.CompilationCacheDir = sharedCache
	return cfg
}

// BenchmarkCall is one export round trip through the whole provider: the
// ABI, the provider's code, the host's HTTP client and the cloud's handler
// (in-process), for the provider run natively and as Go and TinyGo
// modules.
//
//   - InstanceMetadata: a Node without provider ID, as the node controller
//     initializes it: GET /v1/instances?name=... over 100 instances.
//   - InstanceExists: a Node with a provider ID, as the lifecycle controller
//     checks it: GET /v1/instances/{id}.
//   - EnsureLoadBalancer: a one-port Service over 50 Nodes whose load
//     balancer is up to date, as the service controller re-syncs it:
//     GET /v1/loadbalancers/{name}, no write.
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	ops := []struct {
		name string
		op   func(target) func() error
	}{
		{"InstanceMetadata", func(t target) func() error {
			n := node(42, false)
			return func() error { return t.instanceMetadata(ctx, n) }
		}},
		{"InstanceExists", func(t target) func() error {
			n := node(42, true)
			return func() error { return t.instanceExists(ctx, n) }
		}},
		{"EnsureLoadBalancer", func(t target) func() error {
			req := lbRequest()
			return func() error { return t.ensureLoadBalancer(ctx, req) }
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			for _, v := range variants {
				b.Run(v.name, func(b *testing.B) {
					e := newCloudEnv(b, simcloud.Global{})
					fn := op.op(newCachedTarget(b, e, v, 0))
					for range 3 { // the first EnsureLoadBalancer creates it
						if err := fn(); err != nil {
							b.Fatal(err)
						}
					}
					measure(b, fn)
				})
			}
		})
	}
}

// BenchmarkLoadBalancerNodes is EnsureLoadBalancer as in BenchmarkCall
// (load balancer up to date, one GET) over 50, 1,000 and 5,000 Nodes,
// labels and annotations included. Every call passes the same Node list,
// as the CCM does while the cluster's Nodes stay the same, so a module is
// sent it once (abi.ExportSetLoadBalancerNodes); BenchmarkLoadBalancerCreate's
// list=new shows what a list that changes costs.
func BenchmarkLoadBalancerNodes(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{lbNodes, 1000, 5000} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, v.name), func(b *testing.B) {
				e := newCloudEnvN(b, simcloud.Global{}, n)
				t := newCachedTarget(b, e, v, 0)
				req := lbRequestN(n)
				fn := func() error { return t.ensureLoadBalancer(ctx, req) }
				// A module that cannot serve this many Nodes (its heap
				// reaching the instance memory limit, say) is a result:
				// it is logged and reported as failed=1.
				var err error
				for range 2 { // the first call creates the load balancer
					if err = fn(); err != nil {
						break
					}
				}
				if err == nil {
					err = measureUntilError(b, fn)
				}
				if err != nil {
					b.StopTimer()
					b.Logf("EnsureLoadBalancer over %d Nodes failed: %s", n, firstLines(err.Error(), 4))
					b.ReportMetric(1, "failed")
				}
			})
		}
	}
}

// BenchmarkLoadBalancerCreate is EnsureLoadBalancer as the scale test's
// Services phase calls it: a new Service over 1,000 or 5,000 Nodes (the
// test's two sizes), so a GET that finds nothing and a POST with a target
// per Node whose answer lists them all.
// The Nodes carry what the CCM sends a load balancer call (name, UID,
// provider ID, addresses; see runtime/provider's lbNodeList), shuffled:
// the CCM sorts them by name, which a cloud's instance IDs need not
// follow, so the provider sorts its targets itself. The load balancer is deleted in
// the cloud after each call, so that every call creates it. cpu-ns/op is
// the process's CPU time per call, the measure of the scale test, which a
// loaded machine disturbs less than the elapsed time.
//
// list=same passes the same Node list to every call, as the CCM does while
// the cluster's Nodes stay the same: a module is sent it once
// (abi.ExportSetLoadBalancerNodes) and the provider reads it once.
// list=new passes a copy each time, as after every change to the Nodes.
func BenchmarkLoadBalancerCreate(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 5000} {
		for _, list := range []string{"same", "new"} {
			for _, v := range variants {
				b.Run(fmt.Sprintf("nodes=%d/list=%s/%s", n, list, v.name), func(b *testing.B) {
					e := newCloudEnvN(b, simcloud.Global{}, n)
					t := newCachedTarget(b, e, v, 0)
					req := lbRequestN(n)
					for i := range req.Nodes {
						nd := &req.Nodes[i]
						nd.Labels, nd.Annotations, nd.PodCIDRs = nil, nil, nil
					}
					rand.New(rand.NewPCG(1, 2)).Shuffle(len(req.Nodes), func(i, j int) {
						req.Nodes[i], req.Nodes[j] = req.Nodes[j], req.Nodes[i]
					})
					name := ("a" + strings.ReplaceAll(req.Service.UID, "-", ""))[:32]
					cpuBefore := processCPU(b)
					measure(b, func() error {
						if list == "new" {
							req.Nodes = slices.Clone(req.Nodes)
						}
						if err := t.ensureLoadBalancer(ctx, req); err != nil {
							return err
						}
						return e.cloud.DeleteLoadBalancer(name)
					})
					b.ReportMetric(float64(processCPU(b)-cpuBefore)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// newCachedTarget is newTarget with the shared compilation cache.
func newCachedTarget(b *testing.B, e *cloudEnv, v variant, poolSize int) target {
	b.Helper()
	if v.tc == "" {
		return newTarget(b, e, v, poolSize)
	}
	cfg := e.cachedConfig("simcloud-" + string(v.tc))
	cfg.PoolSize = poolSize
	m, err := host.New(context.Background(), moduleWasm(b, simcloudModule, v.tc), cfg)
	if err != nil {
		b.Fatal(err)
	}
	t := wasmTarget{m}
	b.Cleanup(t.close)
	return t
}

// BenchmarkABI is the cost of the ABI alone: a module whose InstancesV2
// methods answer constants, called with a Node as the controllers pass it.
// It covers the pool, encoding the Node into guest memory, the export
// call, the guest SDK decoding the Node and encoding the answer, and the
// host decoding it.
func BenchmarkABI(b *testing.B) {
	ctx := context.Background()
	n := node(42, true)
	for _, export := range []struct {
		name, export string
		out          func() abi.Message
	}{
		{"InstanceExists", abi.ExportInstanceExists, func() abi.Message { return new(abi.Bool) }},
		{"InstanceMetadata", abi.ExportInstanceMetadata, func() abi.Message { return new(abi.InstanceMetadata) }},
	} {
		b.Run(export.name, func(b *testing.B) {
			for _, tc := range toolchains {
				b.Run("wasm-"+string(tc), func(b *testing.B) {
					m, err := host.New(ctx, moduleWasm(b, noopModule, tc), host.Config{Name: "noop-" + string(tc), CompilationCacheDir: sharedCache})
					if err != nil {
						b.Fatal(err)
					}
					defer m.Close(ctx)
					out := export.out()
					fn := func() error { return m.Call(ctx, export.export, n, out) }
					if err := fn(); err != nil {
						b.Fatal(err)
					}
					measure(b, fn)
				})
			}
		})
	}
}

// BenchmarkLoad is host.New for the simcloud module: compile, check the
// ABI, instantiate, run init. "cold" compiles from scratch (a first start,
// or a start without compilationCacheDir); "cached" reads the machine code
// that an earlier start left in the compilation cache directory.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"cold", "cached"} {
		for _, tc := range toolchains {
			b.Run(mode+"/"+string(tc), func(b *testing.B) {
				cfg := host.Config{Name: "load", ClusterName: clusterName, ProviderConfig: providerConfig,
					HTTP: egress.Config{AllowedOrigins: []string{endpoint}}}
				wasm := moduleWasm(b, simcloudModule, tc)
				if mode == "cached" {
					cfg.CompilationCacheDir = b.TempDir()
					m, err := host.New(ctx, wasm, cfg)
					if err != nil {
						b.Fatal(err)
					}
					m.Close(ctx)
				}
				measureEach(b, func() (func(), error) {
					m, err := host.New(ctx, wasm, cfg)
					if err != nil {
						return nil, err
					}
					return func() { m.Close(ctx) }, nil
				})
			})
		}
	}
}

// BenchmarkStartup is what the CCM does at start with a warm compilation
// cache: provider.New reads the gzipped module file, decompresses it,
// loads the compiled code from the cache, instantiates and inits.
func BenchmarkStartup(b *testing.B) {
	ctx := context.Background()
	for _, tc := range toolchains {
		b.Run(string(tc), func(b *testing.B) {
			wasm := moduleWasm(b, simcloudModule, tc)
			dir := b.TempDir()
			var gz bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
			zw.Write(wasm)
			zw.Close()
			path := filepath.Join(dir, "simcloud.wasm.gz")
			if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
			cfg := &cloudconfig.Config{
				ClusterName:    clusterName,
				Module:         cloudconfig.Module{Path: path, CompilationCacheDir: filepath.Join(dir, "cache")},
				HTTP:           cloudconfig.HTTP{AllowedOrigins: []string{endpoint}},
				ProviderConfig: providerConfig,
			}
			start := func() (func(), error) {
				c, err := provider.New(ctx, cfg)
				if err != nil {
					return nil, err
				}
				return func() { c.Close(ctx) }, nil
			}
			stop, err := start() // fills the cache
			if err != nil {
				b.Fatal(err)
			}
			stop()
			measureEach(b, start)
		})
	}
}

// measureEach times setup alone, b.N times, running the cleanup it returns
// outside the timer.
func measureEach(b *testing.B, setup func() (func(), error)) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cleanup, err := setup()
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cleanup()
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, durs)
}

// BenchmarkInstantiate is a call that finds no instance ready and gets a
// fresh one: instantiation (the guest's _initialize), the ABI version
// check, init with the provider config, then InstanceMetadata through the
// cloud. Each iteration first breaks the pool's only instance with a call
// that violates the host's request size limit (not timed), which is how a
// trap, timeout or ABI violation replaces an instance in production.
// instantiate-ns is the p50 of that call minus the p50 of the same call on
// a warm instance (steady-p50-ns).
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	for _, tc := range toolchains {
		b.Run(string(tc), func(b *testing.B) {
			e := newCloudEnv(b, simcloud.Global{})
			cfg := e.cachedConfig("instantiate")
			cfg.PoolSize = 1
			cfg.HTTP.MaxRequestBytes = 4 << 10
			m, err := host.New(ctx, moduleWasm(b, simcloudModule, tc), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(ctx)
			t := wasmTarget{m}
			good := node(42, false)
			bad := node(43, false)
			bad.Name = strings.Repeat("x", 8<<10)
			breakInstance := func() {
				err := t.instanceMetadata(ctx, bad)
				var failure *host.FailureError
				if !errors.As(err, &failure) || failure.Reason != host.ReasonABIViolation {
					b.Fatalf("breaking the instance: got %v, want an ABI violation", err)
				}
			}

			steady := make([]time.Duration, 0, 200)
			for range cap(steady) {
				start := time.Now()
				if err := t.instanceMetadata(ctx, good); err != nil {
					b.Fatal(err)
				}
				steady = append(steady, time.Since(start))
			}

			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				breakInstance()
				b.StartTimer()
				start := time.Now()
				err := t.instanceMetadata(ctx, good)
				durs = append(durs, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportPercentiles(b, durs)
			steadyP50 := percentile(steady, 50)
			b.ReportMetric(float64(steadyP50), "steady-p50-ns")
			b.ReportMetric(float64(percentile(durs, 50)-steadyP50), "instantiate-ns")
		})
	}
}

// BenchmarkFirstCall is the first InstanceMetadata call after host.New
// (cached): the first time the guest runs the provider's code paths, grows
// its heap and allocates its buffers.
func BenchmarkFirstCall(b *testing.B) {
	ctx := context.Background()
	for _, tc := range toolchains {
		b.Run(string(tc), func(b *testing.B) {
			e := newCloudEnv(b, simcloud.Global{})
			cfg := e.cachedConfig("firstcall")
			wasm := moduleWasm(b, simcloudModule, tc)
			n := node(42, false)
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m, err := host.New(ctx, wasm, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				err = wasmTarget{m}.instanceMetadata(ctx, n)
				durs = append(durs, time.Since(start))
				b.StopTimer()
				m.Close(ctx)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, durs)
		})
	}
}

// BenchmarkPool is throughput with 1, 2, 4 and 8 concurrent callers of
// InstanceMetadata (a Node with a provider ID, as the periodic node status
// refresh calls it) and a pool of 4 instances: "cpu" with the cloud
// answering at once, where the machine's cores bound throughput, and
// "latency=5ms" with a cloud that takes 5 ms per request, where the pool
// size does. calls/s is the throughput; p50/p99 include waiting for a free
// instance.
func BenchmarkPool(b *testing.B) {
	ctx := context.Background()
	for _, load := range []struct {
		name    string
		latency time.Duration
	}{{"cpu", 0}, {"latency=5ms", 5 * time.Millisecond}} {
		for _, callers := range []int{1, 2, 4, 8} {
			for _, v := range variants {
				b.Run(fmt.Sprintf("%s/callers=%d/%s", load.name, callers, v.name), func(b *testing.B) {
					e := newCloudEnv(b, simcloud.Global{Latency: load.latency})
					t := newCachedTarget(b, e, v, 4)
					n := node(42, true)
					fn := func() error { return t.instanceMetadata(ctx, n) }
					warm := make(chan error, callers)
					for range callers { // instantiate the instances the callers will use
						go func() { warm <- fn() }()
					}
					for range callers {
						if err := <-warm; err != nil {
							b.Fatal(err)
						}
					}
					measureParallel(b, callers, fn)
				})
			}
		}
	}
}
