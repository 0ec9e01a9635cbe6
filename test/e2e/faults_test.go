package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// TestCloudFaults checks that cloud API failures and a failing module never
// make the CCM delete Nodes or load balancers, nor create a load balancer
// twice, and that everything converges once the failures stop.
func TestCloudFaults(t *testing.T) {
	t.Run("CloudAPI", testCloudAPIFaults)
	t.Run("TrappingModule", testTrappingModule)
	t.Run("RecursingModule", testRecursingModule)
}

// loadBalancerEndpoints are the route patterns of the load balancer API.
var loadBalancerEndpoints = []string{
	"GET /v1/loadbalancers", "POST /v1/loadbalancers", "GET /v1/loadbalancers/{name}",
	"PUT /v1/loadbalancers/{name}", "DELETE /v1/loadbalancers/{name}",
}

func testCloudAPIFaults(t *testing.T) {
	// A short HTTP timeout lets the latency stretch exceed it cheaply.
	e := setup(t, wasmbuild.Go, simcloud.Options{}, func(config string) string {
		const from, to = "\n  timeout: 5s\n", "\n  timeout: 1s\n"
		if !strings.Contains(config, from) {
			t.Fatalf("cloud-config has no %q to shorten:\n%s", strings.TrimSpace(from), config)
		}
		return strings.Replace(config, from, to, 1)
	})

	// Four initialized Nodes and two load balancers before any fault.
	nodes := []string{"fault-1", "fault-2", "fault-3", "fault-4"}
	insts := map[string]simcloud.Instance{}
	for i, name := range nodes {
		insts[name] = e.addInstanceAndNode(name, fmt.Sprintf("sim-1%c", 'a'+i%3), fmt.Sprintf("10.244.%d.0/24", 20+i))
	}
	for _, name := range nodes {
		e.waitInitialized(t, name)
	}
	services := []string{"web-a", "web-b"}
	for _, name := range services {
		e.createLBService(t, name)
	}
	for _, name := range services {
		e.waitIngress(t, name, 60*time.Second)
	}
	e.waitConverged(t, services, 60*time.Second)
	// want is the Nodes that must exist: a missing one was wrongly deleted.
	want := slices.Clone(nodes)
	wronglyDeleted := func() []string {
		var missing []string
		for _, name := range want {
			if _, err := e.getNode(name); apierrors.IsNotFound(err) {
				missing = append(missing, name)
			}
		}
		return missing
	}
	expectNoWrongDeletion := func(stretch string) {
		t.Helper()
		if missing := wronglyDeleted(); len(missing) > 0 {
			t.Fatalf("%s: Nodes %v were deleted although their instances exist", stretch, missing)
		}
	}
	c0 := e.cloud.Counters()

	// (a) Every /v1 call fails with 500 while two Nodes are NotReady, so
	// that the lifecycle controller asks whether their instances exist:
	// an error must not read as "no". The instance of fault-4 really is
	// terminated during the outage; its Node must survive the outage and
	// be deleted only once the cloud can say so, which shows that the
	// lifecycle controller was checking all along.
	e.setReady("fault-3", v1.ConditionFalse)
	e.setReady("fault-4", v1.ConditionFalse)
	const checkFailed = `error checking if node fault-3 exists`
	checks := e.ccm.logCount(checkFailed)
	before := e.cloud.Counters()
	e.setFault(t, simcloud.Fault{Name: "outage", ErrorRate: 1, Status: 500})
	if err := e.cloud.DeleteInstance(insts["fault-4"].ID); err != nil {
		t.Fatal(err)
	}
	// At least six node-monitor periods, and three failed checks.
	e.stretch(t, "outage", 6*time.Second, func() bool { return e.ccm.logCount(checkFailed)-checks >= 3 })
	after := e.cloud.Counters()
	e.cloud.ClearFaults()
	if _, err := e.getNode("fault-4"); err != nil {
		t.Fatalf("outage: the Node of the terminated instance went during the outage: %v", err)
	}
	expectNoWrongDeletion("outage")
	t.Logf("outage: %d requests failed with 500, %d failed existence checks, no Node deleted",
		after.FaultsInjected-before.FaultsInjected, e.ccm.logCount(checkFailed)-checks)
	eventually(t, 30*time.Second, "the Node of the terminated instance deleted after the outage", func() (bool, error) {
		_, err := e.getNode("fault-4")
		return apierrors.IsNotFound(err), err
	})
	want = slices.DeleteFunc(want, func(n string) bool { return n == "fault-4" })
	e.setReady("fault-3", v1.ConditionTrue)
	e.waitConverged(t, services, 60*time.Second)
	expectNoWrongDeletion("after the outage")

	// (b) The load balancer API throttles every call with 429 and
	// Retry-After: 3 while a Service is created and then a Node joins.
	// The create must be retried at the pace the cloud asked for, not in a
	// loop, and nothing may be deleted.
	const retryAfter = 3
	before = e.cloud.Counters()
	e.setFault(t, simcloud.Fault{Name: "throttle", PathPrefix: "/v1/loadbalancers", ErrorRate: 1, Status: 429, RetryAfter: retryAfter})
	start := time.Now()
	e.createLBService(t, "web-c")
	services = append(services, "web-c")
	// Only web-c is reconciled now, so every lookup of a load balancer
	// by name is one of its attempts.
	attempts := e.watchRequests("GET /v1/loadbalancers/{name}", 10*time.Second)
	e.addInstanceAndNode("fault-5", "sim-1b", "10.244.25.0/24")
	want = append(want, "fault-5")
	e.waitInitialized(t, "fault-5")
	time.Sleep(time.Until(start.Add(16 * time.Second)))
	after = e.cloud.Counters()
	e.cloud.ClearFaults()
	stretch := time.Since(start)
	if after.LoadBalancersDeleted != c0.LoadBalancersDeleted || after.LoadBalancersCreated != before.LoadBalancersCreated {
		t.Fatalf("throttled: load balancers created %d, deleted %d during the stretch",
			after.LoadBalancersCreated-before.LoadBalancersCreated, after.LoadBalancersDeleted-c0.LoadBalancersDeleted)
	}
	if len(attempts) < 2 {
		t.Fatalf("throttled: %d attempts to create web-c's load balancer in 10s; want retries", len(attempts))
	}
	var gaps []time.Duration
	for i := 1; i < len(attempts); i++ {
		gaps = append(gaps, attempts[i].Sub(attempts[i-1]).Round(100*time.Millisecond))
	}
	// Attempts at the requested pace fit 10s/3s+1 times; allow one early
	// retry (an unrelated event can requeue the Service once).
	if most := 10/retryAfter + 2; len(attempts) > most {
		t.Errorf("throttled: %d attempts in 10s for one Service (gaps %v); Retry-After: %d allows at most %d", len(attempts), gaps, retryAfter, most)
	}
	short := 0
	for _, g := range gaps {
		if g < (retryAfter*time.Second)*8/10 {
			short++
		}
	}
	if short > 1 {
		t.Errorf("throttled: %d of the gaps %v between attempts are shorter than Retry-After: %ds", short, gaps, retryAfter)
	}
	lbRequests := 0
	for _, ep := range loadBalancerEndpoints {
		lbRequests += after.Requests[ep] - before.Requests[ep]
	}
	// Each Service may try once per Retry-After, plus the attempts the
	// joining Node triggers at once; twice that is still far from a loop,
	// which would make thousands.
	if limit := 2 * len(services) * int(stretch.Seconds()/retryAfter+2); lbRequests > limit {
		t.Errorf("throttled: %d load balancer requests in %s for %d Services; Retry-After: %d allows about %d", lbRequests, stretch.Round(time.Second), len(services), retryAfter, limit/2)
	}
	if !e.ccm.logContains(fmt.Sprintf("retrying in %ds", retryAfter)) {
		t.Errorf("throttled: the CCM log never says it retries a Service after the cloud's %ds", retryAfter)
	}
	t.Logf("throttled: web-c attempted %d times in 10s, gaps %v; %d load balancer requests in %s, all answered 429",
		len(attempts), gaps, lbRequests, stretch.Round(time.Second))
	e.waitIngress(t, "web-c", 60*time.Second)
	e.waitConverged(t, services, 60*time.Second)
	expectNoWrongDeletion("throttled")

	// (c) Every /v1 call takes 3s, beyond the 1s HTTP timeout, while a
	// Node is NotReady: the timeouts must be errors, not "gone".
	e.setReady("fault-3", v1.ConditionFalse)
	checks = e.ccm.logCount(checkFailed)
	// The host reports a timeout as "timed out", or as the transport's
	// "timeout awaiting response headers" when that timer fires first.
	timeoutCount := func() int {
		return e.ccm.logCount("timed out") + e.ccm.logCount("timeout awaiting response headers")
	}
	timeouts := timeoutCount()
	e.setFault(t, simcloud.Fault{Name: "slow", Latency: 3 * time.Second})
	e.stretch(t, "slow", 6*time.Second, func() bool { return e.ccm.logCount(checkFailed)-checks >= 2 })
	e.cloud.ClearFaults()
	if timeoutCount() == timeouts {
		t.Error("slow: the CCM log reports no timed out request")
	}
	t.Logf("slow: %d existence checks timed out, no Node deleted", e.ccm.logCount(checkFailed)-checks)
	expectNoWrongDeletion("slow")
	e.setReady("fault-3", v1.ConditionTrue)

	// (d) The response to a load balancer create is lost after the cloud
	// made it: the retry must find it rather than make a second one.
	before = e.cloud.Counters()
	e.setFault(t, simcloud.Fault{Name: "lost", Route: "POST /v1/loadbalancers", FailNext: 1, AfterCommit: true, Status: 503, RetryAfter: 1})
	svcD := e.createLBService(t, "web-d")
	services = append(services, "web-d")
	e.waitIngress(t, "web-d", 60*time.Second)
	after = e.cloud.Counters()
	e.cloud.ClearFaults()
	if n := after.Status("POST /v1/loadbalancers", 503) - before.Status("POST /v1/loadbalancers", 503); n != 1 {
		t.Fatalf("lost response: %d creates answered 503, want 1", n)
	}
	if n := after.LoadBalancersCreated - before.LoadBalancersCreated; n != 1 {
		t.Fatalf("lost response: %d load balancers created for web-d (%s)", n, lbName(svcD))
	}

	// Everything converges: every Service has the IP of its one load
	// balancer, whose targets are the Nodes' instances, and every Node
	// whose instance exists is there and initialized.
	e.waitConverged(t, services, 60*time.Second)
	for _, name := range want {
		e.waitInitialized(t, name)
	}
	expectNoWrongDeletion("end")
	final := e.cloud.Counters()
	duplicates := final.LoadBalancersCreated - len(services)
	if final.LoadBalancersDeleted != 0 || duplicates != 0 || len(e.cloud.LoadBalancers()) != len(services) {
		t.Fatalf("load balancers: %d created for %d Services, %d deleted, %d in the cloud",
			final.LoadBalancersCreated, len(services), final.LoadBalancersDeleted, len(e.cloud.LoadBalancers()))
	}
	t.Logf("faults injected %d; Nodes wrongly deleted %d; load balancers deleted %d, duplicated %d (%d created for %d Services)",
		final.FaultsInjected, len(wronglyDeleted()), final.LoadBalancersDeleted, duplicates, final.LoadBalancersCreated, len(services))
}

// testTrappingModule runs a module whose InstanceExists always traps while
// Nodes are NotReady: no Node may be deleted, the instances are replaced,
// and the CCM stays healthy and keeps serving the other methods.
func testTrappingModule(t *testing.T) {
	e := setupModule(t, "testdata/trapping", wasmbuild.Go, simcloud.Options{}, nil)
	nodes := []string{"trap-1", "trap-2", "trap-3"}
	for i, name := range nodes {
		e.addInstanceAndNode(name, "sim-1a", fmt.Sprintf("10.244.%d.0/24", 30+i))
	}
	for _, name := range nodes {
		e.waitInitialized(t, name)
	}
	e.setReady("trap-1", v1.ConditionFalse)
	e.setReady("trap-2", v1.ConditionFalse)
	const trapped = `reason="trap"`
	eventually(t, 30*time.Second, "a trap in InstanceExists", func() (bool, error) {
		return e.ccm.logContains(trapped), nil
	})
	time.Sleep(5 * time.Second) // five more node-monitor periods
	for _, name := range nodes {
		if _, err := e.getNode(name); err != nil {
			t.Fatalf("Node %s: %v", name, err)
		}
	}
	log := e.ccm.log()
	traps := strings.Count(log, trapped)
	if !strings.Contains(log, "panics on purpose") {
		t.Error("the guest's panic message is not in the CCM log")
	}
	if !strings.Contains(log, "closing module instance after a failed call") {
		t.Error("the CCM log does not report the instance replacement")
	}
	if !strings.Contains(log, "error checking if node trap-1 exists") {
		t.Error("the lifecycle controller did not report the failed InstanceExists as an error")
	}
	e.ccm.waitHealthy(t)
	metrics := e.ccm.metrics(t, e.dir)
	replaced := metricValue(metrics, "wasmccm_module_instances_replaced_total", trapped)
	if replaced < 1 {
		t.Fatalf("wasmccm_module_instances_replaced_total{%s} = %v", trapped, replaced)
	}
	// The other methods still work on fresh instances.
	e.addInstanceAndNode("trap-4", "sim-1b", "10.244.33.0/24")
	e.waitInitialized(t, "trap-4")
	t.Logf("trapping InstanceExists: %d traps logged, %v instances replaced (metric), no Node deleted, /healthz ok", traps, replaced)
}

// ---- helpers shared by the fault, reload and HA tests ----

func (e *env) setFault(t *testing.T, f simcloud.Fault) {
	t.Helper()
	if _, err := e.cloud.SetFault(f); err != nil {
		t.Fatal(err)
	}
}

// createLBService creates a LoadBalancer Service in namespace default.
func (e *env) createLBService(t *testing.T, name string) *v1.Service {
	t.Helper()
	return e.createClassLBService(t, name, "")
}

// createClassLBService creates a LoadBalancer Service of a load balancer
// class (none when empty) in namespace default.
func (e *env) createClassLBService(t *testing.T, name, class string) *v1.Service {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	svc, err := e.client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *env) getService(name string) (*v1.Service, error) {
	return e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
}

// waitIngress waits for the Service's load balancer IP.
func (e *env) waitIngress(t *testing.T, name string, timeout time.Duration) string {
	t.Helper()
	var ip string
	eventually(t, timeout, "load balancer ingress of "+name, func() (bool, error) {
		s, err := e.getService(name)
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ip = s.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	})
	return ip
}

// lbName is the cloud name of a Service's load balancer.
func lbName(svc *v1.Service) string {
	name := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(name) > 32 {
		name = name[:32]
	}
	return name
}

// converged reports whether the cloud holds exactly one load balancer per
// Service, with the Service's ingress IP and the Nodes' instances as
// targets.
func (e *env) converged(services []string) (bool, error) {
	want := e.nodeInstanceIDs()
	names := map[string]bool{}
	for _, name := range services {
		svc, err := e.getService(name)
		if err != nil {
			return false, err
		}
		lb, ok := e.cloud.LoadBalancer(lbName(svc))
		if !ok {
			return false, fmt.Errorf("service %s has no load balancer %s", name, lbName(svc))
		}
		names[lb.Name] = true
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) != 1 || ing[0].IP != lb.IP {
			return false, fmt.Errorf("service %s ingress %v, load balancer IP %s", name, ing, lb.IP)
		}
		if got := slices.Sorted(slices.Values(lb.Targets)); !slices.Equal(got, want) {
			return false, fmt.Errorf("service %s: targets %v, nodes' instances %v", name, got, want)
		}
	}
	for _, lb := range e.cloud.LoadBalancers() {
		if !names[lb.Name] {
			return false, fmt.Errorf("load balancer %s belongs to no Service", lb.Name)
		}
	}
	return true, nil
}

func (e *env) waitConverged(t *testing.T, services []string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "load balancers converged", func() (bool, error) { return e.converged(services) })
}

// stretch lets a fault act for at least d and until enough holds, which
// must happen within 20s.
func (e *env) stretch(t *testing.T, what string, d time.Duration, enough func() bool) {
	t.Helper()
	start := time.Now()
	time.Sleep(d)
	eventually(t, 20*time.Second-d, what+" to have effect", func() (bool, error) {
		return enough(), fmt.Errorf("not enough after %s", time.Since(start).Round(time.Second))
	})
}

// watchRequests polls the cloud's counters for d and returns when the
// requests to endpoint (a route pattern) were answered.
func (e *env) watchRequests(endpoint string, d time.Duration) []time.Time {
	var times []time.Time
	last := e.cloud.Counters().Requests[endpoint]
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		n := e.cloud.Counters().Requests[endpoint]
		for ; last < n; last++ {
			times = append(times, time.Now())
		}
	}
	return times
}

func (p *ccmProcess) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func (p *ccmProcess) logContains(s string) bool { return strings.Contains(p.log(), s) }

func (p *ccmProcess) logCount(s string) int { return strings.Count(p.log(), s) }

// metrics scrapes the CCM's /metrics with the admin token of the kubeconfig
// in dir, which the CCM's delegated authentication and authorization accept.
func (p *ccmProcess) metrics(t *testing.T, dir string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, a := range kc.AuthInfos {
		token = a.Token
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/metrics", p.port), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v\n%.500s", resp.Status, err, body)
	}
	return string(body)
}

// metricValue sums the samples of metric whose labels contain every one of
// labels (each `name="value"`).
func metricValue(text, metric string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		if i < 0 || !containsAll(rest[:i], labels) {
			continue
		}
		if v, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
