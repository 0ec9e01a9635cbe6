package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/abi"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/modules/sdk/native"
	simprovider "github.com/wasmccm/wasmccm/modules/simcloud"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/egress"
	"github.com/wasmccm/wasmccm/runtime/host"
)

const (
	cloudToken  = "bench-token"
	endpoint    = "http://simcloud.bench"
	clusterName = "bench"
	// cloudInstances is the number of instances in the simulated cloud
	// (at least: a load balancer over more Nodes gets more).
	cloudInstances = 100
	// lbNodes is the number of Nodes passed to EnsureLoadBalancer.
	lbNodes = 50

	simcloudModule = "../../modules/simcloud/module"
	noopModule     = "testdata/noop"
)

var providerConfig = []byte(`{"endpoint": "` + endpoint + `", "tokenCredential": "token"}`)

// TestMain silences klog: the host logs every replaced instance, and the
// instantiate benchmark replaces one per iteration.
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// ---- modules ----

var (
	wasmMu    sync.Mutex
	wasmBytes = map[string][]byte{}
)

// moduleWasm builds (or takes from wasmbuild's cache) the module at pkg,
// skipping the benchmark when TinyGo is asked for and not installed.
func moduleWasm(b testing.TB, pkg string, tc wasmbuild.Toolchain) []byte {
	b.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	key := string(tc) + ":" + pkg
	if w, ok := wasmBytes[key]; ok {
		return w
	}
	path, err := wasmbuild.Build(pkg, tc)
	if errors.Is(err, wasmbuild.ErrNoTinyGo) {
		b.Skip("TinyGo variant skipped: ", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	w, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	wasmBytes[key] = w
	return w
}

// toolchains are the compilers of the wasm variants.
var toolchains = []wasmbuild.Toolchain{wasmbuild.Go, wasmbuild.TinyGo}

// ---- the simulated cloud, in-process ----

// handlerTransport answers requests by calling an http.Handler directly:
// no socket, no TLS, no connection pool.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// cloudEnv is a simulated cloud with cloudInstances instances and the
// credential directory a module reads its token from.
type cloudEnv struct {
	cloud     *simcloud.Cloud
	transport http.RoundTripper
	credDir   string
}

func newCloudEnv(b testing.TB, global simcloud.Global) *cloudEnv {
	return newCloudEnvN(b, global, cloudInstances)
}

// newCloudEnvN is newCloudEnv with n instances.
func newCloudEnvN(b testing.TB, global simcloud.Global, n int) *cloudEnv {
	b.Helper()
	cloud := simcloud.New(simcloud.Options{Token: cloudToken, Global: global})
	for i := 1; i <= n; i++ {
		_, err := cloud.AddInstance(simcloud.Instance{
			ID: fmt.Sprintf("i-%04d", i), Name: nodeName(i), Zone: "sim-1b", Region: "sim-1", Type: "sim.medium",
			Addresses: []simcloud.Address{
				{Type: simcloud.AddressInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
				{Type: simcloud.AddressExternalIP, Address: fmt.Sprintf("198.51.%d.%d", i/250, i%250+1)},
				{Type: simcloud.AddressHostname, Address: nodeName(i)},
			},
			Labels: map[string]string{"simcloud.example/pool": "default"},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(cloudToken+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	return &cloudEnv{cloud: cloud, transport: handlerTransport{cloud.Handler()}, credDir: dir}
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

// hostConfig is the host configuration of a module reaching e's cloud,
// with the defaults a deployment gets (pool of 4).
func (e *cloudEnv) hostConfig(name string) host.Config {
	return host.Config{
		Name:           name,
		ClusterName:    clusterName,
		ProviderConfig: providerConfig,
		CallTimeout:    10 * time.Second,
		HTTP:           egress.Config{AllowedOrigins: []string{endpoint}, Transport: e.transport},
		Credentials:    e.credentials(endpoint),
	}
}

// credentials bind the token to origin, as a deployment's cloud-config
// does.
func (e *cloudEnv) credentials(origin string) credentials.Config {
	return credentials.Config{Dir: e.credDir, Auth: []credentials.AuthConfig{
		{Name: "token", Origins: []string{origin}, Bearer: &credentials.BearerAuth{Key: "token"}},
	}}
}

// nativeHost is the host of a provider run natively: the token is applied
// by the host's own auth code, so that native and wasm runs do the same
// work per request.
func (e *cloudEnv) nativeHost(b testing.TB, origin string) *native.Host {
	b.Helper()
	auth, err := credentials.NewTransport("native", e.credentials(origin), e.transport)
	if err != nil {
		b.Fatal(err)
	}
	return &native.Host{Transport: auth}
}

// ---- inputs, as the controllers would pass them ----

// node is a Node as a kubelet registers it, with the labels and
// annotations a real one carries. Without a provider ID the provider
// looks the instance up by name, as it does when initializing a Node.
func node(i int, withProviderID bool) *abi.Node {
	n := &abi.Node{
		Name: nodeName(i),
		UID:  fmt.Sprintf("6f1c2d3e-0000-4000-8000-%012d", i),
		Labels: map[string]string{
			"beta.kubernetes.io/arch":          "amd64",
			"beta.kubernetes.io/os":            "linux",
			"kubernetes.io/arch":               "amd64",
			"kubernetes.io/hostname":           nodeName(i),
			"kubernetes.io/os":                 "linux",
			"node.kubernetes.io/instance-type": "sim.medium",
			"topology.kubernetes.io/region":    "sim-1",
			"topology.kubernetes.io/zone":      "sim-1b",
		},
		Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		},
		Addresses: []abi.NodeAddress{
			{Type: "InternalIP", Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
			{Type: "Hostname", Address: nodeName(i)},
		},
		PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i%256)},
	}
	if withProviderID {
		n.ProviderID = fmt.Sprintf("simcloud://i-%04d", i)
	}
	return n
}

// lbRequest is an EnsureLoadBalancer request for a one-port Service over
// lbNodes initialized Nodes.
func lbRequest() *abi.LoadBalancerRequest { return lbRequestN(lbNodes) }

// lbRequestN is lbRequest over n Nodes.
func lbRequestN(n int) *abi.LoadBalancerRequest {
	req := &abi.LoadBalancerRequest{
		ClusterName: clusterName,
		Service: abi.Service{
			Namespace: "default", Name: "web", UID: "0b9f3c52-7d1e-4a8b-9c3d-2e4f5a6b7c8d",
			Annotations:           map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`},
			Ports:                 []abi.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, NodePort: 30080}},
			ExternalTrafficPolicy: "Cluster",
			IPFamilies:            []string{"IPv4"},
		},
	}
	for i := 1; i <= n; i++ {
		req.Nodes = append(req.Nodes, *node(i, true))
	}
	return req
}

// ---- the provider, as a module or native ----

// target is the provider under test: the three operations the
// benchmarks call, wired either through runtime/host or natively.
type target interface {
	instanceMetadata(ctx context.Context, n *abi.Node) error
	instanceExists(ctx context.Context, n *abi.Node) error
	ensureLoadBalancer(ctx context.Context, req *abi.LoadBalancerRequest) error
	close()
}

type wasmTarget struct{ m *host.Module }

func (w wasmTarget) instanceMetadata(ctx context.Context, n *abi.Node) error {
	var meta abi.InstanceMetadata
	if err := w.m.Call(ctx, abi.ExportInstanceMetadata, n, &meta); err != nil {
		return err
	}
	return checkMetadata(&meta)
}

func (w wasmTarget) instanceExists(ctx context.Context, n *abi.Node) error {
	var exists abi.Bool
	if err := w.m.Call(ctx, abi.ExportInstanceExists, n, &exists); err != nil {
		return err
	}
	if !exists {
		return errors.New("InstanceExists answered false")
	}
	return nil
}

func (w wasmTarget) ensureLoadBalancer(ctx context.Context, req *abi.LoadBalancerRequest) error {
	var status abi.LoadBalancerStatus
	if err := w.m.Call(ctx, abi.ExportEnsureLoadBalancer, req, &status); err != nil {
		return err
	}
	return checkStatus(&status)
}

func (w wasmTarget) close() { w.m.Close(context.Background()) }

type nativeTarget struct{ p *simprovider.Provider }

func (n nativeTarget) instanceMetadata(ctx context.Context, node *abi.Node) error {
	meta, err := n.p.InstanceMetadata(ctx, node)
	if err != nil {
		return err
	}
	return checkMetadata(meta)
}

func (n nativeTarget) instanceExists(ctx context.Context, node *abi.Node) error {
	exists, err := n.p.InstanceExists(ctx, node)
	if err != nil {
		return err
	}
	if !exists {
		return errors.New("InstanceExists answered false")
	}
	return nil
}

func (n nativeTarget) ensureLoadBalancer(ctx context.Context, req *abi.LoadBalancerRequest) error {
	status, err := n.p.EnsureLoadBalancer(ctx, req.ClusterName, &req.Service, req.Nodes)
	if err != nil {
		return err
	}
	return checkStatus(status)
}

func (nativeTarget) close() {}

func checkMetadata(m *abi.InstanceMetadata) error {
	if m.ProviderID == "" || len(m.NodeAddresses) == 0 {
		return fmt.Errorf("incomplete metadata %+v", m)
	}
	return nil
}

func checkStatus(s *abi.LoadBalancerStatus) error {
	if len(s.Ingress) == 0 || s.Ingress[0].IP == "" {
		return fmt.Errorf("load balancer status without IP: %+v", s)
	}
	return nil
}

// variant is one way of running the provider.
type variant struct {
	name string
	tc   wasmbuild.Toolchain // "" for native
}

var variants = []variant{{"native", ""}, {"wasm-go", wasmbuild.Go}, {"wasm-tinygo", wasmbuild.TinyGo}}

// newTarget starts the provider of variant v against e's cloud. poolSize
// 0 is the host default (4).
func newTarget(b testing.TB, e *cloudEnv, v variant, poolSize int) target {
	b.Helper()
	if v.tc == "" {
		p := simprovider.New(e.nativeHost(b, endpoint))
		if err := p.Init(context.Background(), clusterName, providerConfig); err != nil {
			b.Fatal(err)
		}
		return nativeTarget{p}
	}
	cfg := e.hostConfig("simcloud-" + string(v.tc))
	cfg.PoolSize = poolSize
	m, err := host.New(context.Background(), moduleWasm(b, simcloudModule, v.tc), cfg)
	if err != nil {
		b.Fatal(err)
	}
	t := wasmTarget{m}
	b.Cleanup(t.close)
	return t
}

// ---- timing ----

// measure runs fn b.N times, timing each call, and reports the p50 and
// p99 of those times next to ns/op.
func measure(b *testing.B, fn func() error) {
	b.Helper()
	if err := measureUntilError(b, fn); err != nil {
		b.Fatal(err)
	}
}

// measureUntilError is measure, returning the first error instead of
// failing the benchmark; nothing is reported after an error.
func measureUntilError(b *testing.B, fn func() error) error {
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		err := fn()
		durs = append(durs, time.Since(start))
		if err != nil {
			return err
		}
	}
	b.StopTimer()
	reportPercentiles(b, durs)
	return nil
}

// measureParallel runs fn b.N times from callers goroutines and reports
// the throughput (calls/s) and the per-call p50 and p99, which include the
// wait for a free instance.
func measureParallel(b *testing.B, callers int, fn func() error) {
	b.Helper()
	per := make([][]time.Duration, callers)
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			durs := make([]time.Duration, 0, b.N/callers+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				err := fn()
				durs = append(durs, time.Since(t0))
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
			per[g] = durs
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	reportPercentiles(b, slices.Concat(per...))
}

func reportPercentiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	b.ReportMetric(float64(percentile(durs, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(durs, 99)), "p99-ns")
}

// percentile returns the p-th percentile (nearest rank) of durs, which it
// sorts.
func percentile(durs []time.Duration, p float64) time.Duration {
	slices.Sort(durs)
	rank := int(math.Ceil(float64(len(durs))*p/100)) - 1
	return durs[min(max(rank, 0), len(durs)-1)]
}
