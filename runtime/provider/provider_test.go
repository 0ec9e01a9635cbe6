package provider

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	wt "github.com/wasmccm/wasmccm/internal/wasmtest"
	"github.com/wasmccm/wasmccm/runtime/lifecycle/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/membudget/membudgettest"
)

func newCloud(t testing.TB, wasm []byte, mutate func(*Config)) *Cloud {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider.wasm")
	lifecycletest.WriteFile(t, path, wasm)
	// A shared compilation cache keeps reloads of an already-seen module
	// fast, as it does in production.
	cfg := &Config{Module: ModuleConfig{Path: path, CompilationCacheDir: lifecycletest.CompilationCache()}, Limits: LimitsConfig{PoolSize: 2, CallTimeout: metav1.Duration{Duration: 2 * time.Second}}}
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
	c := newCloud(t, lifecycletest.Guest(t, "testprovider"), func(cfg *Config) { cfg.ClusterName = "prod" })
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
		cfg     ModuleConfig
		wantErr string
	}{
		{"pinned", wasm, ModuleConfig{SHA256: "sha256:" + lifecycletest.Digest(wasm)}, ""},
		{"pin mismatch", wasm, ModuleConfig{SHA256: strings.Repeat("0", 64)}, "sha256 mismatch"},
		{"signed", wasm, ModuleConfig{PublicKeyPath: pubPath, SignaturePath: sigPath}, ""},
		{"tampered", append(append([]byte{}, wasm...), 0), ModuleConfig{PublicKeyPath: pubPath, SignaturePath: sigPath}, "signature does not verify"},
		{"not wasm", []byte("hello"), ModuleConfig{}, "invalid wasm module"},
		{"600,000 functions", lifecycletest.Gzip(t, wt.Module{Funcs: make([]wt.Func, 600_000)}.Bytes()), ModuleConfig{},
			"module defines 600000 functions, more than the 50000 the host compiles"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Path = filepath.Join(t.TempDir(), "provider.wasm")
			lifecycletest.WriteFile(t, tc.cfg.Path, tc.module)
			c, err := New(context.Background(), &Config{Module: tc.cfg})
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

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name, yaml, wantErr string
	}{
		{"full", `
clusterName: prod
module: {path: /m/provider.wasm.gz, sha256: "abc", compilationCacheDir: /var/cache, reloadInterval: 5s}
limits: {poolSize: 4, callTimeout: 10s, memoryLimitMiB: 64}
http: {allowedOrigins: ["https://api.example.com", "http://127.0.0.1:8780"], timeout: 5s}
credentials:
  dir: /etc/creds
  auth: [{name: token, origins: ["https://api.example.com"], bearer: {key: token}}]
providerConfig: {endpoint: "https://api.example.com", region: eu-1}
`, ""},
		{"unknown field", "module: {path: x}\nlimit: {poolSize: 2}\n", `unknown field "limit"`},
		{"no module", "clusterName: x\n", "module.path or module.image is required"},
		{"path and image", "module: {path: x, image: r.example/m@sha256:" + strings.Repeat("a", 64) + ", imageCacheDir: /c}\n", "exclude each other"},
		{"image by tag", "module: {image: r.example/m:v1, imageCacheDir: /c}\n", "has no digest"},
		{"image without cache", "module: {image: r.example/m@sha256:" + strings.Repeat("a", 64) + "}\n", "needs module.imageCacheDir"},
		{"registry settings without image", "module: {path: x, allowTags: true}\n", "need module.image"},
		{"bad origin", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a/path\"]}\n", "only scheme://host[:port]"},
		{"bad credential", "module: {path: x}\ncredentials: {dir: /d, readable: [\"../etc/passwd\"]}\n", "not a plain Secret key"},
		{"readable without dir", "module: {path: x}\ncredentials: {readable: [token]}\n", "need credentials.dir"},
		{"granted is gone", "module: {path: x}\ncredentials: {dir: /d, granted: [token]}\n", "replaced by credentials.auth"},
		{"auth origin not allowed", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://b.example\"], bearer: {key: t}}]}\n",
			"origin https://b.example:443 is not in http.allowedOrigins"},
		{"auth without origins", "module: {path: x}\ncredentials: {dir: /d, auth: [{name: t, bearer: {key: t}}]}\n", "no origins"},
		{"auth with two schemes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: t}, basic: {usernameKey: u, passwordKey: p}}]}\n",
			"set exactly one of"},
		{"auth key escapes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: ../t}}]}\n",
			"not a plain Secret key"},
		{"auth twice", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {key: t}}, {name: t, origins: [\"https://a.example\"], bearer: {key: u}}]}\n",
			"listed twice"},
		{"oauth2 without token URL", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], oauth2ClientCredentials: {clientIDKey: i, clientSecretKey: s}}]}\n",
			"is not an http(s) URL"},
		{"google without scopes", "module: {path: x}\nhttp: {allowedOrigins: [\"https://a.example\"]}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], googleServiceAccount: {key: k}}]}\n",
			"scopes are required"},
		{"unknown auth field", "module: {path: x}\ncredentials: {dir: /d, auth: [{name: t, origins: [\"https://a.example\"], bearer: {token: t}}]}\n", `unknown field "token"`},
		{"negative", "module: {path: x}\nlimits: {callTimeout: -1s}\n", "must not be negative"},
		{"half signature", "module: {path: x, publicKeyPath: k}\n", "go together"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(tc.yaml))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := string(cfg.ProviderConfig); got != `{"endpoint":"https://api.example.com","region":"eu-1"}` {
					t.Fatalf("providerConfig = %s", got)
				}
				if hc := cfg.HostConfig("m"); hc.MemoryLimitPages != 1024 || hc.CallTimeout != 10*time.Second || hc.ClusterName != "prod" {
					t.Fatalf("host config = %+v", hc)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestMemoryBudgetRefusesStart: the CCM's provider refuses to start, before
// it reads the module, when its budget exceeds the cgroup's limit.
func TestMemoryBudgetRefusesStart(t *testing.T) {
	saved := cgroupRoot
	cgroupRoot = membudgettest.Cgroups(t, map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/ccm\n", "sys/fs/cgroup/memory.max": "268435456"})
	t.Cleanup(func() { cgroupRoot = saved })
	cfg := &Config{Module: ModuleConfig{Path: filepath.Join(t.TempDir(), "absent.wasm")}}
	_, err := New(context.Background(), cfg)
	want := "memory budget: (limits.poolSize 4 x limits.memoryLimitMiB 128 + limits.sharedStateMiB 8) + 100 MiB for the manager = 620 MiB, " +
		"over the container's memory limit of 256 MiB"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
}
