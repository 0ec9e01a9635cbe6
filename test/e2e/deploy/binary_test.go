package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/provider"
	"github.com/wasmccm/wasmccm/runtime/wasmfile"
	"github.com/wasmccm/wasmccm/test/e2e/cluster"
)

// repoRoot is the module root, relative to this package.
const repoRoot = "../../.."

// testBinary runs wasm-cloud-controller-manager with the Deployment's args,
// as the ServiceAccount, with the pod's volumes laid out from the manifests.
// The simcloud module is delivered as each source ships it by default: the
// kustomize manifests through the rendered module ConfigMap, the chart (with
// module.source=registry) by the manager pulling it from a registry
// started here, with a pull secret.
// It checks what only the whole manager exercises: the flags, loading the
// module from the cloud-config, leader election, delegated authentication
// and authorization of the secure port, and a hot reload.
func testBinary(ctx context.Context, t *testing.T, c *cluster.Cluster, admin kubernetes.Interface, sa *saClient, src source) {
	if testing.Short() {
		t.Skip("builds the manager and a module; skipped with -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wasm-cloud-controller-manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wasm-cloud-controller-manager")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	module, viaConfigMap := simcloudModule(t)
	var all []manifest
	var reg *moduleRegistry
	switch {
	case src.name == "chart":
		reg = startModuleRegistry(t)
		all = renderChart(t, gzipBytes(t, emptyModule), "module.source=registry",
			"module.registry.reference="+reg.push(ctx, t, module), "module.registry.pullSecret="+pullSecretName)
		all = append(all, reg.pullSecret(t))
	case viaConfigMap:
		// The module, as an operator delivers it: through render.sh when it
		// fits in a ConfigMap, which a TinyGo build does.
		all = src.load(t, module)
	default:
		all = src.load(t, gzipBytes(t, emptyModule))
	}
	dep := as[*appsv1.Deployment](t, all, "Deployment", deploymentName)
	files := newPodFiles(t, all, &dep.Spec.Template.Spec)
	cfg := &loadCloudConfig(t, files, dep, true).Modules[0].Config
	resolve := func(containerPath string) string {
		p, _, ok := files.resolve(containerPath)
		if !ok {
			t.Fatalf("%s is on no volume", containerPath)
		}
		return p
	}
	if reg == nil && !viaConfigMap {
		t.Logf("the module (%d bytes compressed) exceeds a ConfigMap; writing it to the volume directly", len(module))
		if err := os.WriteFile(resolve(cfg.Module.Path), module, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Inside the pod the paths are the mount paths; here, the directories
	// standing in for the volumes.
	args := dep.Spec.Template.Spec.Containers[0].Args
	cloudConfigPath := resolve(flagValue(t, args, "cloud-config"))
	hostCfg := *cfg
	for _, p := range []*string{&hostCfg.Module.Path, &hostCfg.Module.CompilationCacheDir, &hostCfg.Credentials.Dir,
		&hostCfg.Module.ImageCacheDir, &hostCfg.Module.RegistryConfig} {
		if *p != "" {
			*p = resolve(*p)
		}
	}
	// A new module is compared in shadow before it is put in service (2m
	// by default); a short period keeps the hot reload check below quick.
	// test/e2e/rollout_test.go tests the comparison itself.
	hostCfg.Module.Rollout.Shadow.Duration = cloudconfig.Duration{Duration: time.Second}
	// writeCloudConfig writes the cloud-config as the kubelet updates a
	// ConfigMap volume: a new file renamed over the old.
	writeCloudConfig := func(cfg cloudconfig.Config) {
		data, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tmp := cloudConfigPath + ".new"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cloudConfigPath); err != nil {
			t.Fatal(err)
		}
	}
	writeCloudConfig(hostCfg)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeTokenKubeconfig(t, kubeconfig, c.Config.Host, c.Config.CAData, sa.token)
	port := freePort(t)
	var runArgs []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--cloud-config="):
			a = "--cloud-config=" + cloudConfigPath
		case strings.HasPrefix(a, "--secure-port="):
			a = "--secure-port=" + strconv.Itoa(port)
		}
		runArgs = append(runArgs, a)
	}
	// In the pod all three come from the in-cluster config.
	runArgs = append(runArgs, "--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)

	// The downward API's values for the Pod's env.
	const podName = "wasm-cloud-controller-manager-e2e"
	env := map[string]string{"POD_NAME": podName, "POD_NAMESPACE": systemNamespace}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if _, ok := env[e.Name]; !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			t.Fatalf("unexpected env %s in the Deployment", e.Name)
		}
	}

	logPath := filepath.Join(dir, "manager.log")
	logs := startManager(t, bin, runArgs, env, logPath)

	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 60*time.Second, logs, func(ctx context.Context) error {
		l, err := admin.CoordinationV1().Leases(systemNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, hostname+"_") {
			return fmt.Errorf("Lease held by %q", holder)
		}
		return nil
	})

	base := "https://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The manager serves a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"/healthz without credentials (the probes)", "/healthz", "", http.StatusOK},
		// Authenticated by a TokenReview and authorised by a
		// SubjectAccessReview, both made as the ServiceAccount.
		{"/metrics as a cluster admin", "/metrics", c.Config.BearerToken, http.StatusOK},
		{"/metrics anonymously", "/metrics", "", http.StatusForbidden},
		{"/metrics with a bad token", "/metrics", "not-a-token", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			poll(ctx, t, 30*time.Second, logs, func(ctx context.Context) error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+tt.path, nil)
				if err != nil {
					return err
				}
				if tt.token != "" {
					req.Header.Set("Authorization", "Bearer "+tt.token)
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				if resp.StatusCode != tt.want {
					return fmt.Errorf("GET %s: %s, want %d: %s", tt.path, resp.Status, tt.want, body)
				}
				return nil
			})
		})
	}

	// A new module: for the ConfigMap, a new file as the kubelet writes it
	// when the ConfigMap changes (a new file renamed over the old); for the
	// registry, a new artifact and a new reference in the cloud-config. The
	// same module with a custom section added is a new file with the same
	// capabilities.
	t.Run("hot reload of a new module", func(t *testing.T) {
		if reg != nil {
			wasm, err := wasmfile.Decompress(module)
			if err != nil {
				t.Fatal(err)
			}
			next := hostCfg
			next.Module.Image = reg.push(ctx, t, withCustomSection(wasm, "v2"))
			writeCloudConfig(next)
		} else {
			modulePath := resolve(cfg.Module.Path)
			wasm, err := provider.ReadModule(cloudconfig.Module{Path: modulePath})
			if err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(filepath.Dir(modulePath), ".new")
			if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, modulePath); err != nil {
				t.Fatal(err)
			}
		}
		timeout := cfg.Module.ReloadInterval.Duration + 30*time.Second
		poll(ctx, t, timeout, logs, func(ctx context.Context) error {
			list, err := admin.CoreV1().Events(systemNamespace).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + podName,
			})
			if err != nil {
				return err
			}
			for _, e := range list.Items {
				if e.Reason == "ModuleReloaded" {
					return nil
				}
			}
			return fmt.Errorf("no ModuleReloaded Event on Pod %s among %d", podName, len(list.Items))
		})
	})

	out := logs()
	wantLogs := []string{
		"provider module loaded",
		"provider module reloaded",
		"Successfully acquired lease",
		`Started "cloud-node-controller"`,
		`Started "cloud-node-lifecycle-controller"`,
		`Started "service-lb-controller"`,
		`Started "node-route-controller"`,
	}
	if reg != nil {
		wantLogs = append(wantLogs, "provider module pulled", "provider module pulled for a changed module.image")
	}
	for _, want := range wantLogs {
		if !strings.Contains(out, want) {
			t.Errorf("the manager's log lacks %q", want)
		}
	}
	if strings.Contains(out, "is forbidden: User") {
		t.Errorf("the manager was refused by RBAC:\n%s", grepLines(out, "is forbidden"))
	}
}

// simcloudModule builds the simcloud module, gzip-compressed, with TinyGo
// when installed, else with Go. It reports whether the result fits in a
// ConfigMap.
func simcloudModule(t testing.TB) ([]byte, bool) {
	t.Helper()
	pkg := filepath.Join(repoRoot, "modules", "simcloud", "module")
	path, err := wasmbuild.Build(pkg, wasmbuild.TinyGo)
	if errors.Is(err, wasmbuild.ErrNoTinyGo) {
		path, err = wasmbuild.Build(pkg, wasmbuild.Go)
	}
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzipBytes(t, wasm)
	t.Logf("simcloud module: %d bytes, %d compressed", len(wasm), len(gz))
	return gz, len(gz) <= configMapMaxBytes
}

func writeTokenKubeconfig(t testing.TB, path, server string, ca []byte, token string) {
	t.Helper()
	const name = "wasm-cloud-controller-manager"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startManager runs the manager until the test ends and returns a function
// reading its log so far.
func startManager(t testing.TB, bin string, args []string, env map[string]string, logPath string) func() string {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = cluster.ChildAttrs()
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return func() string {
		data, _ := os.ReadFile(logPath)
		select {
		case <-exited:
			return string(data) + "\n(the manager has exited: " + cmd.ProcessState.String() + ")"
		default:
			return string(data)
		}
	}
}

// poll runs check until it succeeds or timeout passes; a failure quotes the
// end of the manager's log.
func poll(ctx context.Context, t testing.TB, timeout time.Duration, logs func() string, check func(context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		out := logs()
		if len(out) > 4096 {
			out = out[len(out)-4096:]
		}
		t.Fatalf("%v (last: %v)\n--- end of the manager's log ---\n%s", err, last, out)
	}
}

func grepLines(text, substr string) string {
	var out bytes.Buffer
	for line := range strings.Lines(text) {
		if strings.Contains(line, substr) {
			out.WriteString(line)
		}
	}
	return out.String()
}
