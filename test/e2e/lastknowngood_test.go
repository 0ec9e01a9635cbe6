package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
)

// restartCCM stops the CCM and starts it again with the same flags, as a
// Pod restart does.
func (e *env) restartCCM(t *testing.T, name string) {
	t.Helper()
	flags := e.ccm.cmd.Args[1 : len(e.ccm.cmd.Args)-1] // without --secure-port
	e.ccm.stop()
	e.ccm = startCCM(t, e.dir, name, flags)
}

// TestLastKnownGoodRestartE2E restarts the CCM, with NotReady Nodes whose
// instances exist, first with a module answering "gone" for every Node
// (served from the start only in shadow, against the recorded module, and
// rejected: no Node deleted), then with a corrupt module file (the
// recorded module serves, with an Event, and initializes a Node that joins
// afterwards).
func TestLastKnownGoodRestartE2E(t *testing.T) {
	t.Setenv("POD_NAMESPACE", podNamespace)
	t.Setenv("POD_NAME", podName)
	e := setup(t, wasmbuild.Go, simcloud.Options{}, withRollout("{shadow: {duration: 3s, calls: 10}, rollback: {window: 5s}}"))
	nodes := e.notReadyNodes(t, "lkg", 3, 80)
	ctx := context.Background()

	served, err := os.ReadFile(filepath.Join(e.dir, "module", "simcloud.wasm.gz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(served)
	servedDigest := hex.EncodeToString(sum[:])
	eventually(t, 60*time.Second, "the module in service recorded as last-known-good", func() (bool, error) {
		cm, err := e.client.CoreV1().ConfigMaps(podNamespace).Get(ctx, "wasmccm-last-known-good", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cm.Data["sha256"] == servedDigest, err
	})

	// Restart with a module that calls every Node gone.
	allGone, allGoneDigest := testModule(t, "allgone")
	e.ccm.stop()
	e.swapModuleData(t, allGone)
	e.restartCCM(t, "ccm-allgone")
	ev := e.waitEvent(t, "Pod", "ModuleRejected", allGoneDigest, "instance_exists(lkg-", "in service true, new false")
	time.Sleep(3 * time.Second) // more monitor periods, had the lifecycle controller been told
	if left := e.existing(t, nodes); len(left) != len(nodes) {
		t.Fatalf("restart with the all-gone module: %d of %d NotReady Nodes deleted", len(nodes)-len(left), len(nodes))
	}
	m := e.ccm.metrics(t, e.dir)
	if n := metricValue(m, "wasmccm_module_starts_total", `reason="shadowing"`, `served="last_known_good"`); n != 1 {
		t.Fatalf("wasmccm_module_starts_total{served=last_known_good,reason=shadowing} = %v, want 1", n)
	}
	t.Logf("restart with the all-gone module: 0 of %d NotReady Nodes deleted; event: %s", len(nodes), ev.Message)

	// Restart with a corrupt module file.
	e.ccm.stop()
	e.swapModuleData(t, []byte("this is not a wasm module"))
	e.restartCCM(t, "ccm-corrupt")
	ev = e.waitEvent(t, "Pod", "ModuleStart", "configured module rejected at start, last-known-good "+servedDigest)
	e.addInstanceAndNode("lkg-joined", "sim-1b", "10.244.90.0/24")
	node := e.waitInitialized(t, "lkg-joined")
	m = e.ccm.metrics(t, e.dir)
	if n := metricValue(m, "wasmccm_module_starts_total", `reason="configured_unusable"`, `served="last_known_good"`); n != 1 {
		t.Fatalf("wasmccm_module_starts_total{served=last_known_good,reason=configured_unusable} = %v, want 1", n)
	}
	if left := e.existing(t, nodes); len(left) != len(nodes) {
		t.Fatalf("restart with a corrupt module: %d of %d NotReady Nodes deleted", len(nodes)-len(left), len(nodes))
	}
	t.Logf("restart with a corrupt module: running on the last-known-good, Node %s initialized (provider ID %s); event: %s",
		node.Name, node.Spec.ProviderID, ev.Message)
}
