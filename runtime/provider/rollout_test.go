package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/wasmbuild"
	"github.com/wasmccm/wasmccm/runtime/credentials"
	"github.com/wasmccm/wasmccm/runtime/deletion"
	"github.com/wasmccm/wasmccm/runtime/lifecycle"
)

// The rollout tests run the first-party simcloud module against an
// in-process simulated cloud, and replace it with the variants the
// end-to-end suite uses (test/e2e/testdata).

func simcloudModule(t testing.TB, pkg string) ([]byte, string) {
	t.Helper()
	dir := filepath.Join("..", "..", "test", "e2e", "testdata", pkg)
	if pkg == "simcloud" {
		dir = filepath.Join("..", "..", "modules", "simcloud", "module")
	}
	path, err := wasmbuild.Build(dir, wasmbuild.Go)
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

// rolloutEnv is a Cloud running the simcloud module, with nodes instances
// in the simulated cloud and their Nodes in a synced Node cache.
type rolloutEnv struct {
	c      *Cloud
	cloud  *simcloud.Cloud
	client *fake.Clientset
	nodes  []*v1.Node
	// instances maps Node names to instance IDs.
	instances map[string]string
	digest    string
}

// simcloudGrants starts a simulated cloud and returns it with the
// cloud-config grants the simcloud module needs to reach it.
func simcloudGrants(t testing.TB) (*simcloud.Cloud, func(*Config)) {
	t.Helper()
	cloud := simcloud.New(simcloud.Options{Token: "t"})
	srv := httptest.NewServer(cloud.Handler())
	t.Cleanup(srv.Close)
	creds := t.TempDir()
	writeFile(t, filepath.Join(creds, "token"), []byte("t"))
	return cloud, func(cfg *Config) {
		cfg.HTTP.AllowedOrigins = []string{srv.URL}
		cfg.Credentials = CredentialsConfig{Dir: creds, Auth: []credentials.AuthConfig{{Name: "token", Origins: []string{srv.URL}, Bearer: &credentials.BearerAuth{Key: "token"}}}}
		cfg.ProviderConfig = []byte(fmt.Sprintf(`{"endpoint":%q,"tokenCredential":"token"}`, srv.URL))
	}
}

// newRolloutEnv's mutate, if any, changes the cloud-config after the
// grants are in it.
func newRolloutEnv(t testing.TB, nodes int, rollout RolloutConfig, mutate ...func(*Config)) *rolloutEnv {
	t.Helper()
	cloud, grants := simcloudGrants(t)
	wasm, digest := simcloudModule(t, "simcloud")
	c := newCloud(t, wasm, func(cfg *Config) {
		grants(cfg)
		cfg.Module.Rollout = rollout
		for _, m := range mutate {
			m(cfg)
		}
	})
	client := fake.NewClientset()
	e := &rolloutEnv{c: c, cloud: cloud, client: client, instances: map[string]string{}, digest: digest}
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		in, err := cloud.AddInstance(simcloud.Instance{Name: name, Zone: "sim-1a", Region: "sim-1", State: "running"})
		if err != nil {
			t.Fatal(err)
		}
		e.instances[name] = in.ID
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
		if _, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.nodes = append(e.nodes, node)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c.SetInformers(factory)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	return e
}

// replace writes a new module file and runs one poll.
func (e *rolloutEnv) replace(t testing.TB, pkg string) string {
	t.Helper()
	wasm, digest := simcloudModule(t, pkg)
	writeFile(t, e.c.cfg.Module.Path, wasm)
	e.c.reloadIfChanged(context.Background())
	return digest
}

// poll runs the reload goroutine's work until done holds.
func (e *rolloutEnv) poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		e.c.reloadIfChanged(context.Background())
		e.c.advanceRollout(context.Background())
		if done() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// existsAll asks InstanceExists about every Node, as the lifecycle
// controller does about NotReady ones, and fails on any answer but true.
func (e *rolloutEnv) existsAll(t *testing.T) {
	t.Helper()
	i, _ := e.c.InstancesV2()
	for _, n := range e.nodes {
		if ok, err := i.InstanceExists(context.Background(), n); !ok || err != nil {
			t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, ok, err)
		}
	}
}

func statsOf(r *rollout) lifecycle.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

var fastShadow = RolloutConfig{Shadow: ShadowConfig{Duration: metav1.Duration{Duration: 50 * time.Millisecond}, Calls: 6}}

// TestShadowRejectsDestructiveCandidate: the candidate answers "gone" for
// every Node. There is no controller traffic (every Node is Ready), so the
// probe at the end of the shadow period finds it; it is rejected, the old
// module stays, and the same file is not tried again.
func TestShadowRejectsDestructiveCandidate(t *testing.T) {
	e := newRolloutEnv(t, 3, fastShadow)
	bad := e.replace(t, "allgone")
	if e.c.candidate() != bad || e.c.served.Digest != e.digest {
		t.Fatalf("candidate %q, loaded %q: the new module must be in shadow, not in service", e.c.candidate(), e.c.served.Digest)
	}
	shadow := e.c.rollout.Load()
	e.poll(t, "rejection", func() bool { return e.c.rollout.Load() == nil })
	seen := statsOf(shadow)
	if e.c.served.Digest != e.digest || e.c.refused.digest != bad {
		t.Fatalf("loaded %q rejected %q; want the old module in service and the new one refused", e.c.served.Digest, e.c.refused)
	}
	if seen.ByVerdict[lifecycle.Destructive] == 0 || len(seen.First) == 0 || seen.First[0].Export != "instance_exists" {
		t.Fatalf("comparison %s, first %v: want destructive InstanceExists disagreements", seen, seen.First)
	}
	t.Logf("rejected after %s; first disagreement: %s", seen, seen.First[0])
	e.existsAll(t)
	e.c.reloadIfChanged(context.Background())
	if e.c.rollout.Load() != nil {
		t.Fatal("the rejected file was taken into shadow again")
	}
}

// TestShadowPromotesBenignChange: the candidate adds a label. Controller
// traffic is compared, only benign differences appear, and after the
// shadow period the candidate is promoted and answers with the label.
func TestShadowPromotesBenignChange(t *testing.T) {
	e := newRolloutEnv(t, 3, fastShadow)
	next := e.replace(t, "relabel")
	i, _ := e.c.InstancesV2()
	for range 2 {
		e.existsAll(t)
		for _, n := range e.nodes {
			meta, err := i.InstanceMetadata(context.Background(), n)
			if err != nil || meta.AdditionalLabels["simcloud.example/generation"] != "" {
				t.Fatalf("in shadow, InstanceMetadata = %+v, %v: the old module must answer", meta, err)
			}
		}
	}
	shadow := e.c.rollout.Load()
	e.poll(t, "promotion", func() bool { return e.c.served.Digest == next })
	seen := statsOf(shadow)
	if seen.ByVerdict[lifecycle.Destructive] != 0 || seen.ByVerdict[lifecycle.Benign] == 0 || seen.ByVerdict[lifecycle.Agree] == 0 {
		t.Fatalf("comparison %s: want agreements and benign differences only", seen)
	}
	meta, err := i.InstanceMetadata(context.Background(), e.nodes[0])
	if err != nil || meta.AdditionalLabels["simcloud.example/generation"] != "2" {
		t.Fatalf("after promotion, InstanceMetadata = %+v, %v", meta, err)
	}
	if r := e.c.rollout.Load(); r == nil || r.phase != lifecycle.Probation {
		t.Fatal("the previous module must be kept for the rollback window")
	}
	t.Logf("promoted after %s", seen)
}

// TestRollbackOnTraps: shadowing off, the new module is promoted at once;
// it traps on every call about a marked Node, so the host puts the
// previous module back, which answers those calls, and refuses the file.
func TestRollbackOnTraps(t *testing.T) {
	e := newRolloutEnv(t, 2, RolloutConfig{
		Shadow:   ShadowConfig{Disabled: true},
		Rollback: RollbackConfig{MinCalls: 4, FailurePercent: 50},
	})
	bad := e.replace(t, "trapmarked")
	if e.c.served.Digest != bad {
		t.Fatal("with shadowing disabled the new module must be in service at once")
	}
	i, _ := e.c.InstancesV2()
	marked := e.nodes[0].DeepCopy()
	marked.Labels = map[string]string{"e2e.wasmccm.io/trap": "true"}
	for range 4 {
		if ok, err := i.InstanceExists(context.Background(), marked); ok || err == nil {
			t.Fatalf("trapping call answered %v, %v; want an error", ok, err)
		}
	}
	e.c.advanceRollout(context.Background())
	if e.c.served.Digest != e.digest || e.c.refused.digest != bad || e.c.rollout.Load() != nil {
		t.Fatalf("loaded %q rejected %q: want a rollback to %q", e.c.served.Digest, e.c.refused, e.digest)
	}
	if ok, err := i.InstanceExists(context.Background(), marked); !ok || err != nil {
		t.Fatalf("after rollback InstanceExists = %v, %v", ok, err)
	}
	e.c.reloadIfChanged(context.Background())
	if e.c.served.Digest != e.digest || e.c.rollout.Load() != nil {
		t.Fatal("the rolled-back file was taken again")
	}
}

// TestDeletionBudgetOverModule: the all-gone module in service (shadowing
// off) with a budget of two Nodes: two Nodes are answered gone, however
// often they are asked, and every other answer becomes an error.
func TestDeletionBudgetOverModule(t *testing.T) {
	e := newRolloutEnv(t, 5, RolloutConfig{Shadow: ShadowConfig{Disabled: true}})
	e.c.budget = deletion.NewBudget(DeletionBudgetConfig{Count: intp(2), Percent: intp(0)})
	e.replace(t, "allgone")
	i, _ := e.c.InstancesV2()
	gone := map[string]bool{}
	for range 3 {
		for _, n := range e.nodes {
			exists, err := i.InstanceExists(context.Background(), n)
			switch {
			case err == nil && !exists:
				gone[n.Name] = true
			case err == nil || exists:
				t.Fatalf("InstanceExists(%s) = %v, %v", n.Name, exists, err)
			}
		}
	}
	if len(gone) != 2 || !gone["node-0"] || !gone["node-1"] {
		t.Fatalf("answered gone for %v; want node-0 and node-1 only", gone)
	}
}

// TestRejectionCoversSignature: a module file whose signature has not
// arrived yet is rejected once, not at every poll, and checked again when
// the signature arrives, although the module file did not change.
func TestRejectionCoversSignature(t *testing.T) {
	publicKey, signature := signer(t)
	dir := t.TempDir()
	pubPath, sigPath := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "provider.wasm.sig")
	writeFile(t, pubPath, publicKey)
	sign := func(b []byte) { writeFile(t, sigPath, signature(b)) }
	wasm := guest(t, "testprovider")
	sign(wasm)
	c := newCloud(t, wasm, func(cfg *Config) {
		cfg.Module.PublicKeyPath, cfg.Module.SignaturePath = pubPath, sigPath
		cfg.Module.Rollout = RolloutConfig{Shadow: ShadowConfig{Disabled: true}}
	})
	ctx := context.Background()

	// The new module (the same code, gzipped) lands before its signature.
	next := gz(t, wasm)
	writeFile(t, c.cfg.Module.Path, next)
	sum := sha256.Sum256(next)
	nextDigest := hex.EncodeToString(sum[:])
	rejections := func() float64 { v, _ := testutil.GetCounterMetricValue(reloads.WithLabelValues("rejected")); return v }
	before := rejections()
	for range 3 {
		c.reloadIfChanged(ctx)
	}
	if got := rejections() - before; got != 1 || c.served.Digest == nextDigest {
		t.Fatalf("%v rejections over three polls, loaded %s; want one rejection and the old module in service", got, c.served.Digest)
	}
	sign(next)
	c.reloadIfChanged(ctx)
	if c.served.Digest != nextDigest {
		t.Fatalf("loaded %s after the signature arrived, want %s", c.served.Digest, nextDigest)
	}
}
