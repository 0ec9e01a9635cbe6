package assembly

import (
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/wasmccm/wasmccm/runtime/events"
)

// NodeServer is what one set of upstream Node controllers (cloud-node,
// cloud-node-lifecycle) runs over: a provider and the Nodes it serves.
type NodeServer struct {
	// Module names the module; "" for a sole module.
	Module string
	// Cloud is the provider the controllers call.
	Cloud cloudprovider.Interface
	// Nodes is the informer the controllers read, showing them the
	// Nodes Cloud serves.
	Nodes coreinformers.NodeInformer
}

// NodeServers returns the Node controllers' providers: one per module
// that serves Nodes, each over a view of its own Nodes, and a sole
// module over every Node, as upstream runs a provider. Every module's
// Nodes thus have workers of their own: a module whose cloud hangs holds
// its own Nodes' workers only, never another module's.
func (c *Cloud) NodeServers(nodes coreinformers.NodeInformer) []NodeServer {
	if c.sole {
		return []NodeServer{{Cloud: c, Nodes: nodes}}
	}
	var out []NodeServer
	for i := range c.modules {
		m := &c.modules[i] // Name and ServesNodes only: Cloud is c.mu's
		if !m.ServesNodes {
			continue
		}
		out = append(out, NodeServer{
			Module: m.Name,
			Cloud:  nodeCloud{Cloud: c, instances: instancesV2{Cloud: c, module: m.Name}},
			Nodes:  nodeView{NodeInformer: nodes, owns: c.owns(m.Name)},
		})
	}
	return out
}

// nodeCloud is the provider of one module's Node controllers: the Cloud,
// with InstancesV2 reaching that module only.
type nodeCloud struct {
	*Cloud
	instances instancesV2
}

func (n nodeCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return n.instances, true }

// nodeView is the Node informer of one module's Node controllers: its
// lister and its event handlers see the module's Nodes only. A Node that
// moves to the module (it was given a provider ID, or labels its rule
// matches) arrives as added, one that leaves as deleted. The upstream
// controllers read the informer through Lister, HasSynced and
// AddEventHandler only; GetStore and GetIndexer still hold every Node.
type nodeView struct {
	coreinformers.NodeInformer
	owns func(*v1.Node) bool
}

func (v nodeView) Lister() corelisters.NodeLister {
	return nodeLister{NodeLister: v.NodeInformer.Lister(), owns: v.owns}
}

func (v nodeView) Informer() cache.SharedIndexInformer {
	return viewInformer{SharedIndexInformer: v.NodeInformer.Informer(), owns: v.owns}
}

type nodeLister struct {
	corelisters.NodeLister
	owns func(*v1.Node) bool
}

func (l nodeLister) List(selector labels.Selector) ([]*v1.Node, error) {
	all, err := l.NodeLister.List(selector)
	if err != nil {
		return nil, err
	}
	var own []*v1.Node
	for _, n := range all {
		if l.owns(n) {
			own = append(own, n)
		}
	}
	return own, nil
}

// Get answers another module's Node as not found, as a Node that does
// not exist: the controllers then leave it alone.
func (l nodeLister) Get(name string) (*v1.Node, error) {
	n, err := l.NodeLister.Get(name)
	if err != nil {
		return nil, err
	}
	if !l.owns(n) {
		return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
	}
	return n, nil
}

type viewInformer struct {
	cache.SharedIndexInformer
	owns func(*v1.Node) bool
}

func (i viewInformer) filter(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.FilteringResourceEventHandler{Handler: h, FilterFunc: func(obj any) bool {
		if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = gone.Obj
		}
		n, ok := obj.(*v1.Node)
		return ok && i.owns(n)
	}}
}

func (i viewInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(i.filter(h))
}

func (i viewInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(i.filter(h), resync)
}

func (i viewInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(i.filter(h), opts)
}

// reportUnrouted records NodeNotRouted for every Node no module serves,
// now and then: no module's Node controllers see it, so none would say
// why it stays uninitialized.
func (c *Cloud) reportUnrouted(nodes cache.SharedIndexInformer) {
	report := func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		if module, why := c.routing.NodeModule(n); module == "" {
			c.reportNode(n, events.NodeNotRouted, "No module serves this Node: "+why)
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    report,
		UpdateFunc: func(_, obj any) { report(obj) },
	}); err != nil {
		klog.ErrorS(err, "Events about unrouted Nodes disabled")
	}
}
