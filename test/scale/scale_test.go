//go:build linux

// Package scale is the scale test: the real cloud controller manager
// binary against a real kube-apiserver and etcd (test/e2e/cluster) and the
// simulated cloud with a realistic latency and rate limit, N tainted Nodes
// created at once, then M LoadBalancer Services. It runs the same scenario
// with the provider as a wasm module (built with Go and with TinyGo) and
// compiled natively into the CCM (./nativeccm), and prints the figures side
// by side with their ratio to native.
//
// It runs only when WASMCCM_SCALE is set; hack/scale.sh sets it. Settings,
// all from the environment:
//
//	WASMCCM_SCALE_NODES          N Nodes (default 1000)
//	WASMCCM_SCALE_SERVICES       M LoadBalancer Services (default 200, at most 250)
//	WASMCCM_SCALE_VARIANTS       comma-separated: native, wasm-go, wasm-tinygo (default all)
//	WASMCCM_SCALE_LATENCY        cloud latency per request (default 20ms)
//	WASMCCM_SCALE_RATE           cloud rate limit, requests/s (default 100)
//	WASMCCM_SCALE_BURST          cloud rate limit burst (default 200)
//	WASMCCM_SCALE_POOL           module instance pool size (default 4)
//	WASMCCM_SCALE_NODE_SYNCS     --concurrent-node-syncs (default: upstream's, 1)
//	WASMCCM_SCALE_SERVICE_SYNCS  --concurrent-service-syncs (default: upstream's, 1)
//	WASMCCM_SCALE_QPS            --kube-api-qps (default: upstream's, 20)
//	WASMCCM_SCALE_API_BURST      --kube-api-burst (default: upstream's, 30)
//	WASMCCM_SCALE_REFRESH        1: after the Services phase, watch the CCM
//	                             keep the Nodes current for a fixed window
//	                             and measure its cloud requests (by endpoint)
//	                             and CPU (hack/scale.sh's default); else
//	                             30 s of idle only
//	WASMCCM_SCALE_STATUS_PERIOD  --node-status-update-frequency (default:
//	                             upstream's, 5m): the node controller's
//	                             status refresh runs this long after the
//	                             previous pass ended
//	WASMCCM_SCALE_REFRESH_WINDOW the refresh window (default: the status period
//	                             plus a minute for the pass itself; a shorter
//	                             window may hold no pass)
//	WASMCCM_SCALE_TIMEOUT        bound of each phase (default 20m)
//	WASMCCM_SCALE_OUT            file to write the results to, as JSON, with
//	                             the date, the command and the machine
//	WASMCCM_SCALE_TABLES         file to write the tables to as well, as
//	                             Markdown (hack/scale.sh heads them with the
//	                             command and the machine in the result file)
//	WASMCCM_SCALE_PROFILE        directory to write CPU profiles of each CCM
//	                             to, consecutive 2 s ones named
//	                             <variant>-<sequence>-<phase>.pprof after the
//	                             phase they began in, to merge with
//	                             go tool pprof (default: none)
//	WASMCCM_SCALE_MEMORY         directory to write, after the Services phase,
//	                             each CCM's heap profile (<variant>-heap.pprof),
//	                             its heap profile as text with the runtime's
//	                             MemStats (<variant>-heap.txt) and its resident
//	                             memory by kind of mapping, from
//	                             /proc/PID/smaps (<variant>-mappings.txt)
//	                             (default: none)
//	WASMCCM_SCALE_COMMAND        the command to record (hack/scale.sh sets it;
//	                             default: the equivalent go test command)
//
// The refresh window fails only on real errors: the CCM exiting or logging
// an error, or a Node deleted or no longer initialized at its end. Which
// requests keep the Nodes current is measured, not asserted: with the
// instance snapshot (modules/simcloud/snapshot.go) they are listings, not
// one lookup per Node.
package scale

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
	"github.com/wasmccm/wasmccm/test/scale/ccmproc"
)

const (
	cloudToken  = "scale-token"
	clusterName = "scale"
	taintKey    = "node.cloudprovider.kubernetes.io/uninitialized"
)

// binaries are the CCMs under test and the wasmccm tool, built by TestMain.
var binaries struct{ wasm, native, cli string }

func TestMain(m *testing.M) {
	scale, requests := os.Getenv("WASMCCM_SCALE") != "", os.Getenv("WASMCCM_REQUESTS") != ""
	if !scale && !requests {
		os.Exit(m.Run()) // TestScale and TestRequests skip
	}
	dir, err := os.MkdirTemp("", "wasmccm-scale-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binaries.wasm = filepath.Join(dir, "wasm-cloud-controller-manager")
	binaries.native = filepath.Join(dir, "nativeccm")
	binaries.cli = filepath.Join(dir, "wasmccm")
	builds := map[string]string{binaries.wasm: "../../cmd/wasm-cloud-controller-manager"}
	if scale {
		builds[binaries.native], builds[binaries.cli] = "./nativeccm", "../../cmd/wasmccm"
	}
	for out, pkg := range builds {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, b)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// settings is the scenario, read from the environment.
type settings struct {
	Nodes, Services int
	Variants        []string
	Latency         time.Duration
	Rate            float64
	RateBurst       int
	PoolSize        int
	NodeSyncs       int
	ServiceSyncs    int
	QPS             float64
	APIBurst        int
	StatusPeriod    time.Duration
	Refresh         bool
	RefreshWindow   time.Duration
	Timeout         time.Duration
}

func loadSettings(t *testing.T) settings {
	s := settings{
		Nodes: envInt(t, "WASMCCM_SCALE_NODES", 1000), Services: envInt(t, "WASMCCM_SCALE_SERVICES", 200),
		Variants:  strings.Split(envString("WASMCCM_SCALE_VARIANTS", "native,wasm-go,wasm-tinygo"), ","),
		Latency:   envDuration(t, "WASMCCM_SCALE_LATENCY", 20*time.Millisecond),
		Rate:      float64(envInt(t, "WASMCCM_SCALE_RATE", 100)),
		RateBurst: envInt(t, "WASMCCM_SCALE_BURST", 200),
		PoolSize:  envInt(t, "WASMCCM_SCALE_POOL", 4),
		NodeSyncs: envInt(t, "WASMCCM_SCALE_NODE_SYNCS", 0), ServiceSyncs: envInt(t, "WASMCCM_SCALE_SERVICE_SYNCS", 0),
		QPS: float64(envInt(t, "WASMCCM_SCALE_QPS", 0)), APIBurst: envInt(t, "WASMCCM_SCALE_API_BURST", 0),
		StatusPeriod: envDuration(t, "WASMCCM_SCALE_STATUS_PERIOD", 0),
		Refresh:      os.Getenv("WASMCCM_SCALE_REFRESH") == "1",
		Timeout:      envDuration(t, "WASMCCM_SCALE_TIMEOUT", 20*time.Minute),
	}
	const upstreamStatusPeriod = 5 * time.Minute
	s.RefreshWindow = envDuration(t, "WASMCCM_SCALE_REFRESH_WINDOW", cmp.Or(s.StatusPeriod, upstreamStatusPeriod)+time.Minute)
	// The test cluster's Service range is a /24; the "kubernetes" Service
	// takes one address.
	if s.Services > 250 {
		t.Fatalf("WASMCCM_SCALE_SERVICES=%d: the test cluster's Service range holds at most 250", s.Services)
	}
	return s
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a non-negative integer", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// flags are the CCM flags of the scenario besides the per-run ones.
func (s settings) flags() []string {
	f := []string{
		"--cluster-name=" + clusterName,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--configure-cloud-routes=false",
		"--allocate-node-cidrs=false",
		"--bind-address=127.0.0.1",
		"--v=1",
	}
	if s.NodeSyncs > 0 {
		f = append(f, fmt.Sprintf("--concurrent-node-syncs=%d", s.NodeSyncs))
	}
	if s.ServiceSyncs > 0 {
		f = append(f, fmt.Sprintf("--concurrent-service-syncs=%d", s.ServiceSyncs))
	}
	if s.QPS > 0 {
		f = append(f, fmt.Sprintf("--kube-api-qps=%g", s.QPS))
	}
	if s.APIBurst > 0 {
		f = append(f, fmt.Sprintf("--kube-api-burst=%d", s.APIBurst))
	}
	if s.StatusPeriod > 0 {
		f = append(f, "--node-status-update-frequency="+s.StatusPeriod.String())
	}
	return f
}

// phase is what one phase of the scenario measured.
type phase struct {
	// Done is when the last object got there, from the phase's start.
	Done time.Duration
	// P50 and P99 are per object, from its creation.
	P50, P99 time.Duration
	// CloudRequests counts the /v1 requests of the phase per endpoint;
	// RateLimited those answered 429.
	CloudRequests map[string]int
	RateLimited   int
	// CPU is the CCM's user+system CPU time during the phase.
	CPU time.Duration
	// RSS is the CCM's resident set at the end of the phase, in bytes.
	RSS int64
}

func (p phase) requests() int {
	n := 0
	for _, c := range p.CloudRequests {
		n += c
	}
	return n
}

// result is one variant's run.
type result struct {
	Variant  string
	Flags    []string
	Startup  time.Duration // process start to /healthz OK
	StartCPU time.Duration // CPU time until then
	StartRSS int64
	Nodes    phase
	Services phase
	// IdlePerMinute is the CPU time per minute of the 30 s after the
	// Services phase; zero when Refresh is measured instead.
	IdlePerMinute time.Duration
	// Refresh is the fixed window after the Services phase (Done is its
	// length); nil unless WASMCCM_SCALE_REFRESH=1.
	Refresh *phase
	// PeakRSS (VmHWM) and TotalCPU over the whole run, in bytes and time.
	PeakRSS  int64
	TotalCPU time.Duration
}

func TestScale(t *testing.T) {
	if os.Getenv("WASMCCM_SCALE") == "" {
		t.Skip("set WASMCCM_SCALE=1 (or run hack/scale.sh) to run the scale test")
	}
	s := loadSettings(t)
	m := currentProvenance()
	t.Logf("scenario: %+v", s)
	var results []*result
	for _, v := range s.Variants {
		if !t.Run(v, func(t *testing.T) { results = append(results, run(t, s, v)) }) {
			break
		}
	}
	t.Logf("run: %+v", m)
	tables := io.Writer(os.Stdout)
	if path := os.Getenv("WASMCCM_SCALE_TABLES"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tables = io.MultiWriter(os.Stdout, f)
	}
	report(tables, s, results)
	if out := os.Getenv("WASMCCM_SCALE_OUT"); out != "" {
		b, _ := json.MarshalIndent(map[string]any{"provenance": m, "settings": s, "results": results}, "", "  ")
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// run runs the scenario with one variant on a fresh cluster and cloud.
func run(t *testing.T, s settings, variant string) *result {
	c := cluster.StartForTest(t)
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = 5000, 10000 // the test's own client must not be the bottleneck
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	cloud := simcloud.New(simcloud.Options{Token: cloudToken,
		Global: simcloud.Global{Latency: s.Latency, RateLimit: s.Rate, Burst: s.RateBurst}})
	zones := []string{"sim-1a", "sim-1b", "sim-1c"}
	for i := 1; i <= s.Nodes; i++ {
		if _, err := cloud.AddInstance(simcloud.Instance{Name: nodeName(i), Zone: zones[i%3], Type: "sim.medium"}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "credentials", "token")
	os.MkdirAll(filepath.Dir(tokenPath), 0o755)
	os.WriteFile(tokenPath, []byte(cloudToken+"\n"), 0o600)

	binary, provider, configText := cloudConfig(t, s, variant, dir, srv.URL, tokenPath)
	configPath := filepath.Join(dir, "cloud-config.yaml")
	os.WriteFile(configPath, []byte(configText), 0o644)
	flags := append([]string{
		"--cloud-provider=" + provider,
		"--cloud-config=" + configPath,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}, s.flags()...)
	r := &result{Variant: variant, Flags: s.flags()}

	// Watch Nodes and Services before anything is created.
	w := newWatcher(t, client)

	ccm := ccmproc.Start(t, binary, dir, flags, nil)
	r.Startup = ccm.Startup
	st := ccm.Stat()
	r.StartCPU, r.StartRSS = st.CPU, st.RSS
	t.Logf("%s: CCM healthy after %s", variant, r.Startup)
	prof := startProfiler(t, os.Getenv("WASMCCM_SCALE_PROFILE"), variant, ccm, c.Config.BearerToken)

	// Phase 1: N tainted Nodes at once.
	before, cpu0 := cloud.Counters(), st.CPU
	start := time.Now()
	created := createAll(t, s.Nodes, func(i int) error { return createNode(client, i) })
	t.Logf("%s: %d Nodes created in %s", variant, s.Nodes, time.Since(start).Round(time.Millisecond))
	done := w.waitNodes(t, s.Nodes, s.Timeout)
	r.Nodes = w.phase(start, created, done, cloud, before, ccm, cpu0, t)
	t.Logf("%s: %d Nodes initialized in %s (%d cloud requests, %d throttled)", variant, s.Nodes,
		r.Nodes.Done.Round(time.Millisecond), r.Nodes.requests(), r.Nodes.RateLimited)

	// Phase 2: M LoadBalancer Services at once.
	prof.enter("services")
	before, cpu0 = cloud.Counters(), ccm.Stat().CPU
	start = time.Now()
	created = createAll(t, s.Services, func(i int) error { return createService(client, i) })
	done = w.waitServices(t, s.Services, s.Timeout)
	r.Services = w.phase(start, created, done, cloud, before, ccm, cpu0, t)
	t.Logf("%s: %d Services have an ingress IP after %s (%d cloud requests, %d throttled)", variant, s.Services,
		r.Services.Done.Round(time.Millisecond), r.Services.requests(), r.Services.RateLimited)
	snapshotMemory(t, os.Getenv("WASMCCM_SCALE_MEMORY"), variant, ccm, c.Config.BearerToken)

	// Phase 3: keeping the Nodes current over a fixed window, or idle.
	if s.Refresh {
		prof.enter("refresh")
		r.Refresh = watchRefresh(t, s, client, cloud, ccm)
		t.Logf("%s: kept %d Nodes current for %s: cloud requests %v, CCM CPU %s", variant, s.Nodes,
			s.RefreshWindow, r.Refresh.CloudRequests, r.Refresh.CPU.Round(time.Millisecond))
	} else {
		prof.enter("idle")
		idleStart, idleCPU := time.Now(), ccm.Stat().CPU
		time.Sleep(30 * time.Second)
		r.IdlePerMinute = perMinute(ccm.Stat().CPU-idleCPU, time.Since(idleStart))
	}

	prof.finish()
	final := ccm.Stop()
	r.PeakRSS, r.TotalCPU = final.HWM, final.CPU
	return r
}

// snapshotMemory writes where ccm's memory is into dir (WASMCCM_SCALE_MEMORY),
// when dir is set. A failed fetch is logged, not fatal: the figures are
// for a breakdown, not the run's result.
func snapshotMemory(t *testing.T, dir, variant string, ccm *ccmproc.Process, token string) {
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The mappings first: the collection the heap profile asks for
	// returns memory to the kernel.
	var b strings.Builder
	mappings := ccmproc.Mappings(ccm.Cmd.Process.Pid)
	for _, kind := range slices.Sorted(maps.Keys(mappings)) {
		fmt.Fprintf(&b, "%s\t%.1f MiB\n", kind, float64(mappings[kind])/(1<<20))
	}
	files := map[string][]byte{variant + "-mappings.txt": []byte(b.String())}
	for debug, name := range []string{variant + "-heap.pprof", variant + "-heap.txt"} {
		profile, err := ccm.HeapProfile(context.Background(), debug, token)
		if err != nil {
			t.Logf("%s: no heap profile: %v", variant, err)
			continue
		}
		files[name] = profile
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// profiler fetches consecutive CPU profiles of a CCM while it runs, each
// named after the phase it began in. A nil profiler does nothing.
type profiler struct {
	phase atomic.Pointer[string]
	stop  chan struct{}
	done  chan struct{}
}

const profileChunk = 2 * time.Second

// startProfiler profiles ccm into dir from the Nodes phase on, until
// finish; it returns nil if dir is "". A failed fetch is logged and ends
// the profiling, not the run.
func startProfiler(t *testing.T, dir, variant string, ccm *ccmproc.Process, token string) *profiler {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &profiler{stop: make(chan struct{}), done: make(chan struct{})}
	p.enter("nodes")
	go func() {
		defer close(p.done)
		for seq := 1; ; seq++ {
			select {
			case <-p.stop:
				return
			default:
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%03d-%s.pprof", variant, seq, *p.phase.Load()))
			b, err := ccm.CPUProfile(context.Background(), profileChunk, token)
			if err == nil {
				err = os.WriteFile(path, b, 0o644)
			}
			if err != nil {
				t.Logf("%s: profiling stopped: %v", variant, err)
				return
			}
		}
	}()
	return p
}

// enter names the phase that the next profiles begin in.
func (p *profiler) enter(phase string) {
	if p != nil {
		p.phase.Store(&phase)
	}
}

// finish waits for the profile being taken, so that it is complete, and
// takes no more.
func (p *profiler) finish() {
	if p != nil {
		close(p.stop)
		<-p.done
	}
}

func perMinute(cpu, wall time.Duration) time.Duration {
	if wall <= 0 {
		return 0
	}
	return time.Duration(float64(cpu) / wall.Minutes())
}

// cloudConfig returns the binary, --cloud-provider and --cloud-config of a
// variant.
func cloudConfig(t *testing.T, s settings, variant, dir, cloudURL, tokenPath string) (binary, provider, config string) {
	switch variant {
	case "native":
		return binaries.native, "simcloud-native", fmt.Sprintf("clusterName: %s\nendpoint: %q\ntokenFile: %s\n", clusterName, cloudURL, tokenPath)
	case "wasm-go", "wasm-tinygo":
		tc := wasmbuild.Toolchain(strings.TrimPrefix(variant, "wasm-"))
		path, err := wasmbuild.Build("../../modules/simcloud/module", tc)
		if err != nil {
			t.Fatal(err)
		}
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(wasm)
		zw.Close()
		modulePath := filepath.Join(dir, "simcloud.wasm.gz")
		os.WriteFile(modulePath, gz.Bytes(), 0o644)
		cacheDir := filepath.Join(wasmbuild.CacheDir(), "compilation")
		warmCompilationCache(t, modulePath, cacheDir)
		return binaries.wasm, "wasm", fmt.Sprintf(`clusterName: %s
module:
  path: %s
  compilationCacheDir: %s
limits: {poolSize: %d, callTimeout: 30s, memoryLimitMiB: 128}
http:
  allowedOrigins: [%q]
  timeout: 10s
credentials: {dir: %s, auth: [{name: token, origins: [%q], bearer: {key: token}}]}
providerConfig: {endpoint: %q, tokenCredential: token}
`, clusterName, modulePath, cacheDir, s.PoolSize, cloudURL, filepath.Dir(tokenPath), cloudURL, cloudURL)
	}
	t.Fatalf("unknown variant %q (want native, wasm-go or wasm-tinygo)", variant)
	return
}

// warmCompilationCache compiles the module into cacheDir, so that the CCM
// starts as it does on every start but the first. A built binary does it,
// not this test: wazero files its cache under its own version, which it
// reads from the binary's build information, and a test binary has none
// ("dev"), so entries it wrote would never be found by the CCM.
func warmCompilationCache(t *testing.T, modulePath, cacheDir string) {
	dir := t.TempDir()
	config, input := filepath.Join(dir, "cloud-config.yaml"), filepath.Join(dir, "node.json")
	os.WriteFile(config, fmt.Appendf(nil, "module: {path: %s, compilationCacheDir: %s}\nproviderConfig: {endpoint: \"http://127.0.0.1:1\"}\n", modulePath, cacheDir), 0o644)
	os.WriteFile(input, []byte(`{"name": "warm-up"}`), 0o644)
	// The call itself fails (the module is granted nothing); loading the
	// module, which compiles it into the cache, comes first and must not:
	// an error from the export shows that it did not.
	out, err := exec.Command(binaries.cli, "call", "-config", config, "-input", input, modulePath, "InstanceExists").CombinedOutput()
	if err != nil && !bytes.Contains(out, []byte("wasmccm_instance_exists: ")) {
		t.Fatalf("warming the compilation cache: %v\n%s", err, out)
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// createAll creates n objects with 32 concurrent clients and returns when
// each one was created.
func createAll(t *testing.T, n int, create func(i int) error) []time.Time {
	created := make([]time.Time, n)
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := create(i + 1); err != nil {
					errs <- err
					return
				}
				created[i] = time.Now()
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return created
}

// createNode registers a Node as a kubelet with --cloud-provider=external
// does: tainted uninitialized, no provider ID, Ready.
func createNode(client kubernetes.Interface, i int) error {
	ctx := context.Background()
	name := nodeName(i)
	now := metav1.Now()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: taintKey, Value: "true", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue,
			LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"}}},
	}
	got, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	if len(got.Status.Conditions) == 0 { // status dropped on create: write it as a kubelet would
		got.Status = node.Status
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", name, err)
		}
	}
	return nil
}

func createService(client kubernetes.Interface, i int) error {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%04d", i)},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": fmt.Sprintf("app-%04d", i)},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating service %s: %w", svc.Name, err)
	}
	return nil
}

// ---- watching for the outcome ----

// watcher records when each Node got initialized and each Service got an
// ingress IP, from informers of the test's own client.
type watcher struct {
	mu       sync.Mutex
	nodes    map[string]time.Time
	services map[string]time.Time
}

func newWatcher(t *testing.T, client kubernetes.Interface) *watcher {
	w := &watcher{nodes: map[string]time.Time{}, services: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	record := func(m map[string]time.Time, key string, ok bool) {
		if !ok {
			return
		}
		w.mu.Lock()
		if _, seen := m[key]; !seen {
			m[key] = time.Now()
		}
		w.mu.Unlock()
	}
	onNode := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			record(w.nodes, n.Name, n.Spec.ProviderID != "" && !hasTaint(n))
		}
	}
	onService := func(obj any) {
		if s, ok := obj.(*v1.Service); ok {
			record(w.services, s.Name, len(s.Status.LoadBalancer.Ingress) > 0 && s.Status.LoadBalancer.Ingress[0].IP != "")
		}
	}
	factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onNode, UpdateFunc: func(_, obj any) { onNode(obj) }})
	factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onService, UpdateFunc: func(_, obj any) { onService(obj) }})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return w
}

func hasTaint(n *v1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == taintKey })
}

func (w *watcher) waitNodes(t *testing.T, n int, timeout time.Duration) map[string]time.Time {
	return w.wait(t, &w.nodes, n, timeout, "Nodes initialized")
}

func (w *watcher) waitServices(t *testing.T, n int, timeout time.Duration) map[string]time.Time {
	return w.wait(t, &w.services, n, timeout, "Services with an ingress IP")
}

func (w *watcher) wait(t *testing.T, m *map[string]time.Time, n int, timeout time.Duration, what string) map[string]time.Time {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		got := len(*m)
		if got >= n {
			out := maps.Clone(*m)
			w.mu.Unlock()
			return out
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("after %s only %d of %d %s", timeout, got, n, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// phase summarizes a phase that started at start, whose objects i+1 were
// created at created[i] and done at done[name].
func (w *watcher) phase(start time.Time, created []time.Time, done map[string]time.Time, cloud *simcloud.Cloud,
	before simcloud.Counters, ccm *ccmproc.Process, cpu0 time.Duration, t *testing.T) phase {
	var last time.Time
	var per []time.Duration
	for i, c := range created {
		name := nodeName(i + 1)
		d, ok := done[name]
		if !ok {
			d, ok = done[fmt.Sprintf("svc-%04d", i+1)]
		}
		if !ok {
			continue
		}
		if d.After(last) {
			last = d
		}
		per = append(per, max(d.Sub(c), 0))
	}
	slices.Sort(per)
	after := cloud.Counters()
	st := ccm.Stat()
	p := phase{Done: last.Sub(start), CloudRequests: diff(after.Requests, before.Requests),
		RateLimited: after.RateLimited - before.RateLimited, CPU: st.CPU - cpu0, RSS: st.RSS}
	if len(per) > 0 {
		p.P50, p.P99 = per[(len(per)-1)*50/100], per[(len(per)-1)*99/100]
	}
	return p
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// watchRefresh watches the CCM for s.RefreshWindow after the Services
// phase: the node controller's periodic status refresh calls
// InstanceMetadata for every initialized Node, and the other controllers
// resync. It returns the window as a phase, and fails t on real errors
// only: the CCM exiting or logging an error during the window, or a Node
// deleted or no longer initialized at its end.
func watchRefresh(t *testing.T, s settings, client kubernetes.Interface, cloud *simcloud.Cloud, ccm *ccmproc.Process) *phase {
	logStart := fileSize(t, ccm.LogPath)
	base, cpu0 := cloud.Counters(), ccm.Stat().CPU
	for end := time.Now().Add(s.RefreshWindow); time.Now().Before(end); {
		ccm.CheckAlive(t)
		time.Sleep(min(time.Second, time.Until(end)))
	}
	c, st := cloud.Counters(), ccm.Stat()
	p := &phase{Done: s.RefreshWindow, CloudRequests: diff(c.Requests, base.Requests),
		RateLimited: c.RateLimited - base.RateLimited, CPU: st.CPU - cpu0, RSS: st.RSS}
	if errs := logErrors(t, ccm.LogPath, logStart); len(errs) > 0 {
		t.Errorf("the CCM logged %d errors while keeping the Nodes current, the first:\n%s",
			len(errs), strings.Join(errs[:min(len(errs), 10)], "\n"))
	}
	checkNodesInitialized(t, client, s.Nodes)
	return p
}

// checkNodesInitialized fails t unless there are n Nodes, each with a
// provider ID and without the uninitialized taint.
func checkNodesInitialized(t *testing.T, client kubernetes.Interface, n int) {
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for i := range nodes.Items {
		if node := &nodes.Items[i]; node.Spec.ProviderID == "" || hasTaint(node) {
			lost = append(lost, node.Name)
		}
	}
	if len(nodes.Items) != n || len(lost) > 0 {
		t.Errorf("after the refresh window: %d Nodes of %d, %d of them no longer initialized (first: %v)",
			len(nodes.Items), n, len(lost), lost[:min(len(lost), 10)])
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// testClusterNoise marks the error the CCM's authentication logs at every
// resync because the test cluster's kube-apiserver has no front-proxy CA:
// it says nothing about the controllers under test.
const testClusterNoise = "configmap_cafile_content.go:"

// logErrors returns the error lines (klog's "E" severity) that the log at
// path holds after offset from.
func logErrors(t *testing.T, path string, from int64) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	for line := range strings.Lines(string(b[min(from, int64(len(b))):])) {
		if isKlogError(line) && !strings.Contains(line, testClusterNoise) {
			errs = append(errs, strings.TrimSuffix(line, "\n"))
		}
	}
	return errs
}

// isKlogError reports whether line is a klog header of severity error:
// "E" then the date, "E1126 08:30:33.123456 ...".
func isKlogError(line string) bool {
	if len(line) < 6 || line[0] != 'E' || line[5] != ' ' {
		return false
	}
	for _, c := range line[1:5] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
