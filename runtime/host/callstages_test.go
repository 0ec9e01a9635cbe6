package host

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
)

// BenchmarkCallStages splits one InstanceMetadata call (a Node without
// provider ID, looked up by name among 100 instances) into the stages
// Module.Call goes through, for the simcloud, hcloud and aws modules built
// with each toolchain, each stage timed alone on a warm instance:
//
//   - call: Module.Call, the whole, with the share of instances recycled
//     for their memory's growth (recycles/op), which the other stages
//     leave out;
//   - host-encode: the Node encoded into the instance's input buffer;
//   - guest-context: the call's context (deadline, abort on Close) and the
//     context value host functions find the instance by;
//   - pool: taking an instance from the pool and giving it back;
//   - entry: one entry into the guest through wazero, into an export that
//     does nothing (wasmccm_abi_version); a call makes two, alloc and the
//     method, and a third when the module has wasmccm_set_deadline;
//   - alloc: the alloc export and the input copied into guest memory;
//   - method: the method export alone, with its input in place: one entry,
//     the guest decoding the Node, the provider's code with its host
//     functions (shared state reads; for aws, the request to the cloud),
//     and the guest encoding the answer;
//   - guest-decode: the same method export on the minimal guest, which
//     decodes the Node and answers a constant, so that method minus
//     guest-decode is the provider's own code;
//   - host-decode: the answer decoded from guest memory;
//   - state-get: one shared state read on the host side, without the
//     guest; simcloud and hcloud read three per call;
//   - metrics: the call's duration and outcome recorded.
//
// Run it with
//
//	go test ./runtime/host -run '^$' -bench BenchmarkCallStages -benchmem -count 5
func BenchmarkCallStages(b *testing.B) {
	ctx := context.Background()
	for _, p := range stageProviders {
		for _, tc := range toolchains(b) {
			b.Run(p.name+"/"+string(tc), func(b *testing.B) {
				m, node := p.start(b, tc)
				var meta abi.InstanceMetadata
				for range 3 { // fills the snapshot
					if err := m.Call(ctx, abi.ExportInstanceMetadata, node, &meta); err != nil {
						b.Fatal(err)
					}
				}
				benchStages(b, m, node, guestWasm(b, "minimal", tc))
			})
		}
	}
}

func benchStages(b *testing.B, m *Module, node *abi.Node, minimal []byte) {
	ctx := context.Background()
	export := abi.ExportInstanceMetadata
	stage := func(name string, fn func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			fn(b)
		})
	}
	stage("call", func(b *testing.B) {
		var meta abi.InstanceMetadata
		recycled := func() float64 {
			n, _ := testutil.GetCounterMetricValue(instancesRecycled.WithLabelValues(m.cfg.Name))
			return n
		}
		before := recycled()
		for b.Loop() {
			if err := m.Call(ctx, export, node, &meta); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric((recycled()-before)/float64(b.N), "recycles/op")
	})
	stage("host-encode", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = abi.Marshal(buf, node)
		}
	})
	stage("guest-context", func(b *testing.B) {
		for b.Loop() {
			callCtx, cancel := m.guestContext(ctx)
			_ = context.WithValue(callCtx, instanceKey{}, (*instance)(nil))
			cancel()
		}
	})
	stage("pool", func(b *testing.B) {
		end := time.Now() // Call's reading, which its metrics take too
		for b.Loop() {
			inst, err := m.pool.acquire(ctx, nodeListAffinity{})
			if err != nil {
				b.Fatal(err)
			}
			m.pool.release(inst, end)
		}
	})
	stage("entry", func(b *testing.B) {
		onInstance(b, m, func(ctx context.Context, inst *instance) {
			for b.Loop() {
				if err := inst.run(ctx, abi.ExportABIVersion, entryABIVersion, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	stage("alloc", func(b *testing.B) {
		input := abi.Marshal(nil, node)
		onInstance(b, m, func(ctx context.Context, inst *instance) {
			for b.Loop() {
				if err := inst.run(ctx, abi.ExportAlloc, entryAlloc, uint64(len(input)), 0); err != nil {
					b.Fatal(err)
				}
				if !inst.mem.Write(uint32(inst.stack[0]), input) {
					b.Fatal("alloc answered outside guest memory")
				}
			}
		})
	})
	stage("method", func(b *testing.B) { benchMethod(b, m, export, node) })
	stage("guest-decode", func(b *testing.B) {
		mm, err := New(ctx, minimal, Config{Name: "stages-minimal", CallTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		defer mm.Close(ctx)
		benchMethod(b, mm, export, node)
	})
	stage("host-decode", func(b *testing.B) {
		var meta abi.InstanceMetadata
		if err := m.Call(ctx, export, node, &meta); err != nil {
			b.Fatal(err)
		}
		result := abi.EncodeResult(nil, abi.Outcome{Status: abi.StatusOK}, &meta)
		for b.Loop() {
			var out abi.InstanceMetadata
			if _, err := abi.DecodeResult(result, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	stage("state-get", func(b *testing.B) {
		keys := m.state.Keys()
		if len(keys) == 0 {
			b.Skip("the module keeps no shared state")
		}
		for b.Loop() {
			if _, e := m.state.Get(ctx, nil, []byte(keys[0]), time.Hour, false); e != 0 {
				b.Fatal(e)
			}
		}
	})
	stage("metrics", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			callDuration.WithLabelValues(m.cfg.Name, export).Observe(time.Since(start).Seconds())
			callsTotal.WithLabelValues(m.cfg.Name, export, outcomeLabel(nil)).Inc()
		}
	})
}

// onInstance runs fn on an instance taken from m's pool, within one
// guest context, as a call does.
func onInstance(b *testing.B, m *Module, fn func(ctx context.Context, inst *instance)) {
	ctx, cancel := m.guestContext(context.Background())
	defer cancel()
	inst, err := m.pool.acquire(ctx, nodeListAffinity{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.pool.release(inst, time.Now())
	fn(context.WithValue(ctx, instanceKey{}, inst), inst)
}

// benchMethod times export alone, its input written once: an instance whose
// memory passes its high-water mark is replaced outside the timer, as the
// pool would.
func benchMethod(b *testing.B, m *Module, export string, in abi.Message) {
	ctx, cancel := m.guestContext(context.Background())
	defer cancel()
	inst, err := m.pool.acquire(ctx, nodeListAffinity{})
	if err != nil {
		b.Fatal(err)
	}
	var ptr, size uint32
	prepare := func() {
		input := abi.Marshal(nil, in)
		size = uint32(len(input))
		if err := inst.run(context.WithValue(ctx, instanceKey{}, inst), abi.ExportAlloc, entryAlloc, uint64(size), 0); err != nil {
			b.Fatal(err)
		}
		ptr = uint32(inst.stack[0])
		inst.mem.Write(ptr, input)
	}
	prepare()
	for b.Loop() {
		callCtx := context.WithValue(ctx, instanceKey{}, inst)
		inst.hasPending, inst.pending = false, nil
		if err := inst.run(callCtx, export, entryIndex[export], uint64(ptr), uint64(size)); err != nil {
			b.Fatal(err)
		}
		m.state.ReleaseClaims(&inst.claims)
		if uint64(inst.mem.Size()) > inst.recycleAbove {
			b.StopTimer()
			inst.close(ctx)
			if inst, err = m.newInstance(ctx); err != nil {
				b.Fatal(err)
			}
			prepare()
			b.StartTimer()
		}
	}
	m.pool.release(inst, time.Now())
}

// stageProvider is a provider module with its simulated cloud.
type stageProvider struct {
	name string
	// start starts the module and returns the Node to look up.
	start func(b *testing.B, tc wasmbuild.Toolchain) (*Module, *abi.Node)
}

const stageInstances = 100

// handlerTransport answers requests by calling an http.Handler directly,
// so that no socket or kernel time is counted.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func stageNodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// stageNode is a Node as a kubelet registers it, without provider ID.
func stageNode(name string) *abi.Node {
	return &abi.Node{
		Name: name,
		UID:  "6f1c2d3e-0000-4000-8000-000000000042",
		Labels: map[string]string{
			"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
			"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
			"node.kubernetes.io/instance-type": "sim.medium",
			"topology.kubernetes.io/region":    "sim-1", "topology.kubernetes.io/zone": "sim-1b",
		},
		Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		Addresses:   []abi.NodeAddress{{Type: "InternalIP", Address: "10.0.0.43"}, {Type: "Hostname", Address: name}},
		PodCIDRs:    []string{"10.244.42.0/24"},
	}
}

func startStageModule(b *testing.B, name string, tc wasmbuild.Toolchain, cfg Config) *Module {
	b.Helper()
	path, err := wasmbuild.Build(filepath.Join("..", "..", "modules", name, "module"), tc)
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Name = "stages-" + name + "-" + string(tc)
	cfg.ClusterName = "bench"
	cfg.CallTimeout = time.Minute
	cfg.CompilationCacheDir = filepath.Join(os.TempDir(), "wasmccm-bench-compilation")
	m, err := New(context.Background(), wasm, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(context.Background()) })
	return m
}

var stageProviders = []stageProvider{
	{name: "simcloud", start: func(b *testing.B, tc wasmbuild.Toolchain) (*Module, *abi.Node) {
		return startSimcloudModule(b, tc, stageInstances, Config{}), stageNode(stageNodeName(42))
	}},
	{name: "hcloud", start: func(b *testing.B, tc wasmbuild.Toolchain) (*Module, *abi.Node) {
		const endpoint = "http://hcloud.bench"
		fake := hcloudfake.New(hcloudfake.Options{RateLimit: 1 << 30})
		network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i <= stageInstances; i++ {
			if _, err := fake.AddServer(hcloudfake.Server{Name: stageNodeName(i), Network: network.ID}); err != nil {
				b.Fatal(err)
			}
		}
		m := startStageModule(b, "hcloud", tc, Config{
			ProviderConfig: []byte(`{"endpoint": "` + endpoint + `/v1", "tokenCredential": "", "network": "k8s"}`),
			HTTP:           egress.Config{AllowedOrigins: []string{endpoint}, Transport: handlerTransport{fake.Handler()}},
		})
		return m, stageNode(stageNodeName(42))
	}},
	{name: "aws", start: func(b *testing.B, tc wasmbuild.Toolchain) (*Module, *abi.Node) {
		const endpoint = "http://ec2.bench"
		fake := awsfake.New(awsfake.Options{})
		var node *abi.Node
		for i := 1; i <= stageInstances; i++ {
			in, err := fake.AddInstance(awsfake.Instance{Tags: map[string]string{"kubernetes.io/cluster/bench": "owned"}})
			if err != nil {
				b.Fatal(err)
			}
			if i == 42 {
				node = &abi.Node{Name: in.PrivateDNSName}
			}
		}
		dir := b.TempDir()
		for name, value := range map[string]string{"aws-id": awsfake.DefaultAccessKeyID, "aws-secret": awsfake.DefaultSecretAccessKey} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		m := startStageModule(b, "aws", tc, Config{
			ProviderConfig: []byte(`{"region": "us-east-1", "clusterID": "bench", "ec2Endpoint": "` + endpoint + `"}`),
			HTTP:           egress.Config{AllowedOrigins: []string{endpoint}, Transport: handlerTransport{fake.Handler()}},
			Credentials: credentials.Config{Dir: dir, Auth: []credentials.AuthConfig{{Name: "aws", Origins: []string{endpoint},
				SigV4: &credentials.SigV4Auth{AccessKeyIDKey: "aws-id", SecretAccessKeyKey: "aws-secret"}}}},
		})
		return m, node
	}},
}

// startSimcloudModule starts the simcloud module built with tc, with cfg,
// over a simulated cloud of n instances named as stageNodeName names them.
func startSimcloudModule(b *testing.B, tc wasmbuild.Toolchain, n int, cfg Config) *Module {
	const endpoint = "http://simcloud.bench"
	cloud := simcloud.New(simcloud.Options{})
	for i := 1; i <= n; i++ {
		if _, err := cloud.AddInstance(simcloud.Instance{
			ID: fmt.Sprintf("i-%04d", i), Name: stageNodeName(i), Zone: "sim-1b", Region: "sim-1", Type: "sim.medium",
			Addresses: []simcloud.Address{
				{Type: simcloud.AddressInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
				{Type: simcloud.AddressHostname, Address: stageNodeName(i)},
			},
			Labels: map[string]string{"simcloud.example/pool": "default"},
		}); err != nil {
			b.Fatal(err)
		}
	}
	cfg.ProviderConfig = []byte(`{"endpoint": "` + endpoint + `", "tokenCredential": ""}`)
	cfg.HTTP = egress.Config{AllowedOrigins: []string{endpoint}, Transport: handlerTransport{cloud.Handler()}}
	return startStageModule(b, "simcloud", tc, cfg)
}
