package assembly

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmccm/wasmccm/runtime/cloudconfig"
)

// Routing decides which module serves a Node and which a Service, from
// the cloud-config's rules alone: it is pure but for what it remembers of
// Services' classes (see ServiceModule).
type Routing struct {
	nodes       []nodeRoute
	nodeDefault string
	classes     map[string]string
	lbDefault   string
	targetsAll  map[string]bool

	// classOf remembers the class a Service had: the API server clears
	// spec.loadBalancerClass when a Service stops being of type
	// LoadBalancer, and the module that made its load balancer must still
	// be the one to delete it.
	mu      sync.Mutex
	classOf map[types.UID]string
}

type nodeRoute struct {
	module, prefix, pattern string
	selector                labels.Selector
}

// NewRouting returns the routing of a validated cloud-config of several
// modules.
func NewRouting(cfg *cloudconfig.File) *Routing {
	r := &Routing{classes: map[string]string{}, targetsAll: map[string]bool{}, classOf: map[types.UID]string{}}
	for _, m := range cfg.Modules {
		if m.Nodes.Serves() {
			route := nodeRoute{module: m.Name, prefix: m.Nodes.ProviderIDPrefix, pattern: m.Nodes.NamePattern}
			if m.Nodes.Selector != nil {
				route.selector, _ = metav1.LabelSelectorAsSelector(m.Nodes.Selector) // validated
			}
			r.nodes = append(r.nodes, route)
			if m.Nodes.Default {
				r.nodeDefault = m.Name
			}
		}
		for _, class := range m.LoadBalancers.Classes {
			r.classes[class] = m.Name
		}
		if m.LoadBalancers.Default {
			r.lbDefault = m.Name
		}
		r.targetsAll[m.Name] = m.LoadBalancers.Targets == cloudconfig.TargetsAll || (m.LoadBalancers.Targets == "" && !m.Nodes.Serves())
	}
	return r
}

// NodeModule returns the module that serves node, or "" and why none
// does.
func (r *Routing) NodeModule(node *v1.Node) (module, why string) {
	if id := node.Spec.ProviderID; id != "" {
		for _, route := range r.nodes {
			if strings.HasPrefix(id, route.prefix) {
				return route.module, ""
			}
		}
		return "", fmt.Sprintf("no module's nodes.providerIDPrefix starts its provider ID %q", id)
	}
	for _, route := range r.nodes {
		if route.matches(node) {
			return route.module, ""
		}
	}
	if r.nodeDefault != "" {
		return r.nodeDefault, ""
	}
	return "", "it has no provider ID yet, no module's nodes.selector or nodes.namePattern matches it and no module has nodes.default"
}

// matches reports whether a Node without a provider ID meets the route's
// selector and name pattern; a route with neither matches none.
func (n nodeRoute) matches(node *v1.Node) bool {
	if n.selector == nil && n.pattern == "" {
		return false
	}
	if n.selector != nil && !n.selector.Matches(labels.Set(node.Labels)) {
		return false
	}
	if n.pattern != "" {
		if ok, _ := path.Match(n.pattern, node.Name); !ok {
			return false
		}
	}
	return true
}

// OwnsProviderID reports whether a provider ID is one module may answer
// for a Node.
func (r *Routing) OwnsProviderID(module, providerID string) bool {
	for _, route := range r.nodes {
		if route.module == module {
			return strings.HasPrefix(providerID, route.prefix)
		}
	}
	return false
}

// ServiceModule returns the module that makes svc's load balancer, or ""
// when none here does: its class is served by no module, or it has none
// and no module is the default. A Service that no longer has a class
// because it stopped being of type LoadBalancer stays with the module of
// the class it had, as long as the process saw it (ClassLost otherwise).
func (r *Routing) ServiceModule(svc *v1.Service) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serviceModule(svc, true)
}

// serviceModule is ServiceModule, remembering svc's class when remember
// is set.
func (r *Routing) serviceModule(svc *v1.Service, remember bool) string {
	done := len(svc.Finalizers) == 0 && (svc.DeletionTimestamp != nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer)
	if class := svc.Spec.LoadBalancerClass; class != nil {
		module := r.classes[*class]
		// Only a class served here is remembered, and only until the
		// Service is done with its load balancer: the memory stays as
		// small as the Services this process serves by class.
		switch {
		case !remember:
		case module != "" && !done:
			r.classOf[svc.UID] = *class
		default:
			delete(r.classOf, svc.UID)
		}
		return module
	}
	if class, ok := r.classOf[svc.UID]; ok {
		if remember && done {
			delete(r.classOf, svc.UID) // its load balancer is gone
		}
		return r.classes[class]
	}
	return r.lbDefault
}

// ClassLost reports whether svc may have had a class that no one
// remembers: it is no longer of type LoadBalancer, so the API server
// cleared its class, and this process did not see it with one (it
// changed while no CCM ran). Its load balancer may be any module's.
func (r *Routing) ClassLost(svc *v1.Service) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, known := r.classOf[svc.UID]
	return svc.Spec.LoadBalancerClass == nil && svc.Spec.Type != v1.ServiceTypeLoadBalancer && !known
}

// Keeps returns whether a Service keeps a load balancer module listed
// for it from module's orphan sweep: while it wants a load balancer from
// any module here, and while it holds the cleanup finalizer for module's
// service controller. A load balancer made for a Service that wants one
// from another module is kept too: modules sharing a cloud account list
// each other's, and nothing in a listing says which module made it. A
// Service done with load balancers (not of type LoadBalancer, its class
// lost or another module's to clean up), or of a class no module here
// serves, keeps none.
func (r *Routing) Keeps(module string) func(*v1.Service) bool {
	return func(svc *v1.Service) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		served := r.serviceModule(svc, false)
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil {
			return served != ""
		}
		return served == module && slices.Contains(svc.Finalizers, loadBalancerCleanupFinalizer)
	}
}

// loadBalancerCleanupFinalizer is the upstream service controller's
// (k8s.io/cloud-provider/service/helpers.LoadBalancerCleanupFinalizer).
const loadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// TargetsAll reports whether module's load balancers get every Node
// rather than its own (LoadBalancerRule.Targets).
func (r *Routing) TargetsAll(module string) bool { return r.targetsAll[module] }

// ServiceView is the transform (cache.TransformFunc) of the Service
// informer given to module's service controller, the upstream one of
// k8s.io/cloud-provider: that controller serves only Services without a
// class, so the module's Services are shown to it without theirs, and
// every other Service as a bare ClusterIP Service, which it never acts
// on.
func (r *Routing) ServiceView(module string) func(any) (any, error) {
	return func(obj any) (any, error) {
		svc, ok := obj.(*v1.Service)
		if !ok {
			return obj, nil
		}
		if r.ServiceModule(svc) != module {
			return &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, UID: svc.UID, ResourceVersion: svc.ResourceVersion},
				Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP},
			}, nil
		}
		svc.Spec.LoadBalancerClass = nil
		return svc, nil
	}
}
