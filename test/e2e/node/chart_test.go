package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/internal/ccmimage"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
	"github.com/wasmccm/wasmccm/test/e2e/manifests"
)

const (
	chartDir    = repoRoot + "/charts/wasm-cloud-controller-manager"
	releaseName = "wasm-cloud-controller-manager"
	// chartImage is the manager image of the chart's default values.
	chartImage = "wasmccm/wasm-cloud-controller-manager:dev"
	// moduleFile is the module's file in its image, the chart's
	// module.fileName.
	moduleFile = "simcloud.wasm"
	// moduleMountPath is where the chart mounts the module's volume.
	moduleMountPath = "/etc/wasmccm/module"
)

// postRenderArg, as the test binary's first argument, makes it Helm's
// post-renderer rather than a test run (TestMain): it adds to the manager
// container what reachAPIServer adds, the API server's address given as
// the second argument.
const postRenderArg = "post-render-apiserver"

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == postRenderArg {
		if err := postRender(os.Stdin, os.Stdout, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// postRender copies the objects Helm rendered from in to out, the
// manager's Deployment changed by reachAPIServer.
func postRender(in io.Reader, out io.Writer, apiServer string) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		return err
	}
	dep := manifests.Find(objs, "Deployment", deploymentName)
	if dep == nil {
		return fmt.Errorf("the chart rendered no Deployment %s", deploymentName)
	}
	var reachErr error
	if err := manifests.Edit(dep, func(d *appsv1.Deployment) { reachErr = reachAPIServer(d, apiServer) }); err != nil {
		return err
	}
	if reachErr != nil {
		return reachErr
	}
	for _, obj := range objs {
		doc, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", doc); err != nil {
			return err
		}
	}
	return nil
}

// TestChartImageVolume installs the chart with `helm install` on two
// Nodes, as users do, with the module from an image volume
// (module.source=image): the kubelet pulls an image holding the module
// from a registry and containerd mounts it read-only into the manager's
// Pods. It then upgrades the release to a new module image, then to a
// missing one and to one without the module, and uninstalls it.
func TestChartImageVolume(t *testing.T) {
	began := time.Now()
	if testing.Short() {
		t.Skip("starts two Nodes and builds the manager image; skipped with -short")
	}
	modules := buildModules(t, "modules/simcloud/module", "test/e2e/testdata/relabel")
	layout := managerImage(t, chartImage)
	cloud, server, token, nodes := startCloud(t)
	reg := startRegistry(t)
	c := cluster.StartWithNodesForTest(t, cluster.NodeOptions{
		RepoRoot: repoRoot, Nodes: nodes, Images: []string{layout},
		Forward: []string{server.Listener.Addr().String(), reg.host},
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
	labelControlPlane(t, ctx, client)

	// Module images as ordinary single-layer images (ccmimage.SingleLayer,
	// as the manager image), in the registry; referenced by digest, as
	// users should.
	paths := modules()
	first := reg.pushModule(t, "simcloud-module:v1", paths[0])
	update := reg.pushModule(t, "simcloud-module:v2", paths[1])

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	writeValues(t, values, first.ref, server.URL, token)
	helm := func(args ...string) {
		t.Helper()
		args = append(args, "--namespace", systemNamespace, "--kubeconfig", kubeconfig)
		if args[0] != "uninstall" {
			args = append(args, "--post-renderer", self, "--post-renderer-args", postRenderArg, "--post-renderer-args", c.Config.Host)
		}
		if _, err := cluster.Helm(t, args...); err != nil {
			t.Fatal(err)
		}
	}

	// What the API holds before the install, which the uninstall must
	// restore but for the manager's Lease. (Eleven lists a poll: more than
	// client-go's default rate allows.)
	dynConfig := rest.CopyConfig(c.Config)
	dynConfig.QPS, dynConfig.Burst = 100, 100
	dyn := dynamic.NewForConfigOrDie(dynConfig)
	before, err := apiObjects(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	helm("install", releaseName, chartDir, "--values", values)
	installed := time.Now()
	t.Run("helm install: Pods Ready with the module from the image volume", func(t *testing.T) {
		pods := waitReadyPods(t, ctx, client, first.ref, nil)
		checkModuleServed(t, ctx, c, client, pods, first)
		t.Logf("Pods Ready and serving %v after helm install", time.Since(installed).Round(time.Second))
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("the Nodes are initialized", func(t *testing.T) {
		for _, n := range testNodes {
			waitFor(t, ctx, "Node "+n.Name+" initialized by "+n.instance.ProviderID(), func(ctx context.Context) (*corev1.Node, bool, error) {
				node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
				return node, err == nil && !hasTaint(node, cloudproviderapi.TaintExternalCloudProvider) && node.Spec.ProviderID == n.instance.ProviderID(), err
			})
		}
		t.Logf("Nodes initialized %v after helm install", time.Since(installed).Round(time.Second))
	})

	t.Run("helm upgrade to a new module image rolls the Pods, and the new module serves", func(t *testing.T) {
		pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podLabel})
		if err != nil {
			t.Fatal(err)
		}
		upgraded := time.Now()
		helm("upgrade", releaseName, chartDir, "--reuse-values", "--set", "module.image.reference="+update.ref)
		rolled := waitReadyPods(t, ctx, client, update.ref, podNames(pods.Items))
		checkModuleServed(t, ctx, c, client, rolled, update)
		t.Logf("Pods rolled, Ready and serving the new module %v after helm upgrade", time.Since(upgraded).Round(time.Second))
	})
	if t.Failed() {
		t.FailNow()
	}

	// A reference the registry does not have, then an image that does not
	// hold the module: the rollout replaces one Pod (maxUnavailable 1)
	// with one that cannot serve, and the other stays and serves.
	missing := reg.host + "/simcloud-module@sha256:" + strings.Repeat("0", 64)
	noModule := reg.push(t, "simcloud-module:empty", map[string]ccmimage.File{"README": {Mode: 0o444, Data: []byte("no module here\n")}})
	for _, bad := range []struct {
		name, ref string
		// want is in the message of a Warning Event on the new Pod.
		want string
	}{
		// The kubelet's, from its pull through containerd.
		{"a missing image", missing, "not found"},
		// The kubelet's: the manager exits with the error (in its log)
		// as no last-known-good is recorded yet (the rollback window,
		// 30 minutes by default, has not passed), and restarts back off.
		{"an image without the module", noModule, "Back-off restarting failed container"},
	} {
		t.Run("helm upgrade to "+bad.name+" leaves a Pod serving and an Event says why", func(t *testing.T) {
			helm("upgrade", releaseName, chartDir, "--reuse-values", "--set", "module.image.reference="+bad.ref)
			event := waitFor(t, ctx, "a Warning Event on a Pod of "+bad.ref, func(ctx context.Context) (*corev1.Event, bool, error) {
				return podWarning(ctx, client, bad.ref, bad.want)
			})
			t.Logf("Event on %s: %s %s", event.InvolvedObject.Name, event.Reason, event.Message)
			if bad.ref == noModule {
				pod, err := client.CoreV1().Pods(systemNamespace).Get(ctx, event.InvolvedObject.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				log := podLog(c, pod)
				if !strings.Contains(log, moduleMountPath+"/"+moduleFile) {
					t.Errorf("the manager's log does not name the module file it lacks:\n%s", tail(log, 10))
				}
				t.Logf("the manager's log ends with: %s", tail(log, 1))
			}
			pods, err := runningPods(ctx, client)
			if err != nil {
				t.Fatal(err)
			}
			pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return !isReady(&p) })
			if len(pods) != 1 || moduleRef(&pods[0]) != update.ref {
				t.Fatalf("Ready manager Pods %v, want one of the previous module image", podNames(pods))
			}
			waitLeader(t, ctx, c, client, "")
			testLoadBalancer(t, ctx, client, cloud, "lb-"+strings.ReplaceAll(strings.ToLower(bad.name), " ", "-"))
		})
		if t.Failed() {
			t.FailNow()
		}
	}

	t.Run("helm uninstall leaves nothing of the manager but its Lease", func(t *testing.T) {
		helm("uninstall", releaseName, "--wait")
		waitFor(t, ctx, "no manager Pod", func(ctx context.Context) (struct{}, bool, error) {
			pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podLabel})
			return struct{}{}, err == nil && len(pods.Items) == 0, err
		})
		// The ReplicaSets go after the Deployment, by the garbage
		// collector.
		want := []string{"Lease " + systemNamespace + "/" + leaseName}
		var left []string
		waitFor(t, ctx, fmt.Sprintf("only %v left of what was not there before the install", want), func(ctx context.Context) (struct{}, bool, error) {
			after, err := apiObjects(ctx, dyn)
			if err != nil {
				return struct{}{}, false, err
			}
			// The kubelets' heartbeat Leases may be younger than the
			// snapshot; they are not the manager's.
			now := slices.DeleteFunc(after, func(o string) bool {
				return slices.Contains(before, o) || strings.HasPrefix(o, "Lease "+corev1.NamespaceNodeLease+"/")
			})
			if !slices.Equal(now, left) {
				t.Logf("new since the install: %v", now)
				left = now
			}
			return struct{}{}, slices.Equal(left, want), nil
		})
		t.Logf("left after helm uninstall: %v", left)
	})
	t.Logf("suite wall time %v", time.Since(began).Round(time.Second))
}

// writeValues writes the values file of the release: the module from the
// image ref, the simulated cloud at cloudURL with token.
func writeValues(t *testing.T, path, ref, cloudURL, token string) {
	t.Helper()
	values := map[string]any{
		"module": map[string]any{"source": "image", "fileName": moduleFile, "image": map[string]any{"reference": ref}},
		"credentials": map[string]any{
			"auth":   []any{map[string]any{"name": "token", "origins": []string{cloudURL}, "bearer": map[string]any{"key": "token"}}},
			"values": map[string]any{"token": token},
		},
		"http":           map[string]any{"allowedOrigins": []string{cloudURL}},
		"providerConfig": map[string]any{"endpoint": cloudURL, "tokenCredential": "token"},
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// imageRegistry is an OCI registry on loopback, which the Nodes reach
// through their forwarded address; containerd speaks plain HTTP to a
// loopback registry.
type imageRegistry struct{ host string }

func startRegistry(t *testing.T) *imageRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return &imageRegistry{host: srv.Listener.Addr().String()}
}

// moduleImage is a module image in the registry.
type moduleImage struct {
	ref    string // by digest
	sha256 string // of the module file, as the manager names it
}

// pushModule pushes the module file at path as an image holding it at
// moduleFile.
func (r *imageRegistry) pushModule(t *testing.T, tag, path string) moduleImage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	ref := r.push(t, tag, map[string]ccmimage.File{moduleFile: {Mode: 0o444, Data: data}})
	return moduleImage{ref: ref, sha256: hex.EncodeToString(sum[:])}
}

// push pushes a single-layer image of files for the host's platform and
// returns its reference by digest.
func (r *imageRegistry) push(t *testing.T, tag string, files map[string]ccmimage.File) string {
	t.Helper()
	img, err := ccmimage.SingleLayer(ccmimage.HostPlatform(), files, ocispec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.host+"/"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.Context().Digest(digest.String()).String()
}

// waitReadyPods waits until the manager runs as one Ready Pod per Node,
// each mounting the module image ref and none named in before, and
// returns them.
func waitReadyPods(t *testing.T, ctx context.Context, client kubernetes.Interface, ref string, before []string) []corev1.Pod {
	t.Helper()
	return waitFor(t, ctx, "a Ready manager Pod of "+ref+" on each Node", func(ctx context.Context) ([]corev1.Pod, bool, error) {
		pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podLabel})
		if err != nil {
			return nil, false, err
		}
		var ready []corev1.Pod
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && isReady(&p) && moduleRef(&p) == ref && !slices.Contains(before, p.Name) {
				ready = append(ready, p)
				nodes[p.Spec.NodeName] = true
			}
		}
		return ready, len(pods.Items) == len(testNodes) && len(ready) == len(testNodes) && len(nodes) == len(testNodes), nil
	})
}

// checkModuleServed checks that each Pod loaded the module of m from its
// image volume, mounted read-only, and that one of them leads.
func checkModuleServed(t *testing.T, ctx context.Context, c *cluster.Cluster, client kubernetes.Interface, pods []corev1.Pod, m moduleImage) {
	t.Helper()
	want := fmt.Sprintf(`"provider module loaded" path=%q sha256=%q served="configured"`, moduleMountPath+"/"+moduleFile, m.sha256)
	for _, p := range pods {
		if log := podLog(c, &p); !strings.Contains(log, want) {
			t.Errorf("Pod %s has not logged %s:\n%s", p.Name, want, tail(log, 10))
		}
		opts, err := mountOptions(p.Name, moduleMountPath)
		if err != nil {
			t.Error(err)
		} else if !slices.Contains(strings.Split(opts, ","), "ro") {
			t.Errorf("Pod %s mounts %s with options %s, want it read-only", p.Name, moduleMountPath, opts)
		}
	}
	waitLeader(t, ctx, c, client, "")
}

// mountOptions returns the options of the mount at path as the manager
// process of Pod pod sees it: the process is found by the POD_NAME the
// chart sets in its environment.
func mountOptions(pod, path string) (string, error) {
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, environ := range environs {
		env, err := os.ReadFile(environ)
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "POD_NAME="+pod) {
			continue
		}
		mountinfo, err := os.ReadFile(filepath.Join(filepath.Dir(environ), "mountinfo"))
		if err != nil {
			return "", err
		}
		// ID parent major:minor root mount-point options ...
		for _, line := range strings.Split(string(mountinfo), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == path {
				return f[5], nil
			}
		}
		return "", fmt.Errorf("the manager of Pod %s has nothing mounted at %s", pod, path)
	}
	return "", fmt.Errorf("no process of Pod %s", pod)
}

// podWarning returns a Warning Event on a manager Pod mounting the module
// image ref whose message contains want.
func podWarning(ctx context.Context, client kubernetes.Interface, ref, want string) (*corev1.Event, bool, error) {
	pods, err := client.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: podLabel})
	if err != nil {
		return nil, false, err
	}
	for _, p := range pods.Items {
		if moduleRef(&p) != ref {
			continue
		}
		if event, found, err := eventContaining(ctx, client, "involvedObject.name="+p.Name+",type=Warning", want); found || err != nil {
			return event, found, err
		}
	}
	return nil, false, nil
}

// apiObjects lists the objects of the kinds the chart creates or the
// manager writes (Events aside), in every namespace, as "Kind
// namespace/name".
func apiObjects(ctx context.Context, client dynamic.Interface) ([]string, error) {
	resources := []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "apps", Version: "v1", Resource: "replicasets"},
		{Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "secrets"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	}
	var names []string
	for _, r := range resources {
		list, err := client.Resource(r).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, o := range list.Items {
			names = append(names, o.GetKind()+" "+strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
		}
	}
	slices.Sort(names)
	return names, nil
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

func isReady(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// moduleRef is the image reference of pod's module volume.
func moduleRef(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "module" && v.Image != nil {
			return v.Image.Reference
		}
	}
	return ""
}
