package assembly

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"

	"github.com/wasmccm/wasmccm/internal/lifecycletest"
)

// TestModuleThatCannotStartWaitsAlone: the test module's file is missing
// at the start. The CCM starts with sim serving; the test module's Nodes
// and Services get errors (never an answer), its metric says so, and once
// its file is there its retried start makes it serve.
func TestModuleThatCannotStartWaitsAlone(t *testing.T) {
	retryFirst = 50 * time.Millisecond
	t.Cleanup(func() { retryFirst = 10 * time.Second })
	cfg, _ := hybridConfig(t, "simcloud://")
	testPath := cfg.Entry("test").Module.Path
	data, err := os.ReadFile(testPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(testPath, testPath+".away"); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), cfg, nil, nil)
	if err != nil {
		t.Fatalf("one module missing stopped the CCM: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if mods := c.Modules(); len(mods) != 1 || mods[0].Name != "sim" {
		t.Fatalf("started modules %v, want sim alone", mods)
	}
	var mu sync.Mutex
	var each []string // what runs once per module, such as its sweep
	c.EachStarted(func(m Served) {
		mu.Lock()
		defer mu.Unlock()
		each = append(each, m.Name)
	})
	if got, _ := testutil.GetGaugeMetricValue(moduleStarted.WithLabelValues("test")); got != 0 {
		t.Fatalf("wasmccm_multimodule_module_started{module=test} = %v, want 0", got)
	}

	servers := c.NodeServers(informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes())
	if len(servers) != 2 {
		t.Fatalf("%d Node servers, want one per module, started or not", len(servers))
	}
	ctx := context.Background()
	testNode := &v1.Node{Spec: v1.NodeSpec{ProviderID: "test://test-b"}}
	testNode.Name = "test-b"
	simInstances, _ := servers[0].Cloud.InstancesV2()
	testInstances, _ := servers[1].Cloud.InstancesV2()
	if _, err := testInstances.InstanceExists(ctx, testNode); !errors.Is(err, errNotStarted) || !strings.Contains(err.Error(), "test.wasm") {
		t.Fatalf("a Node of the module not started: %v; want errNotStarted with the reason", err)
	}
	simNode := &v1.Node{Spec: v1.NodeSpec{ProviderID: "simcloud://i-0"}}
	simNode.Name = "sim-x"
	if _, err := simInstances.InstanceExists(ctx, simNode); errors.Is(err, errNotStarted) {
		t.Fatalf("module sim's Node: %v", err)
	}
	testLB, _ := loadBalancers(c)["test"].LoadBalancer()
	svc := service("1", "", v1.ServiceTypeLoadBalancer)
	if _, err := testLB.EnsureLoadBalancer(ctx, "kubernetes", svc, nil); !errors.Is(err, errNotStarted) {
		t.Fatalf("a Service of the module not started: %v; want errNotStarted", err)
	}

	lifecycletest.WriteFile(t, testPath, data)
	deadline := time.Now().Add(30 * time.Second)
	for c.module("test") == nil {
		if time.Now().After(deadline) {
			t.Fatal("the test module did not start once its file was back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if exists, err := testInstances.InstanceExists(ctx, testNode); err != nil || !exists {
		t.Fatalf("after its start, the test module's Node: %v, %v", exists, err)
	}
	if _, err := testLB.EnsureLoadBalancer(ctx, "kubernetes", svc, nil); err != nil {
		t.Fatalf("after its start, the test module's load balancer: %v", err)
	}
	mu.Lock()
	if !slices.Equal(each, []string{"sim", "test"}) {
		t.Errorf("EachStarted called for %v, want sim then test", each)
	}
	mu.Unlock()
	if got, _ := testutil.GetGaugeMetricValue(moduleStarted.WithLabelValues("test")); got != 1 {
		t.Fatalf("wasmccm_multimodule_module_started{module=test} = %v, want 1", got)
	}
}

// TestNoModuleStarts: with no module able to start, the CCM stops with
// every reason.
func TestNoModuleStarts(t *testing.T) {
	cfg := mustParse(t, twoClouds)
	_, err := Start(context.Background(), cfg, nil, nil)
	if err == nil {
		t.Fatal("started with no module file")
	}
	for _, name := range []string{"module sim", "module test", "module appliance"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}
