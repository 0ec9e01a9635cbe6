package e2e

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/examples/hcloudfake"
	"github.com/wasmccm/wasmccm/examples/simcloud"
)

// TestNoTokenInModuleMemory is the proof by construction that the cloud
// token never enters a module: the simcloud scenarios (with each
// toolchain) and the hcloud ones run with the default cloud-config (the
// token bound to the cloud's origin, nothing readable), and then every
// live instance's linear memory is searched for the token. None holds it,
// while each holds the cloud's address, which shows the search sees what
// instances keep. The CCM is built with the wasmccm_memscan tag, whose
// hook (runtime/host/memscan_hook.go) searches on SIGUSR1.
func TestNoTokenInModuleMemory(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "wasm-cloud-controller-manager")
	build := exec.Command("go", "build", "-tags", "wasmccm_memscan", "-o", bin, "../../cmd/wasm-cloud-controller-manager")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the CCM with the memory scan hook: %v\n%s", err, out)
	}
	defer func(b string) { ccmBinary = b }(ccmBinary)
	ccmBinary = bin

	tcs := moduleToolchains(t)
	for _, tc := range tcs {
		t.Run("simcloud/"+string(tc), func(t *testing.T) {
			scans := t.TempDir()
			t.Setenv("WASMCCM_MEMSCAN_DIR", scans)
			e := setup(t, tc, simcloud.Options{}, nil)
			t.Run("NodeInitialization", e.testNodeInitialization)
			t.Run("LoadBalancer", e.testLoadBalancer)
			t.Run("Routes", e.testRoutes)
			e.checkNoTokenInMemory(t, scans)
		})
	}
	tc := tcs[len(tcs)-1] // TinyGo when present, as TestHcloud
	t.Run("hcloud/"+string(tc), func(t *testing.T) {
		scans := t.TempDir()
		t.Setenv("WASMCCM_MEMSCAN_DIR", scans)
		fake := hcloudfake.New(hcloudfake.Options{Token: cloudToken, ActionPolls: 1})
		srv := httptest.NewServer(fake.Handler())
		t.Cleanup(srv.Close)
		network, err := fake.AddNetwork("k8s", "10.0.0.0/16")
		if err != nil {
			t.Fatal(err)
		}
		providerConfig := `{endpoint: "` + srv.URL + `/v1", tokenCredential: token, network: k8s, callTimeout: 8s, loadBalancers: {location: fsn1}}`
		e := &hcloudEnv{env: startModule(t, hcloudModule, tc, srv.URL, providerConfig, nil), fake: fake, network: network}
		t.Run("NodeInitialization", e.testNodeInitialization)
		t.Run("LoadBalancer", e.testLoadBalancer)
		t.Run("Routes", e.testRoutes)
		e.checkNoTokenInMemory(t, scans)
	})
}

// memoryScan is what the hook reports.
type memoryScan struct {
	Instances int   `json:"instances"`
	Bytes     int64 `json:"bytes"`
	Matches   int   `json:"matches"`
}

func (e *env) checkNoTokenInMemory(t *testing.T, scans string) {
	t.Helper()
	address := strings.TrimPrefix(e.cloudURL, "http://")
	if s := e.scanMemory(t, scans, address); s.Instances == 0 || s.Matches == 0 {
		t.Fatalf("the scan found the cloud's address %s %d times in %d instances (%d bytes): it does not see the instances' memory", address, s.Matches, s.Instances, s.Bytes)
	}
	s := e.scanMemory(t, scans, cloudToken)
	if s.Matches != 0 {
		t.Fatalf("the token is %d times in the memory of %d instances", s.Matches, s.Instances)
	}
	t.Logf("no token in %d instances, %d bytes of linear memory", s.Instances, s.Bytes)
}

// scanMemory has the CCM search its instances' memory for needle.
func (e *env) scanMemory(t *testing.T, dir, needle string) memoryScan {
	t.Helper()
	result := filepath.Join(dir, "result.json")
	os.Remove(result)
	if err := os.WriteFile(filepath.Join(dir, "needle"), []byte(needle), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.ccm.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var scan memoryScan
	eventually(t, 10*time.Second, "the memory scan", func() (bool, error) {
		b, err := os.ReadFile(result)
		if err != nil {
			return false, err
		}
		return true, json.Unmarshal(b, &scan)
	})
	return scan
}
