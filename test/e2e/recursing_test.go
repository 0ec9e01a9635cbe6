package e2e

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// testRecursingModule runs, built with TinyGo, a module whose
// InstanceExists is a call tree with no loop that would never end, asked
// about a NotReady Node: every such call must end at the call timeout and
// replace its instance, the Node must stay, and meanwhile the CCM must
// answer /healthz promptly, initialize a new Node and give a Service its
// load balancer on the pool's other instances.
func testRecursingModule(t *testing.T) {
	if _, err := wasmbuild.TinyGoPath(); err != nil {
		t.Skip("TinyGo module skipped:", err)
	}
	e := setupModule(t, "testdata/recursing", wasmbuild.TinyGo, simcloud.Options{}, nil)
	e.addInstanceAndNode("deep-1", "sim-1a", "10.244.40.0/24")
	e.waitInitialized(t, "deep-1")

	probe := e.ccm.probeHealth()
	e.setReady("deep-1", v1.ConditionFalse)
	const timedOut = `reason="timeout"`
	eventually(t, 30*time.Second, "the first recursing call stopped at the call timeout", func() (bool, error) {
		return e.ccm.logCount(timedOut) >= 1, nil
	})
	// The node monitor asks again within a second, so the next call
	// recurses while the other methods run on the pool's other instances.
	e.addInstanceAndNode("deep-2", "sim-1b", "10.244.41.0/24")
	e.createLBService(t, "deep-web")
	e.waitInitialized(t, "deep-2")
	e.waitIngress(t, "deep-web", 30*time.Second)
	eventually(t, 30*time.Second, "three recursing calls stopped at the call timeout", func() (bool, error) {
		return e.ccm.logCount(timedOut) >= 3, nil
	})
	latencies := probe.stop()

	if _, err := e.getNode("deep-1"); err != nil {
		t.Fatalf("Node deep-1, whose InstanceExists never answered: %v", err)
	}
	if slow := slices.Max(latencies); slow > 2*time.Second {
		t.Errorf("/healthz took %v to answer while the module recursed; want under 2s", slow)
	}
	metrics := e.ccm.metrics(t, e.dir)
	if n := metricValue(metrics, "wasmccm_module_instances_replaced_total", timedOut); n < 3 {
		t.Errorf("wasmccm_module_instances_replaced_total{%s} = %v, want at least 3", timedOut, n)
	}
	if n := metricValue(metrics, "wasmccm_module_instances_stuck"); n != 0 {
		t.Errorf("wasmccm_module_instances_stuck = %v: the check did not stop the recursion by its deadline", n)
	}
	t.Logf("recursing InstanceExists: %d calls stopped at the call timeout, no Node deleted; %d /healthz probes, slowest %v, median %v",
		e.ccm.logCount(timedOut), len(latencies), slices.Max(latencies), median(latencies))
}

// healthProbe asks a CCM's /healthz over and over and records how long
// each answer took.
type healthProbe struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	took []time.Duration
}

// probeHealth starts asking p's /healthz every 100ms until stop. A request
// that gets no answer at all counts as its 5s client timeout.
func (p *ccmProcess) probeHealth() *healthProbe {
	h := &healthProbe{done: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", p.port)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			select {
			case <-h.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			resp, err := client.Get(url)
			took := time.Since(start)
			if err != nil || resp.StatusCode != http.StatusOK {
				took = client.Timeout
			}
			if err == nil {
				resp.Body.Close()
			}
			h.mu.Lock()
			h.took = append(h.took, took)
			h.mu.Unlock()
		}
	}()
	return h
}

// stop ends the probe and returns the time each answer took.
func (h *healthProbe) stop() []time.Duration {
	close(h.done)
	h.wg.Wait()
	return h.took
}
