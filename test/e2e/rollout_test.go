package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// The CCM's Pod, as the Deployment names it through the downward API;
// module Events go on it.
const (
	podNamespace = "default"
	podName      = "wasm-ccm-e2e"
)

// withRollout sets module.rollout, and withSafety the safety section, in
// the harness's cloud-config.
func withRollout(rollout string) func(string) string {
	return func(config string) string {
		return strings.Replace(config, "  reloadInterval: 1s\n", "  reloadInterval: 1s\n  rollout: "+rollout+"\n", 1)
	}
}

func withRolloutAndSafety(rollout, safety string) func(string) string {
	return func(config string) string { return withRollout(rollout)(config) + "safety: " + safety + "\n" }
}

// testModule builds a module of test/e2e/testdata and returns it with its
// sha256.
func testModule(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	path, err := wasmbuild.Build("testdata/"+name, wasmbuild.Go)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	return wasm, hex.EncodeToString(sum[:])
}

// notReadyNodes creates n initialized Nodes named prefix-i and marks them
// NotReady, so that the node lifecycle controller asks the module about
// each of them every node-monitor period (1 s here).
func (e *env) notReadyNodes(t *testing.T, prefix string, n, cidrBase int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		e.addInstanceAndNode(name, "sim-1a", fmt.Sprintf("10.244.%d.0/24", cidrBase+i))
		names = append(names, name)
	}
	for _, name := range names {
		e.waitInitialized(t, name)
		e.setReady(name, v1.ConditionFalse)
	}
	return names
}

// existing returns those of names whose Node still exists.
func (e *env) existing(t *testing.T, names []string) []string {
	t.Helper()
	list, err := e.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range list.Items {
		have[n.Name] = true
	}
	var out []string
	for _, name := range names {
		if have[name] {
			out = append(out, name)
		}
	}
	return out
}

// events returns the Events with reason in namespace, about objects of
// kind.
func (e *env) events(t *testing.T, namespace, kind, reason string) []v1.Event {
	t.Helper()
	list, err := e.client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Event
	for _, ev := range list.Items {
		if ev.Reason == reason && ev.InvolvedObject.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func (e *env) waitEvent(t *testing.T, kind, reason string, contains ...string) v1.Event {
	t.Helper()
	var found v1.Event
	eventually(t, 30*time.Second, reason+" Event", func() (bool, error) {
		for _, ev := range e.events(t, podNamespace, kind, reason) {
			if containsAll(ev.Message, contains) {
				found = ev
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// TestRolloutE2E replaces the module of a running CCM, with NotReady Nodes
// whose existence the lifecycle controller keeps checking, by: nothing (a
// real instance deletion must still delete its Node), a module answering
// "gone" for every Node (rejected in shadow, no Node deleted), a module
// adding a label (promoted, label applied, no failed call) and a module
// trapping once in service (rolled back, no Node deleted).
func TestRolloutE2E(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	e := setup(t, wasmbuild.Go, simcloud.Options{}, withRollout(
		"{shadow: {duration: 3s, calls: 10}, rollback: {window: 2m, minCalls: 4, failurePercent: 50}}"))
	nodes := e.notReadyNodes(t, "rollout", 4, 60)
	ctx := context.Background()

	// A real deletion, under the default budget (one Node per 10 minutes).
	gone := e.addInstanceAndNode("really-gone", "sim-1b", "10.244.70.0/24")
	e.waitInitialized(t, "really-gone")
	e.setReady("really-gone", v1.ConditionFalse)
	if err := e.cloud.DeleteInstance(gone.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Node of the deleted instance deleted", func() (bool, error) {
		return len(e.existing(t, []string{"really-gone"})) == 0, nil
	})
	m := e.ccm.metrics(t, e.dir)
	t.Logf("real deletion: Node deleted; budget admitted %v, deferred %v",
		metricValue(m, "wasmccm_node_deletion_budget_admitted_total"), metricValue(m, "wasmccm_node_deletion_budget_deferred_total"))

	// All "gone": rejected in shadow.
	allGone, allGoneDigest := testModule(t, "allgone")
	e.swapModuleData(t, allGone)
	ev := e.waitEvent(t, "Pod", "ModuleRejected", allGoneDigest, "instance_exists(rollout-", "in service true, new false")
	// Give the lifecycle controller more periods to act, had it been told.
	time.Sleep(3 * time.Second)
	if left := e.existing(t, nodes); len(left) != len(nodes) {
		t.Fatalf("all-gone update: %d of %d NotReady Nodes deleted", len(nodes)-len(left), len(nodes))
	}
	m = e.ccm.metrics(t, e.dir)
	t.Logf("all-gone update: 0 of %d NotReady Nodes deleted; shadow calls destructive=%v agree=%v; event: %s", len(nodes),
		metricValue(m, "wasmccm_module_shadow_calls_total", `result="destructive"`),
		metricValue(m, "wasmccm_module_shadow_calls_total", `result="agree"`), ev.Message)
	if n := metricValue(m, "wasmccm_module_reloads_total", `result="loaded"`); n != 0 {
		t.Fatalf("the all-gone module was put in service (%v loads)", n)
	}

	// A legitimate change: promoted after the shadow period, no failed call.
	const callFailed = "module call failed"
	failedBefore, metricsBefore := e.ccm.logCount(callFailed), m
	relabel, relabelDigest := testModule(t, "relabel")
	e.swapModuleData(t, relabel)
	swapped := time.Now()
	ev = e.waitEvent(t, "Pod", "ModuleReloaded", relabelDigest, "calls compared")
	promotedAfter := time.Since(swapped)
	e.addInstanceAndNode("relabelled", "sim-1c", "10.244.71.0/24")
	node := e.waitInitialized(t, "relabelled")
	if got := node.Labels["simcloud.example/generation"]; got != "2" {
		t.Fatalf("label simcloud.example/generation = %q on a Node initialized by the promoted module, want 2", got)
	}
	m = e.ccm.metrics(t, e.dir)
	failed := e.ccm.logCount(callFailed) - failedBefore
	trapped := failedCalls(m) - failedCalls(metricsBefore)
	if failed != 0 || trapped != 0 {
		t.Fatalf("legitimate update: %d calls failed, %v module failures", failed, trapped)
	}
	t.Logf("legitimate update: promoted %s after the swap, 0 failed calls, label applied; event: %s",
		promotedAfter.Round(100*time.Millisecond), ev.Message)

	// A module that traps once promoted: rolled back.
	trap, trapDigest := testModule(t, "trapmarked")
	e.swapModuleData(t, trap)
	e.waitEvent(t, "Pod", "ModuleReloaded", trapDigest)
	for _, name := range nodes {
		patch := []byte(`{"metadata":{"labels":{"e2e.wasmccm.io/trap":"true"}}}`)
		if _, err := e.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	marked := time.Now()
	ev = e.waitEvent(t, "Pod", "ModuleRolledBack", trapDigest)
	rolledBackAfter := time.Since(marked)
	// The lifecycle controller retries every second: once the calls in
	// flight at the rollback have ended, its checks of the marked Nodes
	// succeed on the previous module and no failure follows.
	time.Sleep(2 * time.Second)
	failedAfterRollback := e.ccm.logCount(callFailed)
	time.Sleep(4 * time.Second)
	if n := e.ccm.logCount(callFailed) - failedAfterRollback; n != 0 {
		t.Fatalf("%d failed calls from 2 s after the rollback on", n)
	}
	if left := e.existing(t, nodes); len(left) != len(nodes) {
		t.Fatalf("trapping update: %d NotReady Nodes deleted", len(nodes)-len(left))
	}
	e.addInstanceAndNode("after-rollback", "sim-1a", "10.244.72.0/24")
	if got := e.waitInitialized(t, "after-rollback").Labels["simcloud.example/generation"]; got != "2" {
		t.Fatalf("after the rollback a new Node got generation %q; want the relabel module back in service", got)
	}
	m = e.ccm.metrics(t, e.dir)
	t.Logf("trapping update: rolled back %s after its calls began to trap, 0 Nodes deleted, %v trapped calls in all, 0 failed calls from 2 s after the rollback; event: %s",
		rolledBackAfter.Round(100*time.Millisecond), metricValue(m, "wasmccm_module_calls_total", `outcome="trap"`), ev.Message)
	// The refused file stays refused.
	time.Sleep(2 * time.Second)
	if n := len(e.events(t, podNamespace, "Pod", "ModuleShadowing")); n != 3 {
		t.Errorf("%d ModuleShadowing Events; want 3 (one per new file, none for the refused one)", n)
	}
}

// TestDeletionBudgetE2E puts the all-gone module in service with shadowing
// turned off: the lifecycle controller deletes exactly the budget's worth
// of NotReady Nodes; the others stay, each with a NodeDeletionDeferred
// Event.
func TestDeletionBudgetE2E(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	const budget = 2
	e := setup(t, wasmbuild.Go, simcloud.Options{}, withRolloutAndSafety(
		"{shadow: {disabled: true}}", fmt.Sprintf("{maxNodeDeletions: {count: %d, percent: 0, window: 10m}}", budget)))
	nodes := e.notReadyNodes(t, "budget", 5, 80)

	allGone, allGoneDigest := testModule(t, "allgone")
	e.swapModuleData(t, allGone)
	e.waitEvent(t, "Pod", "ModuleReloaded", allGoneDigest)
	eventually(t, 30*time.Second, "deletions up to the budget", func() (bool, error) {
		return len(e.existing(t, nodes)) <= len(nodes)-budget, nil
	})
	eventually(t, 30*time.Second, "a NodeDeletionDeferred Event on every remaining Node", func() (bool, error) {
		return len(e.events(t, podNamespace, "Node", "NodeDeletionDeferred")) >= len(nodes)-budget, nil
	})
	// Several more monitor periods: no further deletion.
	time.Sleep(5 * time.Second)
	left := e.existing(t, nodes)
	deferred := e.events(t, podNamespace, "Node", "NodeDeletionDeferred")
	if len(left) != len(nodes)-budget {
		t.Fatalf("%d of %d NotReady Nodes deleted; budget %d", len(nodes)-len(left), len(nodes), budget)
	}
	onNodes := map[string]bool{}
	for _, ev := range deferred {
		onNodes[ev.InvolvedObject.Name] = true
	}
	for _, name := range left {
		if !onNodes[name] {
			t.Errorf("Node %s stayed without a NodeDeletionDeferred Event", name)
		}
	}
	m := e.ccm.metrics(t, e.dir)
	if n := metricValue(m, "wasmccm_node_deletion_budget_admitted_total"); n != budget {
		t.Errorf("admitted_total = %v, want %d", n, budget)
	}
	podEvents := e.events(t, podNamespace, "Pod", "NodeDeletionDeferred")
	t.Logf("shadow off: %d of %d NotReady Nodes deleted (budget %d), %d deferred with %d Node Events and %d Pod Events, %v answers deferred",
		len(nodes)-len(left), len(nodes), budget, len(left), len(deferred), len(podEvents),
		metricValue(m, "wasmccm_node_deletion_budget_deferred_total"))
	if len(podEvents) == 0 {
		t.Error("no NodeDeletionDeferred Event on the CCM's Pod")
	}
}
