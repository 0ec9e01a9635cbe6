package provider

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
	"github.com/wasmccm/wasmccm/runtime/membudget/membudgettest"
)

func newCloud(t testing.TB, wasm []byte, mutate func(*cloudconfig.Config)) *Cloud {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider.wasm")
	lifecycletest.WriteFile(t, path, wasm)
	// A shared compilation cache keeps reloads of an already-seen module
	// fast, as it does in production.
	cfg := &cloudconfig.Config{Module: cloudconfig.Module{Path: path, CompilationCacheDir: lifecycletest.CompilationCache()}, Limits: cloudconfig.Limits{PoolSize: 2, CallTimeout: cloudconfig.Duration{Duration: 2 * time.Second}}}
	if mutate != nil {
		mutate(cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func node(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

// TestInstanceExistsNeverGuesses is the rule that protects Nodes: only an
// explicit "false" from the module reports an instance as gone.
func TestInstanceExistsNeverGuesses(t *testing.T) {
	c := newCloud(t, lifecycletest.Guest(t, "testprovider"), nil)
	i, ok := c.InstancesV2()
	if !ok {
		t.Fatal("InstancesV2 not supported")
	}
	cases := []struct {
		node       string
		wantExists bool
		wantErr    func(error) bool
	}{
		{"present", true, nil},
		{"missing", false, nil},
		{"notfound", false, func(err error) bool { return err != nil && !errors.Is(err, cloudprovider.InstanceNotFound) }},
		{"error", false, func(err error) bool { return strings.Contains(err.Error(), "cloud said no") }},
		{"trap", false, func(err error) bool { return strings.Contains(err.Error(), "trap") }},
		{"loop", false, func(err error) bool { return strings.Contains(err.Error(), "timeout") }},
		{"retry", false, func(err error) bool {
			var retry *api.RetryError
			return errors.As(err, &retry) && retry.RetryAfter() == 3*time.Second
		}},
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			exists, err := i.InstanceExists(context.Background(), node(tc.node))
			if exists != tc.wantExists {
				t.Fatalf("exists = %v, want %v (err %v)", exists, tc.wantExists, err)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && (err == nil || !tc.wantErr(err)) {
				t.Fatalf("unexpected error %v", err)
			}
		})
	}
}

func TestLoadBalancerMapping(t *testing.T) {
	c := newCloud(t, lifecycletest.Guest(t, "testprovider"), func(cfg *cloudconfig.Config) { cfg.ClusterName = "prod" })
	lb, ok := c.LoadBalancer()
	if !ok {
		t.Fatal("LoadBalancer not supported")
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	if name := lb.GetLoadBalancerName(context.Background(), "prod", svc); name != "prod-default-web" {
		t.Fatalf("name = %q", name)
	}
	status, err := lb.EnsureLoadBalancer(context.Background(), "prod", svc, []*v1.Node{node("a"), node("b"), node("c")})
	if err != nil || len(status.Ingress) != 1 || status.Ingress[0].IP != "192.0.2.3" || *status.Ingress[0].IPMode != v1.LoadBalancerIPModeVIP {
		t.Fatalf("EnsureLoadBalancer = %+v, %v", status, err)
	}
	if _, exists, err := lb.GetLoadBalancer(context.Background(), "prod", svc); exists || err != nil {
		t.Fatalf("GetLoadBalancer exists=%v err=%v", exists, err)
	}
	elsewhere := svc.DeepCopy()
	elsewhere.Name = "elsewhere"
	if _, err := lb.EnsureLoadBalancer(context.Background(), "prod", elsewhere, nil); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Fatalf("err = %v, want ImplementedElsewhere", err)
	}
	if err := lb.UpdateLoadBalancer(context.Background(), "prod", svc, nil); err == nil || !strings.Contains(err.Error(), "no nodes") {
		t.Fatalf("UpdateLoadBalancer err = %v", err)
	}
	if err := lb.EnsureLoadBalancerDeleted(context.Background(), "prod", svc); err != nil {
		t.Fatal(err)
	}
}

func TestCapabilitiesAreMasked(t *testing.T) {
	c := newCloud(t, lifecycletest.Guest(t, "minimal"), nil)
	if _, ok := c.InstancesV2(); !ok {
		t.Fatal("InstancesV2 should be supported")
	}
	checks := map[string]bool{}
	_, checks["Instances"] = c.Instances()
	_, checks["LoadBalancer"] = c.LoadBalancer()
	_, checks["Routes"] = c.Routes()
	_, checks["Zones"] = c.Zones()
	_, checks["Clusters"] = c.Clusters()
	for name, ok := range checks {
		if ok {
			t.Errorf("%s reported as supported by a module that lacks it", name)
		}
	}
}

func TestModuleIntegrity(t *testing.T) {
	wasm := lifecycletest.Guest(t, "minimal")
	dir := t.TempDir()
	publicKey, sign := lifecycletest.Signer(t)
	pubPath, sigPath := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "provider.wasm.sig")
	lifecycletest.WriteFile(t, pubPath, publicKey)
	lifecycletest.WriteFile(t, sigPath, sign(wasm))

	cases := []struct {
		name    string
		module  []byte
		cfg     cloudconfig.Module
		wantErr string
	}{
		{"pinned", wasm, cloudconfig.Module{SHA256: "sha256:" + lifecycletest.Digest(wasm)}, ""},
		{"pin mismatch", wasm, cloudconfig.Module{SHA256: strings.Repeat("0", 64)}, "sha256 mismatch"},
		{"signed", wasm, cloudconfig.Module{PublicKeyPath: pubPath, SignaturePath: sigPath}, ""},
		{"tampered", append(append([]byte{}, wasm...), 0), cloudconfig.Module{PublicKeyPath: pubPath, SignaturePath: sigPath}, "signature does not verify"},
		{"not wasm", []byte("hello"), cloudconfig.Module{}, "invalid wasm module"},
		{"600,000 functions", lifecycletest.Gzip(t, wt.Module{Funcs: make([]wt.Func, 600_000)}.Bytes()), cloudconfig.Module{},
			"module defines 600000 functions, more than the 50000 the host compiles"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Path = filepath.Join(t.TempDir(), "provider.wasm")
			lifecycletest.WriteFile(t, tc.cfg.Path, tc.module)
			c, err := New(context.Background(), &cloudconfig.Config{Module: tc.cfg})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				c.Close(context.Background())
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// parseConfig parses a cloud-config of one module.
func parseConfig(r io.Reader) (*cloudconfig.Config, error) {
	f, err := cloudconfig.Parse(r)
	if err != nil {
		return nil, err
	}
	return f.Pick("")
}

// readConfig reads a cloud-config of one module.
func readConfig(path string) (*cloudconfig.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseConfig(f)
}

// TestHostConfig: the host gets the cloud-config's limits in its units.
func TestHostConfig(t *testing.T) {
	cfg, err := parseConfig(strings.NewReader("clusterName: prod\nmodule: {path: m.wasm, compilationCacheDir: /c}\n" +
		"limits: {poolSize: 4, callTimeout: 10s, memoryLimitMiB: 64, recycleAboveMiB: 8, sharedStateMiB: 2}\nhttp: {timeout: 5s, maxResponseBytes: 1000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	hc := HostConfig(cfg, "m")
	if hc.Name != "m" || hc.ClusterName != "prod" || hc.PoolSize != 4 || hc.CallTimeout != 10*time.Second || hc.MemoryLimitPages != 1024 ||
		hc.RecycleAbovePages != 128 || hc.SharedStateBytes != 2<<20 || hc.CompilationCacheDir != "/c" ||
		hc.HTTP.Timeout != 5*time.Second || hc.HTTP.MaxResponseBytes != 1000 || hc.HTTP.Budget != nil {
		t.Fatalf("host config = %+v", hc)
	}
}

// TestMemoryBudgetRefusesStart: the CCM's provider refuses to start, before
// it reads the module, when its budget exceeds the cgroup's limit.
func TestMemoryBudgetRefusesStart(t *testing.T) {
	saved := cgroupRoot
	cgroupRoot = membudgettest.Cgroups(t, map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/ccm\n", "sys/fs/cgroup/memory.max": "268435456"})
	t.Cleanup(func() { cgroupRoot = saved })
	cfg := &cloudconfig.Config{Module: cloudconfig.Module{Path: filepath.Join(t.TempDir(), "absent.wasm")}}
	_, err := New(context.Background(), cfg)
	want := "memory budget: (limits.poolSize 4 x (limits.memoryLimitMiB 128 + limits.stackLimitMiB 8) + limits.sharedStateMiB 8) + 100 MiB for the manager = 652 MiB, " +
		"over the container's memory limit of 256 MiB"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
}
