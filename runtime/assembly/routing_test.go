package assembly

import (
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// twoClouds is the routing of a hybrid cluster: simcloud Nodes by label,
// test Nodes by name, simcloud the default for both Nodes and Services,
// an appliance that serves a class and no Nodes.
const twoClouds = `
clusterName: demo
routes: sim
modules:
- name: sim
  module: {path: /modules/sim.wasm}
  nodes:
    providerIDPrefix: "simcloud://"
    selector: {matchLabels: {cloud: sim}}
    default: true
  loadBalancers: {default: true}
- name: test
  module: {path: /modules/test.wasm}
  nodes: {providerIDPrefix: "test://", namePattern: "test-*"}
  loadBalancers: {classes: [example.com/test]}
- name: appliance
  module: {path: /modules/appliance.wasm}
  loadBalancers: {classes: [example.com/appliance]}
`

func mustParse(t testing.TB, text string) *cloudconfig.File {
	t.Helper()
	cfg, err := cloudconfig.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestNodeModule(t *testing.T) {
	r := NewRouting(mustParse(t, twoClouds))
	node := func(name, providerID string, labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: providerID}}
	}
	for _, tc := range []struct {
		name string
		node *v1.Node
		want string // "" : no module
	}{
		{"provider ID decides", node("test-1", "simcloud://i-1", nil), "sim"},
		{"provider ID over labels", node("a", "test://a", map[string]string{"cloud": "sim"}), "test"},
		{"unknown scheme", node("test-2", "other://x", nil), ""},
		{"selector", node("a", "", map[string]string{"cloud": "sim"}), "sim"},
		{"name pattern", node("test-3", "", nil), "test"},
		{"first rule in order wins", node("test-4", "", map[string]string{"cloud": "sim"}), "sim"},
		{"default", node("stray", "", nil), "sim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := r.NodeModule(tc.node)
			if got != tc.want {
				t.Fatalf("module %q (%s), want %q", got, why, tc.want)
			}
			if got == "" && why == "" {
				t.Fatal("no module and no reason")
			}
		})
	}

	t.Run("no default", func(t *testing.T) {
		r := NewRouting(mustParse(t, strings.Replace(twoClouds, "default: true\n  loadBalancers", "\n  loadBalancers", 1)))
		if got, why := r.NodeModule(node("stray", "", nil)); got != "" || !strings.Contains(why, "no module has nodes.default") {
			t.Fatalf("module %q (%s), want none", got, why)
		}
	})
}

func TestOwnsProviderID(t *testing.T) {
	r := NewRouting(mustParse(t, twoClouds))
	for _, tc := range []struct {
		module, id string
		want       bool
	}{
		{"sim", "simcloud://i-1", true},
		{"sim", "test://i-1", false},
		{"test", "test://a", true},
		{"sim", "", false},
		{"appliance", "anything://x", false}, // serves no Nodes
	} {
		if got := r.OwnsProviderID(tc.module, tc.id); got != tc.want {
			t.Errorf("OwnsProviderID(%s, %q) = %v, want %v", tc.module, tc.id, got, tc.want)
		}
	}
}

func service(uid, class string, typ v1.ServiceType, finalizers ...string) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-" + uid, Namespace: "default", UID: types.UID(uid), Finalizers: finalizers},
		Spec:       v1.ServiceSpec{Type: typ},
	}
	if class != "" {
		svc.Spec.LoadBalancerClass = &class
	}
	return svc
}

func deleting(svc *v1.Service) *v1.Service {
	now := metav1.Now()
	svc.DeletionTimestamp = &now
	return svc
}

const lbFinalizer = "service.kubernetes.io/load-balancer-cleanup"

func TestServiceModule(t *testing.T) {
	r := NewRouting(mustParse(t, twoClouds))
	lb := v1.ServiceTypeLoadBalancer
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		want string
	}{
		{"no class: the default module", service("1", "", lb), "sim"},
		{"a served class", service("2", "example.com/test", lb), "test"},
		{"a class served by a module without Nodes", service("3", "example.com/appliance", lb), "appliance"},
		{"a class nobody here serves", service("4", "example.com/other", lb), ""},
		// The API server clears the class when the type changes; the
		// module that made the load balancer still deletes it.
		{"class cleared by a type change", service("2", "", v1.ServiceTypeClusterIP, lbFinalizer), "test"},
		{"its load balancer deleted", service("2", "", v1.ServiceTypeClusterIP), "test"},
		{"then forgotten", service("2", "", v1.ServiceTypeClusterIP), "sim"},
		{"a class Service being deleted", deleting(service("6", "example.com/test", lb, lbFinalizer)), "test"},
		{"deleted once its finalizer is gone", deleting(service("6", "example.com/test", lb)), "test"},
	} {
		if got := r.ServiceModule(tc.svc); got != tc.want {
			t.Errorf("%s: module %q, want %q", tc.name, got, tc.want)
		}
	}

	// Remembered: the Service whose load balancer is live. Not: those done
	// with theirs, and the one of a class nobody here serves.
	if want := map[types.UID]string{"3": "example.com/appliance"}; !maps.Equal(r.classOf, want) {
		t.Fatalf("classes remembered %v, want %v", r.classOf, want)
	}

	t.Run("no default", func(t *testing.T) {
		r := NewRouting(mustParse(t, strings.Replace(twoClouds, "loadBalancers: {default: true}", "loadBalancers: {classes: [example.com/sim]}", 1)))
		if got := r.ServiceModule(service("5", "", lb)); got != "" {
			t.Fatalf("a Service without class went to %q with no default module", got)
		}
	})
}

// TestServiceView checks what each module's upstream service controller
// sees: its own Services without their class (the controller skips any
// with one), every other as a bare ClusterIP Service it never acts on.
func TestServiceView(t *testing.T) {
	r := NewRouting(mustParse(t, twoClouds))
	lb := v1.ServiceTypeLoadBalancer
	view := func(module string, svc *v1.Service) *v1.Service {
		t.Helper()
		out, err := r.ServiceView(module)(svc)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*v1.Service)
	}
	mine := view("test", service("1", "example.com/test", lb, lbFinalizer))
	if mine.Spec.LoadBalancerClass != nil || mine.Spec.Type != lb || len(mine.Finalizers) != 1 {
		t.Fatalf("the module's own Service is shown as %+v", mine)
	}
	for _, module := range []string{"sim", "appliance"} {
		other := view(module, service("1", "example.com/test", lb, lbFinalizer))
		if other.Spec.Type != v1.ServiceTypeClusterIP || len(other.Finalizers) != 0 || other.UID != "1" {
			t.Fatalf("module %s is shown test's Service as %+v", module, other)
		}
	}
	if got := view("sim", service("2", "", lb)); got.Spec.Type != lb {
		t.Fatalf("the default module is not shown a Service without class: %+v", got)
	}
	if got, err := r.ServiceView("sim")("not a service"); err != nil || got != "not a service" {
		t.Fatalf("other objects are not passed through: %v, %v", got, err)
	}
}
