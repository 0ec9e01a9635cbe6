// Package requests counts the cloud API requests a
// cloud-controller-manager makes in steady state: wasmccm with a provider
// module, or the cloud's official CCM, against a fake of the cloud's API
// (Hetzner Cloud: the hcloud module or hcloud-cloud-controller-manager
// against examples/hcloudfake; DigitalOcean: the digitalocean module or
// digitalocean-cloud-controller-manager against examples/dofake; see
// clouds.go), on a real kube-apiserver and etcd (test/e2e/cluster) with N
// Ready Nodes, on Hetzner Cloud a network with one route per Node, and
// the CCM's default controller periods (node monitor 5 s, route
// reconciliation 10 s, node status update 5 minutes, service sync at its
// default). It is the engine of test/scale's TestRequests and of
// test/e2e's TestHcloudRequests and TestDigitalOceanRequests; it is not
// a timed test.
//
// One Run: machines named node-00001... (on Hetzner Cloud servers in
// network "k8s", 10.0.0.0/16; on DigitalOcean droplets, and no routes);
// the CCM starts; N Nodes are registered as a kubelet with
// --cloud-provider=external registers them (tainted uninitialized, no
// provider ID, Ready), each with the pod CIDR a node IPAM controller gives
// it at once (a /24 of ClusterCIDR), or, with PodCIDRsOnInit, only once
// every Node is initialized; once every Node is initialized, the network
// holds a route for each and the route controller has marked every Node's
// network available (the end of the reconcile that created the last
// routes: at 5,000 Nodes its condition updates alone take minutes), and
// two route periods more have passed, the fake's counters are read, the
// window passes, and they are read again. The difference, by the fake's route pattern ("GET
// /v1/servers"), is the steady state's requests.
//
// PodCIDRsOnInit exists for large N: while Nodes with a pod CIDR wait for
// initialization, the route controller tries to route each of them at
// every reconcile, and what such a failing attempt costs differs between
// the CCMs (a request, and a module instance, in wasmccm's case). It
// changes the setup, not the steady state.
//
// Nothing in the cluster marks a Node NotReady: there is no
// kube-controller-manager, so the Ready condition written at registration
// stays as it is, and the CCM's node lifecycle controller, which asks the
// cloud only about Nodes that are not Ready, makes no request. Run checks
// at the end of the window that every Node is still Ready and initialized
// and every route still there.
package requests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/wasmccm/wasmccm/test/e2e/cluster"
	"github.com/wasmccm/wasmccm/test/scale/ccmproc"
)

// Impl names a cloud-controller-manager.
type Impl string

const (
	// Wasmccm is wasm-cloud-controller-manager with the cloud's module.
	Wasmccm Impl = "wasmccm"
	// Official is the cloud's own CCM.
	Official Impl = "official"
)

const (
	token       = "requests-token"
	clusterName = "requests"
	// ClusterCIDR holds the Nodes' pod CIDRs, a /24 each: 16,384 Nodes.
	// It is RFC 1918 space outside the network, as the API requires of a
	// route's destination.
	ClusterCIDR = "10.64.0.0/10"
	taintKey    = "node.cloudprovider.kubernetes.io/uninitialized"
	// RoutePeriod is --route-reconciliation-period's default, and
	// StatusPeriod --node-status-update-frequency's: the CCM gets neither
	// flag.
	RoutePeriod  = 10 * time.Second
	StatusPeriod = 5 * time.Minute
)

// Options describe one run.
type Options struct {
	// Cloud is the provider; Hcloud when empty.
	Cloud Cloud
	Impl  Impl
	// Binary is wasm-cloud-controller-manager for Wasmccm, the cloud's
	// official CCM for Official.
	Binary string
	// Module is the cloud's module's wasm file (Wasmccm only), and
	// CompilationCacheDir where the CCM keeps its compilation.
	Module, CompilationCacheDir string
	// Nodes is N.
	Nodes int
	// Window is how long the steady state is measured.
	Window time.Duration
	// Timeout bounds the setup: every Node initialized and routed.
	Timeout time.Duration
	// PodCIDRsOnInit gives the Nodes their pod CIDRs only once all of
	// them are initialized, instead of at registration.
	PodCIDRsOnInit bool
	// NoRoutes runs the CCM without the route controller (no pod CIDRs,
	// no network routes); always so for a cloud without routes.
	NoRoutes bool
	// Services is how many Services of type LoadBalancer are created once
	// every Node is initialized (and routed); the setup then ends when
	// each has its load balancer's address.
	Services int
	// RateLimit, in requests per hour, makes the fake refuse requests
	// beyond a token bucket of that size, refilled at that rate, with 429
	// as the real API does, and gives wasmccm the same budget in
	// http.rateLimits (rate and burst: the bucket the API keeps).
	RateLimit int
}

// Result is what one run measured.
type Result struct {
	Cloud          Cloud
	Impl           Impl
	Nodes          int
	PodCIDRsOnInit bool
	NoRoutes       bool
	Services       int
	RateLimit      int
	// Initialized is the time from the Nodes' registration until every
	// one was initialized (and routed), and LoadBalancers from the
	// Services' creation until every one had its address.
	Initialized, LoadBalancers time.Duration
	// Throttled counts the requests the fake refused with 429, and
	// NodesDeleted the Nodes that disappeared, over the whole run.
	Throttled, NodesDeleted int
	// Setup is the time from the CCM's start to the steady state, and
	// SetupRequests the requests it took, by endpoint.
	Setup         time.Duration
	SetupRequests map[string]int
	// Window is the steady state's measured wall time and Requests its
	// requests, by endpoint.
	Window   time.Duration
	Requests map[string]int
	// StatusPasses is how many periodic node status updates began in the
	// window, from the CCM's start (the first pass runs at start, the
	// next every StatusPeriod).
	StatusPasses int
	// CPU time in the window and resident set at its end, of the CCM and
	// of kube-apiserver.
	CCMCPU, APIServerCPU time.Duration
	CCMRSS, APIServerRSS int64
	// ErrorLines counts the CCM's error log lines (klog "E") in the
	// window.
	ErrorLines int
}

// PerHour is the count scaled from the window to one hour.
func (r *Result) PerHour(count int) float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(count) * float64(time.Hour) / float64(r.Window)
}

// Total is the window's requests over every endpoint.
func (r *Result) Total() int { return sum(r.Requests) }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Run runs the scenario on a fresh cluster and fake API; everything it
// starts is stopped when t ends.
func Run(t *testing.T, o Options) *Result {
	t.Helper()
	c := cluster.StartForTest(t)
	rc := rest.CopyConfig(c.Config)
	rc.QPS, rc.Burst = 5000, 10000 // the test's own client must not be the bottleneck
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	apiserver := ccmproc.FindAPIServer(c.Config.Host)

	cloud := newCloud(t, o)
	if cloud.routes == nil {
		o.NoRoutes = true
	}
	fake := cloud.fake
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	args, env := ccmArgs(t, o, cloud, dir, kubeconfig, srv.URL)
	w := newWatcher(t, client)
	ccm := ccmproc.Start(t, o.Binary, dir, args, env)
	t.Logf("%s, %d Nodes: CCM healthy after %s", o.Impl, o.Nodes, time.Since(ccm.Started).Round(time.Millisecond))

	cidrs := podCIDRs(t, o.Nodes)
	start := time.Now()
	forAll(t, o.Nodes, func(i int) error {
		if o.PodCIDRsOnInit || o.NoRoutes {
			return createNode(client, i, "")
		}
		return createNode(client, i, cidrs[i-1])
	})
	t.Logf("%s, %d Nodes: registered in %s", o.Impl, o.Nodes, time.Since(start).Round(time.Millisecond))

	// Setup: every Node initialized, a route for each.
	routes := func() int { return 0 }
	if cloud.routes != nil {
		routes = cloud.routes
	}
	wantRoutes := o.Nodes
	if o.NoRoutes {
		wantRoutes = 0
	}
	deadline, report := time.Now().Add(o.Timeout), time.Now()
	cidrsGiven := !o.PodCIDRsOnInit || o.NoRoutes
	for {
		n := w.counts()
		r := routes()
		if n.initialized == o.Nodes && r == wantRoutes && n.routed == wantRoutes {
			break
		}
		if n.initialized == o.Nodes && !cidrsGiven {
			cidrsGiven = true
			forAll(t, o.Nodes, func(i int) error { return setPodCIDR(client, i, cidrs[i-1]) })
			t.Logf("%s, %d Nodes: all initialized after %s; pod CIDRs given", o.Impl, o.Nodes, time.Since(start).Round(time.Second))
		}
		ccm.CheckAlive(t)
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d Nodes initialized (%d Ready, %d marked routed), %d routes", o.Timeout, n.initialized, o.Nodes, n.ready, n.routed, r)
		}
		if time.Since(report) >= 30*time.Second {
			report = time.Now()
			t.Logf("%s, %d Nodes: %d initialized, %d routes, %d marked routed, %d cloud requests so far", o.Impl, o.Nodes, n.initialized, r, n.routed, sum(fake.Requests()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	res := &Result{Cloud: o.Cloud, Impl: o.Impl, Nodes: o.Nodes, PodCIDRsOnInit: o.PodCIDRsOnInit, NoRoutes: o.NoRoutes, Services: o.Services,
		RateLimit: o.RateLimit, Initialized: time.Since(start)}
	t.Logf("%s, %d Nodes: initialized after %s, %d cloud requests, %d refused with 429", o.Impl, o.Nodes,
		res.Initialized.Round(time.Second), sum(fake.Requests()), fake.Throttled())
	if o.Services > 0 {
		res.LoadBalancers = createLoadBalancers(t, client, o, time.Now().Add(o.Timeout), ccm, fake)
	}
	// Two route periods more, for whatever the last reconcile started.
	time.Sleep(2 * RoutePeriod)
	res.Setup, res.SetupRequests = time.Since(ccm.Started), fake.Requests()
	t.Logf("%s, %d Nodes: steady after %s and %d cloud requests; measuring for %s", o.Impl, o.Nodes,
		res.Setup.Round(time.Second), sum(res.SetupRequests), o.Window)

	defer func() {
		res.Throttled, res.NodesDeleted = fake.Throttled(), w.deletedCount()
		if res.NodesDeleted > 0 {
			t.Errorf("%d Nodes deleted", res.NodesDeleted)
		}
		if o.Impl == Wasmccm && res.Throttled > 0 {
			t.Errorf("the fake answered %d requests 429: the CCM's rate budget let them through", res.Throttled)
		}
	}()
	if o.Window == 0 {
		return res
	}
	// The window.
	before := fake.Requests()
	ccm0, api0 := ccm.Stat(), ccmproc.ReadStat(apiserver)
	logOffset := fileSize(ccm.LogPath)
	windowStart := time.Now()
	for end := windowStart.Add(o.Window); time.Now().Before(end); {
		time.Sleep(min(time.Until(end), 30*time.Second))
		ccm.CheckAlive(t)
		t.Logf("%s, %d Nodes: %s of %s, %d requests", o.Impl, o.Nodes, time.Since(windowStart).Round(time.Second), o.Window,
			sum(diff(fake.Requests(), before)))
	}
	after := fake.Requests()
	res.Window = time.Since(windowStart)
	ccm1, api1 := ccm.Stat(), ccmproc.ReadStat(apiserver)
	res.Requests = diff(after, before)
	res.CCMCPU, res.CCMRSS = ccm1.CPU-ccm0.CPU, ccm1.RSS
	res.APIServerCPU, res.APIServerRSS = api1.CPU-api0.CPU, api1.RSS
	res.StatusPasses = passes(ccm.Started, windowStart, windowStart.Add(res.Window))
	var errorLines []string
	res.ErrorLines, errorLines = errorsSince(ccm.LogPath, logOffset)
	if len(errorLines) > 0 {
		t.Logf("%s, %d Nodes: %d error lines in the CCM's log during the window; the first:\n%s", o.Impl, o.Nodes,
			res.ErrorLines, strings.Join(errorLines, "\n"))
	}

	// Nothing changed meanwhile.
	if n := w.counts(); n.initialized != o.Nodes || n.ready != o.Nodes || n.routed != wantRoutes {
		t.Errorf("after the window: %d of %d Nodes initialized, %d Ready, %d marked routed", n.initialized, o.Nodes, n.ready, n.routed)
	}
	if r := routes(); r != wantRoutes {
		t.Errorf("after the window: %d routes for %d Nodes", r, o.Nodes)
	}
	for k, v := range res.Requests {
		if !strings.HasPrefix(k, "GET ") {
			t.Errorf("%d writes %q in steady state", v, k)
		}
	}
	return res
}

// NodeName is the i-th Node's name, and its server's.
func NodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// podCIDRs returns the first n /24s of ClusterCIDR.
func podCIDRs(t *testing.T, n int) []string {
	p := netip.MustParsePrefix(ClusterCIDR)
	if n > 1<<(24-p.Bits()) {
		t.Fatalf("%s holds %d /24s, not %d", ClusterCIDR, 1<<(24-p.Bits()), n)
	}
	b := p.Addr().As4()
	base := binary.BigEndian.Uint32(b[:])
	out := make([]string, n)
	for i := range out {
		binary.BigEndian.PutUint32(b[:], base+uint32(i)<<8)
		out[i] = netip.PrefixFrom(netip.AddrFrom4(b), 24).String()
	}
	return out
}

// ccmArgs returns the flags and extra environment of the CCM under test.
func ccmArgs(t *testing.T, o Options, cloud cloudSetup, dir, kubeconfig, cloudURL string) (args, env []string) {
	args = []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cluster-name=" + clusterName,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--configure-cloud-routes=" + strconv.FormatBool(!o.NoRoutes),
		"--allocate-node-cidrs=" + strconv.FormatBool(!o.NoRoutes),
		"--cluster-cidr=" + ClusterCIDR,
		"--bind-address=127.0.0.1",
		"--v=1",
	}
	switch o.Impl {
	case Wasmccm:
		credDir := filepath.Join(dir, "credentials")
		if err := os.MkdirAll(credDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(credDir, "token"), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Limits and everything else at their defaults.
		rateLimits := ""
		if o.RateLimit > 0 {
			rateLimits = fmt.Sprintf("\n  rateLimits: [{origin: %q, perHour: %d, burst: %d}]", cloudURL, o.RateLimit, o.RateLimit)
		}
		config := fmt.Sprintf(`clusterName: %s
module:
  path: %s
  compilationCacheDir: %s
http:
  allowedOrigins: [%q]%s
credentials:
  dir: %s
  auth:
  - {name: token, origins: [%q], bearer: {key: token}}
providerConfig: %s
`, clusterName, o.Module, o.CompilationCacheDir, cloudURL, rateLimits, credDir, cloudURL, cloud.providerConfig(cloudURL))
		path := filepath.Join(dir, "cloud-config.yaml")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		return append(args, "--cloud-provider=wasm", "--cloud-config="+path), nil
	case Official:
		flags, env := cloud.official(cloudURL)
		return append(args, flags...), env
	}
	t.Fatalf("unknown implementation %q", o.Impl)
	return nil, nil
}

// passes counts the node status passes, at start + k*StatusPeriod, that
// begin in [from, to).
func passes(start, from, to time.Time) int {
	n := 0
	for at := start; at.Before(to); at = at.Add(StatusPeriod) {
		if !at.Before(from) {
			n++
		}
	}
	return n
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

// forAll calls do for Nodes 1..n with 32 concurrent clients.
func forAll(t *testing.T, n int, do func(i int) error) {
	next := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
loop:
	for i := 1; i <= n; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break loop
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// createNode registers Node i as a kubelet with --cloud-provider=external
// does (tainted uninitialized, no provider ID, Ready), with the pod CIDR a
// node IPAM controller would have given it, if any.
func createNode(client kubernetes.Interface, i int, podCIDR string) error {
	ctx := context.Background()
	name := NodeName(i)
	now := metav1.Now()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: taintKey, Value: "true", Effect: v1.TaintEffectNoSchedule}}},
	}
	if podCIDR != "" {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	got, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	// The API server drops status on create: write it as a kubelet would,
	// again if the CCM changed the Node meanwhile.
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "KubeletReady"}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got.Status.Conditions = append(slices.DeleteFunc(got.Status.Conditions, func(c v1.NodeCondition) bool { return c.Type == v1.NodeReady }), ready)
		_, err := client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if latest, getErr := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); getErr == nil {
				got = latest
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	return nil
}

// setPodCIDR gives Node i its pod CIDR, as a node IPAM controller does.
func setPodCIDR(client kubernetes.Interface, i int, podCIDR string) error {
	patch := fmt.Appendf(nil, `{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, podCIDR, podCIDR)
	if _, err := client.CoreV1().Nodes().Patch(context.Background(), NodeName(i), types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s pod CIDR: %w", NodeName(i), err)
	}
	return nil
}

// watcher follows the Nodes through an informer of the test's own client.
type watcher struct {
	mu      sync.Mutex
	nodes   map[string]nodeState
	deleted int
}

type nodeState struct{ initialized, ready, routed bool }

func newWatcher(t *testing.T, client kubernetes.Interface) *watcher {
	w := &watcher{nodes: map[string]nodeState{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	set := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		st := nodeState{initialized: n.Spec.ProviderID != "" && !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == taintKey })}
		for _, c := range n.Status.Conditions {
			switch c.Type {
			case v1.NodeReady:
				st.ready = c.Status == v1.ConditionTrue
			case v1.NodeNetworkUnavailable:
				st.routed = c.Status == v1.ConditionFalse
			}
		}
		w.mu.Lock()
		w.nodes[n.Name] = st
		w.mu.Unlock()
	}
	factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: set, UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				w.mu.Lock()
				delete(w.nodes, n.Name)
				w.deleted++
				w.mu.Unlock()
			}
		},
	})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return w
}

func (w *watcher) deletedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleted
}

// createLoadBalancers creates o.Services Services of type LoadBalancer and
// waits until each has an ingress address, returning how long that took.
func createLoadBalancers(t *testing.T, client kubernetes.Interface, o Options, deadline time.Time, ccm *ccmproc.Process, fake fakeAPI) time.Duration {
	ctx := context.Background()
	start := time.Now()
	forAll(t, o.Services, func(i int) error {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%03d", i), Namespace: "default"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": fmt.Sprintf("lb-%03d", i)},
				Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
		}
		_, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	for report := time.Now(); ; time.Sleep(time.Second) {
		list, err := client.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, s := range list.Items {
			if s.Spec.Type == v1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) > 0 {
				ready++
			}
		}
		if ready == o.Services {
			took := time.Since(start)
			t.Logf("%s, %d Nodes: %d load balancers ready after %s, %d cloud requests, %d refused with 429", o.Impl, o.Nodes,
				o.Services, took.Round(time.Second), sum(fake.Requests()), fake.Throttled())
			return took
		}
		ccm.CheckAlive(t)
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d load balancers ready when the setup's time ran out", ready, o.Services)
		}
		if time.Since(report) >= time.Minute {
			report = time.Now()
			t.Logf("%s, %d Nodes: %d of %d load balancers ready after %s, %d cloud requests so far, %d refused with 429", o.Impl, o.Nodes,
				ready, o.Services, time.Since(start).Round(time.Second), sum(fake.Requests()), fake.Throttled())
		}
	}
}

// counts returns how many Nodes are initialized, Ready, and marked routed
// (NetworkUnavailable False).
func (w *watcher) counts() (n struct{ initialized, ready, routed int }) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.nodes {
		if st.initialized {
			n.initialized++
		}
		if st.ready {
			n.ready++
		}
		if st.routed {
			n.routed++
		}
	}
	return n
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// errorsSince counts klog error lines ("E" and a date) written to path
// after offset and returns the first five. The test cluster has no
// request-header CA, which every CCM's authentication complains about
// now and then: those lines are left out.
func errorsSince(path string, offset int64) (int, []string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, nil
	}
	n := 0
	var first []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 5 && line[0] == 'E' && bytes.IndexFunc(line[1:5], func(r rune) bool { return r < '0' || r > '9' }) < 0 &&
			!bytes.Contains(line, []byte("requestheader-client-ca-file")) {
			n++
			if len(first) < 5 {
				first = append(first, string(line))
			}
		}
	}
	return n, first
}

// Endpoints returns every endpoint of the results' windows, sorted.
func Endpoints(results []*Result) []string {
	set := map[string]bool{}
	for _, r := range results {
		for k := range r.Requests {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
