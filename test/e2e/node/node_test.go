// Package node_test runs the manager the way its users do: on two Nodes
// registered by real kubelets with --cloud-provider=external, installed
// as a two-replica Deployment whose Pods containerd 2 starts from the
// image `make image` builds, against the simulated cloud: from
// examples/deploy with the module in a ConfigMap (TestNode), and with
// `helm install` of the chart with the module in an image volume
// (TestChartImageVolume). It checks what only real nodes show: the
// kubelet's uninitialized taint, the kubelet's own updates of the module
// ConfigMap volume (and their delay), the image volume the kubelet pulls
// and containerd mounts, the container image, the rollouts of the chart's
// upgrades, and leader election between Pods on different Nodes.
//
// It needs root, and the containerd, runc, kubelet, kube-controller-
// manager and kube-scheduler of hack/install-node-deps.sh (package cluster
// starts them) and the Helm of hack/install-helm.sh; without them it is
// skipped, or fails under WASMCCM_E2E=1, as in CI.
package node_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ocispec "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/ccmimage"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
	"github.com/wasmccm/wasmccm/test/e2e/manifests"
)

const (
	repoRoot  = "../../.."
	deployDir = repoRoot + "/examples/deploy"

	systemNamespace = "kube-system"
	deploymentName  = "wasm-cloud-controller-manager"
	leaseName       = "cloud-controller-manager"
	moduleKey       = "simcloud.wasm.gz"
	podLabel        = "app.kubernetes.io/name=wasm-cloud-controller-manager"

	region, instanceType = "sim-1", "sim.medium"
)

// placeholderOrigin is the cloud API origin examples/deploy ships with.
const placeholderOrigin = "http://simcloud.example:8780"

// testNode is a Node and the machine the cloud knows for it.
type testNode struct {
	cluster.Node
	zone     string
	instance simcloud.Instance
}

// Two Nodes, for the Deployment's two replicas, which never share one.
// Each has a network of its own; their addresses are documentation ones.
var testNodes = []*testNode{
	{Node: cluster.Node{Name: "wasmccm-node-1", IP: "198.51.100.1"}, zone: "sim-1a"},
	{Node: cluster.Node{Name: "wasmccm-node-2", IP: "198.51.100.2"}, zone: "sim-1b"},
}

func TestNode(t *testing.T) {
	began := time.Now()
	if testing.Short() {
		t.Skip("starts two Nodes and builds the manager image; skipped with -short")
	}
	objs, err := manifests.Kustomize(deployDir)
	if err != nil {
		t.Fatal(err)
	}

	// The modules build while the image is built and the Nodes start.
	modules := buildModules(t, "modules/simcloud/module", "test/e2e/testdata/relabel")

	var image string
	edit(t, find(t, objs, "Deployment", deploymentName), func(d *appsv1.Deployment) { image = d.Spec.Template.Spec.Containers[0].Image })
	layout := managerImage(t, image)
	cloud, server, token, nodes := startCloud(t)

	c := cluster.StartWithNodesForTest(t, cluster.NodeOptions{
		RepoRoot: repoRoot, Nodes: nodes, Images: []string{layout},
		Forward: []string{server.Listener.Addr().String()},
	})
	t.Logf("control plane and kubelets up, Nodes registered: %v after the start", time.Since(began).Round(time.Second))
	client := kubernetes.NewForConfigOrDie(c.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			dumpState(t, c, client)
		}
	}()

	t.Run("kubelets register their Nodes tainted", func(t *testing.T) {
		for _, n := range testNodes {
			node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider) || node.Spec.ProviderID != "" {
				t.Errorf("Node %s: taints %v, provider ID %q; want the uninitialized taint and no provider ID", n.Name, node.Spec.Taints, node.Spec.ProviderID)
			}
		}
	})
	labelControlPlane(t, ctx, client)

	paths := modules()
	module, update := paths[0], paths[1]
	install(t, ctx, c, objs, module, server.URL, token)
	installed := time.Now()

	var first leader
	var standby string
	t.Run("one manager Pod per Node, from the image, one leads", func(t *testing.T) {
		pods := waitFor(t, ctx, "a running manager Pod on each Node", func(ctx context.Context) ([]corev1.Pod, bool, error) {
			pods, err := runningPods(ctx, client)
			return pods, len(pods) == len(testNodes) && pods[0].Spec.NodeName != pods[1].Spec.NodeName, err
		})
		first = waitLeader(t, ctx, c, client, "")
		for _, p := range pods {
			if p.Name != first.pod {
				standby = p.Name
			}
		}
		t.Logf("Pods running %v after the install; %s leads, %s stands by", time.Since(installed).Round(time.Second), first.pod, standby)
		// The container's 288Mi limit, read from its own cgroup, leaves
		// the manager 288 - 2 (reload) x (2 x (32 + 8 stack) + 8 shared
		// state) MiB as its Go soft limit.
		const want = `softLimitMiB=112 limitMiB=288 modulesMiB=176`
		waitFor(t, ctx, "every manager Pod logging "+want, func(context.Context) (struct{}, bool, error) {
			for _, p := range pods {
				if !strings.Contains(podLog(c, &p), want) {
					return struct{}{}, false, fmt.Errorf("Pod %s has not logged it: the memory budget did not find the container's limit", p.Name)
				}
			}
			return struct{}{}, true, nil
		})
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("the Nodes are initialized", func(t *testing.T) {
		for _, n := range testNodes {
			node := waitFor(t, ctx, "Node "+n.Name+" initialized", func(ctx context.Context) (*corev1.Node, bool, error) {
				node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				return node, err == nil && !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider), err
			})
			checks := []struct {
				name      string
				got, want string
			}{
				{"provider ID", node.Spec.ProviderID, n.instance.ProviderID()},
				{"zone label", node.Labels[corev1.LabelTopologyZone], n.zone},
				{"region label", node.Labels[corev1.LabelTopologyRegion], region},
				{"instance type label", node.Labels[corev1.LabelInstanceTypeStable], instanceType},
				{"InternalIP", address(node, corev1.NodeInternalIP), n.IP},
				{"Hostname", address(node, corev1.NodeHostName), n.Name},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("Node %s: %s = %q, want %q", n.Name, c.name, c.got, c.want)
				}
			}
		}
		t.Logf("Nodes initialized %v after the install", time.Since(installed).Round(time.Second))
	})

	t.Run("each Node's Pod CIDR is routed to its instance", func(t *testing.T) {
		for _, n := range testNodes {
			node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if node.Spec.PodCIDR == "" {
				t.Fatalf("Node %s has no Pod CIDR from kube-controller-manager", n.Name)
			}
			waitFor(t, ctx, "a route of "+node.Spec.PodCIDR+" to "+n.instance.ID, func(context.Context) (struct{}, bool, error) {
				return struct{}{}, slices.ContainsFunc(cloud.Routes(), func(r simcloud.Route) bool {
					return r.DestinationCIDR == node.Spec.PodCIDR && r.TargetInstance == n.instance.ID
				}), nil
			})
		}
		t.Logf("routes in service %v after the install", time.Since(installed).Round(time.Second))
	})

	t.Run("a LoadBalancer Service gets its address", func(t *testing.T) {
		testLoadBalancer(t, ctx, client, cloud, "lb-1")
	})

	t.Run("a module update through the ConfigMap is taken into service", func(t *testing.T) {
		testModuleUpdate(t, ctx, c, client, first.pod, update)
	})

	t.Run("the other replica takes over when the leader is deleted", func(t *testing.T) {
		if standby == "" {
			t.Fatal("no standby replica")
		}
		// As `kubectl drain` does: the leader's Node is cordoned first, so
		// that the Pod replacing the leader cannot start there and race the
		// standby for the Lease.
		pod, err := client.CoreV1().Pods(systemNamespace).Get(ctx, first.pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cordon := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, pod.Spec.NodeName, types.MergePatchType, cordon, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Pods(systemNamespace).Delete(ctx, first.pod, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		next := waitLeader(t, ctx, c, client, first.identity)
		if next.pod != standby {
			t.Fatalf("Pod %s leads after the deletion of %s, want the standby %s", next.pod, first.pod, standby)
		}
		t.Logf("standby %s leads %v after the deletion of %s", next.pod, time.Since(deleted).Round(time.Second), first.pod)
		// The new leader reconciles: a new Service gets its address.
		testLoadBalancer(t, ctx, client, cloud, "lb-2")
	})

	t.Run("nothing is left after the stop", func(t *testing.T) {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := c.Leftovers(); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("suite wall time %v", time.Since(began).Round(time.Second))
}

// managerImage builds the manager image as `make image` does, for the
// host's architecture (the Nodes run no other), and returns its OCI layout
// under the name image, which the Nodes' containerd import: the kubelet
// must find it there, as nothing can be pulled.
func managerImage(t *testing.T, image string) string {
	t.Helper()
	idx, err := ccmimage.Build(ccmimage.Options{RepoRoot: repoRoot, Platforms: []ocispec.Platform{ccmimage.HostPlatform()}})
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(t.TempDir(), "image")
	if err := ccmimage.WriteLayout(layout, normalizedRef(image), idx); err != nil {
		t.Fatal(err)
	}
	return layout
}

// startCloud starts the simulated cloud, which knows each Node's machine
// by the Node's name, with the kubelet's --node-ip as its address, and
// returns it, its server, its token and the Nodes to start.
func startCloud(t *testing.T) (*simcloud.Cloud, *httptest.Server, string, []cluster.Node) {
	t.Helper()
	token := rand.Text()
	cloud := simcloud.New(simcloud.Options{Token: token})
	server := httptest.NewServer(cloud.Handler())
	t.Cleanup(server.Close)
	var nodes []cluster.Node
	for _, n := range testNodes {
		var err error
		n.instance, err = cloud.AddInstance(simcloud.Instance{
			Name: n.Name, Zone: n.zone, Region: region, Type: instanceType, State: "running",
			Addresses: []simcloud.Address{{Type: "InternalIP", Address: n.IP}, {Type: "Hostname", Address: n.Name}},
		})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.Node)
	}
	return cloud, server, token, nodes
}

// labelControlPlane labels the Nodes as control-plane ones, where the
// manager runs: a label only an admin may set (a kubelet may not label
// itself with it), as kubeadm does.
func labelControlPlane(t *testing.T, ctx context.Context, client kubernetes.Interface) {
	t.Helper()
	for _, n := range testNodes {
		patch := []byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// reachAPIServer points the manager at the API server: in-cluster clients
// reach it at the "kubernetes" Service, which only kube-proxy (absent
// here) would route; these variables, which the kubelet sets from that
// Service, name the API server itself instead, as examples/deploy's README
// advises without kube-proxy.
func reachAPIServer(d *appsv1.Deployment, apiServer string) error {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(apiServer, "https://"))
	if err != nil {
		return err
	}
	ctr := &d.Spec.Template.Spec.Containers[0]
	ctr.Env = append(ctr.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port})
	return nil
}

// runningPods lists the manager's Running Pods not being deleted.
func runningPods(ctx context.Context, client kubernetes.Interface) ([]corev1.Pod, error) {
	pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podLabel})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil
	}), nil
}

// install applies the module ConfigMap and examples/deploy, changed only
// where this machine requires: the cloud's address and token, and the
// address of the API server.
func install(t *testing.T, ctx context.Context, c *cluster.Cluster, objs []*unstructured.Unstructured, module, cloudURL, token string) {
	t.Helper()
	cm, err := manifests.RenderModule(deployDir, module)
	if err != nil {
		t.Fatal(err)
	}
	edit(t, find(t, objs, "ConfigMap", "wasm-cloud-config"), func(cm *corev1.ConfigMap) {
		config := cm.Data["cloud-config.yaml"]
		// The origin is allowed, bound to the token and the endpoint.
		if strings.Count(config, placeholderOrigin) != 3 || strings.Count(config, "\n  reloadInterval: ") != 1 {
			t.Fatalf("cloud-config.yaml changed: its cloud origin or reloadInterval is not where this test expects them:\n%s", config)
		}
		config = strings.ReplaceAll(config, placeholderOrigin, cloudURL)
		// A short shadow period: the rollout tests cover the comparison,
		// this one how a real kubelet delivers the module.
		config = strings.Replace(config, "\n  reloadInterval: ", "\n  rollout: {shadow: {duration: 2s, calls: 3}}\n  reloadInterval: ", 1)
		cm.Data["cloud-config.yaml"] = config
	})
	edit(t, find(t, objs, "Secret", "wasm-provider-credentials"), func(s *corev1.Secret) {
		s.StringData["token"] = token
	})
	edit(t, find(t, objs, "Deployment", deploymentName), func(d *appsv1.Deployment) {
		if err := reachAPIServer(d, c.Config.Host); err != nil {
			t.Fatal(err)
		}
	})
	if err := manifests.Apply(ctx, c.Config, append([]*unstructured.Unstructured{cm}, objs...)...); err != nil {
		t.Fatal(err)
	}
}

// testLoadBalancer creates a LoadBalancer Service and waits until its
// address is that of a load balancer of the cloud.
func testLoadBalancer(t *testing.T, ctx context.Context, client kubernetes.Interface, cloud *simcloud.Cloud, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			Selector: map[string]string{"app": name},
		},
	}
	created := time.Now()
	if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc = waitFor(t, ctx, "Service "+name+" ingress", func(ctx context.Context) (*corev1.Service, bool, error) {
		svc, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		return svc, err == nil && len(svc.Status.LoadBalancer.Ingress) > 0, err
	})
	ip := svc.Status.LoadBalancer.Ingress[0].IP
	if !slices.ContainsFunc(cloud.LoadBalancers(), func(lb simcloud.LoadBalancer) bool { return lb.IP == ip }) {
		t.Fatalf("Service %s has ingress %s, which no load balancer of the cloud has (%+v)", name, ip, cloud.LoadBalancers())
	}
	t.Logf("Service %s: ingress %s after %v", name, ip, time.Since(created).Round(100*time.Millisecond))
}

// testModuleUpdate replaces the module in its ConfigMap through the API
// and measures the two delays to its taking effect: until the kubelet has
// swapped the file in the leader Pod's volume, and until the manager has
// put the new module in service (its ModuleReloaded Event).
func testModuleUpdate(t *testing.T, ctx context.Context, c *cluster.Cluster, client kubernetes.Interface, leader, update string) {
	cm, err := manifests.RenderModule(deployDir, update)
	if err != nil {
		t.Fatal(err)
	}
	data, ok, err := unstructured.NestedString(cm.Object, "binaryData", moduleKey)
	if err != nil || !ok {
		t.Fatalf("rendered ConfigMap has no binaryData %s: %v", moduleKey, err)
	}
	// The manager names a module by the sha256 of the file as stored.
	stored := decodeBase64(t, data)
	sum := sha256.Sum256(stored)
	digest := hex.EncodeToString(sum[:])

	pod, err := client.CoreV1().Pods(systemNamespace).Get(ctx, leader, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Where the kubelet projects the volume "module" of the Pod.
	file := filepath.Join(c.KubeletRootDir(pod.Spec.NodeName), "pods", string(pod.UID), "volumes", "kubernetes.io~configmap", "module", moduleKey)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the module volume is not where the kubelet keeps it: %v", err)
	}

	if err := manifests.Apply(ctx, c.Config, cm); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	waitFor(t, ctx, "the kubelet's update of the module volume", func(context.Context) (struct{}, bool, error) {
		got, err := os.ReadFile(file)
		return struct{}{}, err == nil && string(got) == string(stored), nil
	})
	swapped := time.Since(applied)
	event := waitFor(t, ctx, "ModuleReloaded Event naming "+digest, func(ctx context.Context) (*corev1.Event, bool, error) {
		return eventContaining(ctx, client, "involvedObject.name="+leader+",reason=ModuleReloaded", digest)
	})
	t.Logf("module update: the kubelet swapped the file %v after the ConfigMap update, in service %v after it (%s)",
		swapped.Round(100*time.Millisecond), time.Since(applied).Round(100*time.Millisecond), event.Message)
}

// leader is the manager Pod holding the Lease.
type leader struct {
	pod      string
	identity string // the Lease's holder identity
}

// waitLeader waits until the Lease has a holder other than previous and
// returns it with its Pod: the Running manager Pod whose log says it
// acquired the Lease. (The identity, "<host name>_<uuid>", names the host,
// which Pods on the host network share.)
func waitLeader(t *testing.T, ctx context.Context, c *cluster.Cluster, client kubernetes.Interface, previous string) leader {
	t.Helper()
	return waitFor(t, ctx, "a Lease holder other than "+previous, func(ctx context.Context) (leader, bool, error) {
		lease, err := client.CoordinationV1().Leases(systemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || *lease.Spec.HolderIdentity == previous {
			return leader{}, false, err
		}
		pods, err := runningPods(ctx, client)
		if err != nil {
			return leader{}, false, err
		}
		var leaders []string
		for _, pod := range pods {
			if strings.Contains(podLog(c, &pod), `"Successfully acquired lease" lock="`+systemNamespace+"/"+leaseName+`"`) {
				leaders = append(leaders, pod.Name)
			}
		}
		if len(leaders) != 1 {
			return leader{}, false, fmt.Errorf("running Pods that acquired the Lease: %v", leaders)
		}
		return leader{pod: leaders[0], identity: *lease.Spec.HolderIdentity}, true, nil
	})
}

// podLog returns the log of pod's containers, all restarts, as its
// Node's kubelet wrote it.
func podLog(c *cluster.Cluster, pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return ""
	}
	files, _ := filepath.Glob(filepath.Join(c.PodLogsDir(pod.Spec.NodeName), pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), "*", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// waitFor polls check every half second until it reports done, failing
// the test after three minutes.
func waitFor[T any](t *testing.T, ctx context.Context, what string, check func(context.Context) (T, bool, error)) T {
	t.Helper()
	var got T
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var done bool
		got, done, last = check(ctx)
		return done, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
	return got
}

// buildModules starts compiling the modules at dirs with TinyGo (a
// standard Go build of the provider does not fit in a ConfigMap even
// compressed), side by side, and returns a function that waits for their
// paths. On a loaded machine each build takes minutes of wall time, which
// the test spends building its image and starting its Nodes instead of
// waiting.
func buildModules(t *testing.T, dirs ...string) (wait func() []string) {
	type built struct {
		path string
		err  error
	}
	results := make([]chan built, len(dirs))
	for i, dir := range dirs {
		results[i] = make(chan built, 1)
		go func() {
			path, err := wasmbuild.Build(filepath.Join(repoRoot, dir), wasmbuild.TinyGo)
			results[i] <- built{path, err}
		}()
	}
	return func() []string {
		t.Helper()
		paths := make([]string, len(dirs))
		for i, result := range results {
			r := <-result
			if r.err != nil {
				t.Fatal(r.err)
			}
			paths[i] = r.path
		}
		return paths
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	obj := manifests.Find(objs, kind, name)
	if obj == nil {
		t.Fatalf("examples/deploy has no %s %s", kind, name)
	}
	return obj
}

func edit[T runtime.Object](t *testing.T, obj *unstructured.Unstructured, f func(T)) {
	t.Helper()
	if err := manifests.Edit(obj, f); err != nil {
		t.Fatal(err)
	}
}

// normalizedRef is image as containerd's CRI plugin looks it up: short
// names are docker.io's.
func normalizedRef(image string) string {
	first, _, ok := strings.Cut(image, "/")
	if !ok {
		return "docker.io/library/" + image
	}
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return image
	}
	return "docker.io/" + image
}

func hasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

func address(node *corev1.Node, typ corev1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == typ {
			return a.Address
		}
	}
	return ""
}

// dumpState logs what explains a failure: the manager's Pods, the
// Events, the Pods' logs and those of the Nodes' daemons.
func dumpState(t *testing.T, c *cluster.Cluster, client kubernetes.Interface) {
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			t.Logf("Pod %s on %q: %s %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses)
		}
	}
	events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			t.Logf("Event %s %s/%s: %s %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	if pods != nil {
		for _, p := range pods.Items {
			t.Logf("--- log of %s ---\n%s", p.Name, tail(podLog(c, &p), 30))
		}
	}
	t.Log(c.NodeLogTails())
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func decodeBase64(t *testing.T, s string) []byte {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// eventContaining returns an Event of the CCM's namespace that the field
// selector matches and whose message contains want.
func eventContaining(ctx context.Context, client kubernetes.Interface, selector, want string) (*corev1.Event, bool, error) {
	events, err := client.CoreV1().Events(systemNamespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, false, err
	}
	for i := range events.Items {
		if strings.Contains(events.Items[i].Message, want) {
			return &events.Items[i], true, nil
		}
	}
	return nil, false, nil
}
