package assembly

import (
	"bytes"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// TestExampleHybridConfig parses examples/hybrid/cloud-config.yaml and
// checks that it routes as its comments say.
func TestExampleHybridConfig(t *testing.T) {
	data, err := os.ReadFile("../../examples/hybrid/cloud-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cloudconfig.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sole() {
		t.Fatal("the example is not taken for a cloud-config of several modules")
	}
	for _, m := range cfg.Modules {
		if want := "wasmccm-last-known-good-" + m.Name; m.Module.LastKnownGood.Name != want {
			t.Errorf("module %s: last-known-good record %q, want %q", m.Name, m.Module.LastKnownGood.Name, want)
		}
	}
	r := NewRouting(cfg)
	node := func(name, providerID string, labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: providerID}}
	}
	for _, c := range []struct {
		node *v1.Node
		want string
	}{
		{node("sim-1", "", map[string]string{"wasmccm.io/cloud": "sim"}), "sim"},
		{node("hc-1", "", nil), "hcloud"},
		{node("hc-2", "", map[string]string{"wasmccm.io/cloud": "sim"}), "sim"}, // sim's rule comes first
		{node("sim-2", "hcloud://42", map[string]string{"wasmccm.io/cloud": "sim"}), "hcloud"},
		{node("bare-metal-1", "", nil), ""},
	} {
		if got, why := r.NodeModule(c.node); got != c.want {
			t.Errorf("Node %s (provider ID %q, labels %v): module %q (%s), want %q", c.node.Name, c.node.Spec.ProviderID, c.node.Labels, got, why, c.want)
		}
	}
	service := func(class string) *v1.Service {
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + class)}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
		if class != "" {
			svc.Spec.LoadBalancerClass = &class
		}
		return svc
	}
	for class, want := range map[string]string{"": "sim", "example.com/hcloud": "hcloud", "example.com/other": ""} {
		if got := r.ServiceModule(service(class)); got != want {
			t.Errorf("Service of class %q: module %q, want %q", class, got, want)
		}
	}
	if r.TargetsAll("sim") || r.TargetsAll("hcloud") {
		t.Error("a module that serves Nodes targets every Node by default")
	}
}
