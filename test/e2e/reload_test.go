package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// TestHotReloadE2E replaces the module under a running CCM the way the
// kubelet updates a ConfigMap volume, while Nodes are being initialized:
// first with another build of the provider, which must be taken into
// service without failing calls, then with garbage, which must be refused
// while the module in service keeps working.
func TestHotReloadE2E(t *testing.T) {
	// A short shadow period: rollout_test.go covers the comparison.
	e := setup(t, wasmbuild.Go, simcloud.Options{}, withRollout("{shadow: {duration: 2s, calls: 3}}"))
	e.addInstanceAndNode("reload-0", "sim-1a", "10.244.40.0/24")
	e.waitInitialized(t, "reload-0")

	// The replacement: the TinyGo build when there is one, else the
	// standard Go build uncompressed. Either has the same capabilities
	// and a different digest.
	next, kind := e.alternativeModule(t)
	sum := sha256.Sum256(next)
	nextDigest := hex.EncodeToString(sum[:])

	// Slow cloud calls keep the initializations in flight across the swap.
	if _, err := e.cloud.SetGlobal(simcloud.Global{Latency: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	before := e.ccm.metrics(t, e.dir)
	// A call the module did not answer reaches its controller as an error
	// naming the reason; none may occur.
	const callFailed = "module call failed"
	failedBefore := e.ccm.logCount(callFailed)
	e.addInstanceAndNode("reload-1", "sim-1b", "10.244.41.0/24")
	e.addInstanceAndNode("reload-2", "sim-1c", "10.244.42.0/24")
	swapped := time.Now()
	e.swapModuleData(t, next)
	e.addInstanceAndNode("reload-3", "sim-1a", "10.244.43.0/24")
	e.addInstanceAndNode("reload-4", "sim-1b", "10.244.44.0/24")
	eventually(t, 30*time.Second, "provider module reloaded", func() (bool, error) {
		return e.ccm.logContains("provider module reloaded") && e.ccm.logContains(nextDigest), nil
	})
	reloadedAfter := time.Since(swapped)
	e.addInstanceAndNode("reload-5", "sim-1c", "10.244.45.0/24")
	e.addInstanceAndNode("reload-6", "sim-1a", "10.244.46.0/24")
	for i := 1; i <= 6; i++ {
		e.waitInitialized(t, fmt.Sprintf("reload-%d", i))
	}
	if _, err := e.cloud.SetGlobal(simcloud.Global{}); err != nil {
		t.Fatal(err)
	}
	after := e.ccm.metrics(t, e.dir)
	if n := metricValue(after, "wasmccm_module_reloads_total", `result="loaded"`); n != 1 {
		t.Errorf("wasmccm_module_reloads_total{result=\"loaded\"} = %v, want 1", n)
	}
	// A call that picked the old module as it closed is counted as
	// unavailable and retried on the new one, so only the log tells
	// whether a controller saw a failure.
	failed := e.ccm.logCount(callFailed) - failedBefore
	if failed != 0 {
		t.Errorf("%d module calls failed across the reload", failed)
	}
	if n := failedCalls(after) - failedCalls(before); n != 0 {
		t.Errorf("%v module calls trapped, timed out or broke the ABI across the reload", n)
	}
	t.Logf("reload to the %s build (sha256 %.12s): in service %s after the swap; calls failed during reload: %d of %v (retried on the new module: %v)",
		kind, nextDigest, reloadedAfter.Round(100*time.Millisecond), failed,
		metricValue(after, "wasmccm_module_calls_total")-metricValue(before, "wasmccm_module_calls_total"),
		metricValue(after, "wasmccm_module_calls_total", `outcome="unavailable"`)-metricValue(before, "wasmccm_module_calls_total", `outcome="unavailable"`))

	// Garbage: refused, reported once, and the module in service stays.
	e.swapModuleData(t, []byte("this is not a wasm module\x00\x01\x02"))
	eventually(t, 30*time.Second, "new module rejected", func() (bool, error) {
		return e.ccm.logContains("new module rejected"), nil
	})
	e.addInstanceAndNode("reload-7", "sim-1b", "10.244.47.0/24")
	e.addInstanceAndNode("reload-8", "sim-1c", "10.244.48.0/24")
	e.waitInitialized(t, "reload-7")
	e.waitInitialized(t, "reload-8")
	if n := e.ccm.logCount("new module rejected"); n != 1 {
		t.Errorf("the rejection was logged %d times; want once, not at every poll", n)
	}
	final := e.ccm.metrics(t, e.dir)
	if n := metricValue(final, "wasmccm_module_reloads_total", `result="rejected"`); n != 1 {
		t.Errorf("wasmccm_module_reloads_total{result=\"rejected\"} = %v, want 1", n)
	}
	if n := e.ccm.logCount(callFailed) - failedBefore; n != 0 {
		t.Errorf("%d module calls failed after the rejected reload", n)
	}
	e.ccm.waitHealthy(t)
}

// failedCalls counts the module calls that the module itself failed: it
// trapped, ran out of time, broke the ABI or was canceled.
func failedCalls(metrics string) float64 {
	var n float64
	for _, reason := range []string{"trap", "timeout", "abi_violation", "canceled"} {
		n += metricValue(metrics, "wasmccm_module_calls_total", `outcome="`+reason+`"`)
	}
	return n
}

// alternativeModule returns another build of the first-party module than
// the mounted one, and what it is.
func (e *env) alternativeModule(t *testing.T) ([]byte, string) {
	t.Helper()
	if _, err := wasmbuild.TinyGoPath(); err == nil {
		path, err := wasmbuild.Build(simcloudModule, wasmbuild.TinyGo)
		if err != nil {
			t.Fatal(err)
		}
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return wasm, "TinyGo"
	}
	path, err := wasmbuild.Build(simcloudModule, wasmbuild.Go)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return wasm, "uncompressed Go"
}

// swapModuleData updates the mounted module as the kubelet updates a
// ConfigMap volume: the new content goes into a new timestamped directory,
// "..data" is switched to it atomically by renaming a fresh symlink over
// it, and the old directory is removed.
func (e *env) swapModuleData(t *testing.T, content []byte) {
	t.Helper()
	dir := filepath.Join(e.dir, "module")
	old, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	ts := filepath.Join(dir, time.Now().UTC().Format("..2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "simcloud.wasm.gz"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(old, "..") || strings.Contains(old, "/") {
		t.Fatalf("unexpected ..data target %q", old)
	}
	if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
		t.Fatal(err)
	}
}
