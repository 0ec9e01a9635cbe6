package multimodule

import (
	"fmt"
	"path"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
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

// NewRouting returns the routing of a validated Config.
func NewRouting(cfg *Config) *Routing {
	r := &Routing{classes: map[string]string{}, targetsAll: map[string]bool{}, classOf: map[types.UID]string{}}
	for _, m := range cfg.Modules {
		if m.Nodes.serves() {
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
		r.targetsAll[m.Name] = m.LoadBalancers.Targets == TargetsAll || (m.LoadBalancers.Targets == "" && !m.Nodes.serves())
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
// the class it had, as long as the process saw it.
func (r *Routing) ServiceModule(svc *v1.Service) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := len(svc.Finalizers) == 0 && (svc.DeletionTimestamp != nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer)
	if class := svc.Spec.LoadBalancerClass; class != nil {
		module := r.classes[*class]
		// Only a class served here is remembered, and only until the
		// Service is done with its load balancer: the memory stays as
		// small as the Services this process serves by class.
		if module != "" && !done {
			r.classOf[svc.UID] = *class
		} else {
			delete(r.classOf, svc.UID)
		}
		return module
	}
	if class, ok := r.classOf[svc.UID]; ok {
		if done {
			delete(r.classOf, svc.UID) // its load balancer is gone
		}
		return r.classes[class]
	}
	return r.lbDefault
}

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
