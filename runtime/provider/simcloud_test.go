package provider

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/wasmccm/wasmccm/examples/simcloud"
	"github.com/wasmccm/wasmccm/internal/lifecycletest"
	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// The tests of the adapter over a real module run the first-party
// simcloud module against an in-process simulated cloud, and replace it
// with the variants the end-to-end suite uses (test/e2e/testdata).

// simcloudEnv is a Cloud running the simcloud module, with nodes
// instances in the simulated cloud and their Nodes in a synced Node cache.
type simcloudEnv struct {
	c      *Cloud
	cloud  *simcloud.Cloud
	client *fake.Clientset
	nodes  []*v1.Node
	// instances maps Node names to instance IDs.
	instances map[string]string
}

// simcloudGrants starts a simulated cloud and returns it with the
// cloud-config grants the simcloud module needs to reach it.
func simcloudGrants(t testing.TB) (*simcloud.Cloud, func(*cloudconfig.Config)) {
	t.Helper()
	cloud, g := lifecycletest.Simcloud(t)
	return cloud, func(cfg *cloudconfig.Config) {
		cfg.HTTP.AllowedOrigins = []string{g.Origin}
		cfg.Credentials = g.Credentials
		cfg.ProviderConfig = g.ProviderConfig
	}
}

func newSimcloudEnv(t testing.TB, nodes int, rollout cloudconfig.Rollout) *simcloudEnv {
	t.Helper()
	cloud, grants := simcloudGrants(t)
	wasm, _ := lifecycletest.SimcloudModule(t, "simcloud")
	c := newCloud(t, wasm, func(cfg *cloudconfig.Config) {
		grants(cfg)
		cfg.Module.Rollout = rollout
	})
	client := fake.NewClientset()
	e := &simcloudEnv{c: c, cloud: cloud, client: client, instances: map[string]string{}}
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

// replace writes a new module file and runs one poll
// (lifecycle.Manager.Reload).
func (e *simcloudEnv) replace(t testing.TB, pkg string) {
	t.Helper()
	wasm, _ := lifecycletest.SimcloudModule(t, pkg)
	lifecycletest.WriteFile(t, e.c.cfg.Module.Path, wasm)
	e.c.modules.Reload(context.Background())
}

// requests is the number of requests the simulated cloud has had.
func requests(e *simcloudEnv) int {
	n := 0
	for _, c := range e.cloud.Counters().Requests {
		n += c
	}
	return n
}
