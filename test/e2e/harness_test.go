// Package e2e runs the real wasm-cloud-controller-manager binary against a
// real kube-apiserver and etcd (test/e2e/cluster) and the simulated cloud,
// with the first-party provider module built by standard Go and by TinyGo.
package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wasmccm/wasmccm/examples/awsfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// ccmBinary is built once per test run by TestMain, or named by
// WASMCCM_E2E_CCM when the caller built it for several runs: hack/test.sh
// runs each test of this package in a process of its own, side by side.
var ccmBinary string

func TestMain(m *testing.M) {
	if ccmBinary = os.Getenv("WASMCCM_E2E_CCM"); ccmBinary != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "wasmccm-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ccmBinary = filepath.Join(dir, "wasm-cloud-controller-manager")
	build := exec.Command("go", "build", "-o", ccmBinary, "../../cmd/wasm-cloud-controller-manager")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the CCM: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	cloudToken  = "e2e-token"
	clusterCIDR = "10.244.0.0/16"
)

// env is one cluster, one simulated cloud and one running CCM.
type env struct {
	t        *testing.T
	client   kubernetes.Interface
	cloud    *simcloud.Cloud
	cloudURL string
	dir      string
	ccm      *ccmProcess
}

// moduleToolchains lists the compilers the suite runs the module from.
func moduleToolchains(t *testing.T) []wasmbuild.Toolchain {
	tcs := []wasmbuild.Toolchain{wasmbuild.Go}
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		tcs = append(tcs, wasmbuild.TinyGo)
	} else if os.Getenv("WASMCCM_REQUIRE_TINYGO") != "" {
		t.Fatal(err)
	} else {
		t.Log("TinyGo module skipped:", err)
	}
	return tcs
}

// simcloudModule is the main package of the first-party provider module.
const simcloudModule = "../../modules/simcloud/module"

// setup starts everything; extraFlags are appended to the CCM's flags and
// editConfig may change the cloud-config before the CCM starts.
func setup(t *testing.T, tc wasmbuild.Toolchain, opts simcloud.Options, editConfig func(string) string, extraFlags ...string) *env {
	return setupModule(t, simcloudModule, tc, opts, editConfig, extraFlags...)
}

// setupModule is setup with the module built from the main package at
// pkgDir instead of the first-party one.
func setupModule(t *testing.T, pkgDir string, tc wasmbuild.Toolchain, opts simcloud.Options, editConfig func(string) string, extraFlags ...string) *env {
	opts.Token = cloudToken
	cloud := simcloud.New(opts)
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	e := startModule(t, pkgDir, tc, srv.URL, fmt.Sprintf("{endpoint: %q, tokenCredential: token}", srv.URL), editConfig, extraFlags...)
	e.cloud = cloud
	return e
}

// startModule starts a cluster and the CCM with the module built from
// pkgDir, allowed to reach cloudURL, with the given providerConfig (YAML).
func startModule(t *testing.T, pkgDir string, tc wasmbuild.Toolchain, cloudURL, providerConfig string, editConfig func(string) string, extraFlags ...string) *env {
	c := cluster.StartForTest(t)
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, client: client, cloudURL: cloudURL, dir: t.TempDir()}
	modulePath := e.mountModule(pkgDir, tc)
	kubeconfig := filepath.Join(e.dir, "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	credDir := filepath.Join(e.dir, "credentials")
	os.MkdirAll(credDir, 0o755)
	os.WriteFile(filepath.Join(credDir, "token"), []byte(cloudToken+"\n"), 0o600)
	// The AWS fake's key pair, for suites that sign with SigV4 (withSigV4).
	os.WriteFile(filepath.Join(credDir, "aws-access-key-id"), []byte(awsfake.DefaultAccessKeyID), 0o600)
	os.WriteFile(filepath.Join(credDir, "aws-secret-access-key"), []byte(awsfake.DefaultSecretAccessKey), 0o600)
	config := fmt.Sprintf(`clusterName: e2e
module:
  path: %s
  compilationCacheDir: %s
  reloadInterval: 1s
limits: {poolSize: 4, callTimeout: 10s, memoryLimitMiB: 128}
http:
  allowedOrigins: [%q]
  timeout: 5s
credentials: {dir: %s, auth: [{name: token, origins: [%q], bearer: {key: token}}]}
providerConfig: %s
`, modulePath, filepath.Join(wasmbuild.CacheDir(), "compilation"), cloudURL, credDir, cloudURL, providerConfig)
	if editConfig != nil {
		config = editConfig(config)
	}
	configPath := filepath.Join(e.dir, "cloud-config.yaml")
	os.WriteFile(configPath, []byte(config), 0o644)

	flags := append(controllerFlags(kubeconfig,
		"--cloud-provider=wasm",
		"--cloud-config="+configPath,
		"--node-status-update-frequency=5s",
		"--concurrent-service-syncs=2",
	), extraFlags...)
	e.ccm = startCCM(t, e.dir, "ccm", flags)
	return e
}

// controllerFlags are the flags of every CCM the suites start, ours or
// another, followed by its own: short periods, no leader election, routes
// on, served on loopback.
func controllerFlags(kubeconfig string, own ...string) []string {
	return append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--cluster-name=e2e",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--configure-cloud-routes=true",
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + clusterCIDR,
		"--route-reconciliation-period=2s",
		"--node-monitor-period=1s",
		"--bind-address=127.0.0.1",
		"--v=2",
	}, own...)
}

// mountModule builds the module at pkgDir and lays it out gzipped as the
// kubelet mounts a ConfigMap: the file is a symlink through "..data",
// itself a symlink to a timestamped directory.
func (e *env) mountModule(pkgDir string, tc wasmbuild.Toolchain) string {
	path, err := wasmbuild.Build(pkgDir, tc)
	if err != nil {
		e.t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(wasm)
	zw.Close()
	dir := filepath.Join(e.dir, "module")
	ts := filepath.Join(dir, "..2026_11_22_00_00_00.000000001")
	if err := os.MkdirAll(ts, 0o755); err != nil {
		e.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ts, "simcloud.wasm.gz"), gz.Bytes(), 0o644)
	os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data"))
	os.Symlink("..data/simcloud.wasm.gz", filepath.Join(dir, "simcloud.wasm.gz"))
	return filepath.Join(dir, "simcloud.wasm.gz")
}

// ccmProcess is a running CCM binary.
type ccmProcess struct {
	cmd     *exec.Cmd
	logPath string
	port    int
	done    chan struct{}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startCCM(t *testing.T, dir, name string, flags []string) *ccmProcess {
	return startCCMBinary(t, ccmBinary, dir, name, flags)
}

// startCCMBinary starts a cloud-controller-manager binary, ours or another,
// and waits for its health endpoint.
func startCCMBinary(t *testing.T, binary, dir, name string, flags []string) *ccmProcess {
	p := &ccmProcess{logPath: filepath.Join(dir, name+".log"), port: freePort(t), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(binary, append(flags, fmt.Sprintf("--secure-port=%d", p.port))...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = cluster.ChildAttrs()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log tail:\n%s", name, p.logTail(60))
		}
	})
	p.waitHealthy(t)
	return p
}

func (p *ccmProcess) waitHealthy(t *testing.T) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("CCM exited during start-up:\n%s", p.logTail(40))
		default:
		}
		if resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", p.port)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("CCM not healthy after 60s:\n%s", p.logTail(40))
}

// kill stops the process abruptly, as a crash or a node failure would.
func (p *ccmProcess) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

func (p *ccmProcess) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

func (p *ccmProcess) logTail(lines int) string {
	b, _ := os.ReadFile(p.logPath)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
}

var uninitializedTaint = v1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}

// addInstanceAndNode creates a cloud instance and the Node a kubelet with
// --cloud-provider=external would register for it: tainted uninitialized,
// without provider ID, Ready, with a pod CIDR.
func (e *env) addInstanceAndNode(name, zone, podCIDR string) simcloud.Instance {
	e.t.Helper()
	inst := e.addInstance(name, zone)
	e.registerNode(name, podCIDR)
	return inst
}

// addInstance creates a running cloud instance with addresses and labels.
func (e *env) addInstance(name, zone string) simcloud.Instance {
	e.t.Helper()
	n := len(e.cloud.Instances()) + 1
	inst, err := e.cloud.AddInstance(simcloud.Instance{
		Name: name, Zone: zone, Region: "sim-1", Type: "sim.medium", State: "running",
		Addresses: []simcloud.Address{
			{Type: "InternalIP", Address: fmt.Sprintf("10.0.0.%d", n)},
			{Type: "ExternalIP", Address: fmt.Sprintf("198.51.100.%d", n)},
			{Type: "Hostname", Address: name},
		},
		Labels: map[string]string{"simcloud.example/pool": "default", "kubernetes.io/forbidden": "x"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return inst
}

// registerNode creates the Node a kubelet with --cloud-provider=external
// registers: tainted uninitialized, without provider ID, with a pod CIDR;
// then marks it Ready.
func (e *env) registerNode(name, podCIDR string) { e.registerLabelledNode(name, podCIDR, nil) }

// registerLabelledNode is registerNode with the labels the kubelet was
// started with (--node-labels).
func (e *env) registerLabelledNode(name, podCIDR string, labels map[string]string) {
	e.t.Helper()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{uninitializedTaint}, PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
	}
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.setReady(name, v1.ConditionTrue)
}

// setReady writes the Ready condition a kubelet would report.
func (e *env) setReady(name string, status v1.ConditionStatus) {
	e.t.Helper()
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		node, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		now := metav1.Now()
		cond := v1.NodeCondition{Type: v1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "E2E"}
		replaced := false
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == v1.NodeReady {
				node.Status.Conditions[i], replaced = cond, true
			}
		}
		if !replaced {
			node.Status.Conditions = append(node.Status.Conditions, cond)
		}
		_, err = e.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if attempt > 10 {
			e.t.Fatal(err)
		}
	}
}

func hasTaint(node *v1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
