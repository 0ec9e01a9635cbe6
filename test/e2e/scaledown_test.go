package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// TestScaleDownE2E runs a 100-Node cluster with the default deletion
// budget (one Node per ten minutes at this size) through the two cases the
// budget must tell apart:
//
//   - a bad update: ten Nodes' machines are stopped (NotReady), and a new
//     module that reads "stopped" as "terminated" is put in service with
//     shadowing off. Ready Nodes are still answered present, so only the
//     previous module's second opinion stands between it and ten deletions:
//     at most the budget's one Node may go;
//   - then a scale-down: 20 instances are deleted in the cloud at once and
//     their Nodes turn NotReady. Both modules agree they are gone and Ready
//     Nodes are answered present, so all 20 Node objects must go within ten
//     minutes (the budget alone would take over three hours).
func TestScaleDownE2E(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	e := setup(t, wasmbuild.Go, simcloud.Options{}, withRollout("{shadow: {disabled: true}}"))
	const size = 100
	var names []string
	ids := map[string]string{}
	for i := range size {
		name := fmt.Sprintf("scale-%d", i)
		ids[name] = e.addInstanceAndNode(name, "sim-1a", fmt.Sprintf("10.244.%d.0/24", 100+i)).ID
		names = append(names, name)
	}
	for _, name := range names {
		e.waitInitialized(t, name)
	}

	stopped := names[:10]
	for _, name := range stopped {
		if err := e.cloud.SetInstanceState(ids[name], "stopped"); err != nil {
			t.Fatal(err)
		}
		e.setReady(name, v1.ConditionFalse)
	}
	wasm, digest := testModule(t, "stoppedgone")
	e.swapModuleData(t, wasm)
	e.waitEvent(t, "Pod", "ModuleReloaded", digest)
	eventually(t, 30*time.Second, "a NodeDeletionDeferred Event naming the previous module", func() (bool, error) {
		for _, ev := range e.events(t, podNamespace, "Node", "NodeDeletionDeferred") {
			if strings.Contains(ev.Message, "previous module") {
				return true, nil
			}
		}
		return false, nil
	})
	// Twenty more monitor periods.
	time.Sleep(20 * time.Second)
	badDeleted := len(stopped) - len(e.existing(t, stopped))
	if badDeleted > 1 {
		t.Fatalf("bad update: %d of %d stopped Nodes deleted; the budget is 1", badDeleted, len(stopped))
	}

	removed := names[10:30]
	start := time.Now()
	for _, name := range removed {
		if err := e.cloud.DeleteInstance(ids[name]); err != nil {
			t.Fatal(err)
		}
		e.setReady(name, v1.ConditionFalse)
	}
	eventually(t, 10*time.Minute, "the 20 scaled-down Nodes deleted", func() (bool, error) {
		return len(e.existing(t, removed)) == 0, nil
	})
	took := time.Since(start)
	if left := len(stopped) - len(e.existing(t, stopped)); left != badDeleted {
		t.Fatalf("stopped Nodes deleted during the scale-down: %d, before it %d", left, badDeleted)
	}
	m := e.ccm.metrics(t, e.dir)
	t.Logf("bad update (stopped read as gone, shadowing off, %d Nodes): %d of %d stopped Nodes deleted (budget 1); scale-down: 20 of %d Nodes deleted in %s; admitted_total=%v corroborated_total=%v deferred_total=%v",
		size, badDeleted, len(stopped), size, took.Round(time.Second),
		metricValue(m, "wasmccm_node_deletion_budget_admitted_total"),
		metricValue(m, "wasmccm_node_deletion_budget_corroborated_total"),
		metricValue(m, "wasmccm_node_deletion_budget_deferred_total"))
}
